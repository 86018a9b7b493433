"""A trained model logged as two MLflow models of the active run: `model` and `text_model`.

- `model`: MLflow's Keras flavor in its exported form (`save_exported_model=True`),
  a TensorFlow SavedModel whose `serve` runs `serving.ServingModel`: int32
  token ids `(B, L)` to greedy-generated ids `(B, max_length)` (seq2seq, LM)
  or logits `(B, classes)` (classification). `mlflow.keras.load_model`
  returns it through `tf.saved_model.load`, so it loads where TensorFlow is
  installed, with neither this library nor the runner, and nothing is
  pickled. Logged with its signature and input example (the card's example
  token ids).
- `text_model`: the pyfunc of `text_model.py`, an MLflow model from code
  (the file is the model; nothing pickled), with the trained `.keras` file
  and the text card as artifacts, and the `keras_attn_rnn` package (its
  tokenizers are the ones the card configures) as its `code_paths` (so the
  served environment needs nothing of this project installed). Its signature declares the output records and the generation
  params (not the input: see `text_signature`); its input example is the
  card's example texts.

Both pin the versions of Keras, the backend's framework and NumPy in use (the
text model also pandas); the library's version is in their metadata, since it
travels as code rather than as a requirement.

The Keras-flavor `model` is logged where TensorFlow is the Keras backend
(`Backend.saved_model`: TensorFlow traces its serving function) and the
model takes token ids alone; on JAX and PyTorch, and for a copy-attention
model (which is fed each source in extended ids too, `source_ext`), the run
logs the `text_model` only and says why in its `keras_model_skipped` tag.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import types
import warnings
from pathlib import Path

import keras
import mlflow
import numpy as np
import pandas as pd
from mlflow.models import ModelSignature, infer_signature
from mlflow.types import Schema, TensorSpec

import keras_attn_rnn
from experiments import backends
from experiments.tracking.serving import ServingModel
from experiments.tracking.text_model import classifies, copies

MODEL = "model"
TEXT_MODEL = "text_model"
TEXT_MODEL_FILE = Path(__file__).with_name("text_model.py")
LIBRARY_FOLDER = Path(keras_attn_rnn.__file__).resolve().parent
# What the text model imports besides its pinned requirements: shipped with it (a folder in
# `code_paths` lands in the model's `code/` folder, on `sys.path` when it loads).
CODE_PATHS = (LIBRARY_FOLDER,)


def keras_model_skipped(card: dict | None = None) -> str | None:
    """Why the Keras-flavor model is not logged, on this backend for the model of `card`
    (None: it is logged)."""
    backend = backends.current()
    if not backend.saved_model:
        return (
            f"the Keras-flavor model is a TensorFlow SavedModel; this run trained on the "
            f"{backend.name} backend, so it logged the text_model (its .keras file loads on "
            "every backend)"
        )
    if card is not None and card.get("peer"):
        return (
            "the Keras-flavor model compiles the library's decoding loop into a SavedModel; "
            "the plain-Keras peer (model.decoder: keras) has none of its own, so this run "
            "logged the text_model, which decodes it through KerasAttentionGenerator"
        )
    if card is not None and copies(card):
        return (
            "the Keras-flavor model serves token ids alone; a copy-attention model "
            "(model.copy) is also fed each source in extended ids (source_ext), so this run "
            "logged the text_model, which makes them from the text"
        )
    return None


def model_tags(card: dict | None = None) -> tuple[str, ...]:
    """The run tags naming the logged models, on this backend for the model of `card`."""
    if keras_model_skipped(card) is None:
        return (MODEL + "_uri", TEXT_MODEL + "_uri")
    return (TEXT_MODEL + "_uri",)


def skipped_note(card: dict | None = None) -> dict[str, str]:
    """The run tag saying why the Keras-flavor model is missing (empty where it is logged)."""
    reason = keras_model_skipped(card)
    return {} if reason is None else {"keras_model_skipped": reason}


def log_models(model, card: dict) -> dict[str, str]:
    """Log `model` (trained, built) with its text card to the active run.

    Returns the tags of `model_tags(card)`: `{"model_uri": ..., "text_model_uri": ...}`.
    """
    with tempfile.TemporaryDirectory() as tmp:
        keras_file = Path(tmp) / "model.keras"
        model.save(keras_file)
        card_file = Path(tmp) / "card.json"
        card_file.write_text(json.dumps(card, indent=1), encoding="utf-8")
        # validating an input example loads the model's code_paths
        with _sys_path_kept(), _environment_reads_untracked():
            tags = {}
            if keras_model_skipped(card) is None:
                tags["model_uri"] = log_keras_model(model, card)
            tags["text_model_uri"] = log_text_model(keras_file, card_file, card)
            return tags


def log_keras_model(model, card: dict) -> str:
    """The Keras-flavor model (exported form); returns its URI."""
    example = np.asarray(card["examples"]["tokens"], dtype="int32")
    interactive = keras.config.is_interactive_logging_enabled()
    keras.config.disable_interactive_logging()  # the export's listing of every variable
    try:
        info = mlflow.models.Model.log(
            artifact_path=None,
            name=MODEL,
            flavor=_EXPORTED_KERAS,
            model=ServingModel(model, card),
            save_exported_model=True,
            signature=keras_signature(card),
            input_example=example,
            pip_requirements=requirements(),
            metadata=metadata(card),
        )
    finally:
        if interactive:
            keras.config.enable_interactive_logging()
    return info.model_uri


def log_text_model(keras_file: Path, card_file: Path, card: dict) -> str:
    """The pyfunc text model; returns its URI."""
    info = mlflow.pyfunc.log_model(
        name=TEXT_MODEL,
        python_model=str(TEXT_MODEL_FILE),
        artifacts={"model": str(keras_file), "card": str(card_file)},
        code_paths=[str(path) for path in CODE_PATHS],
        signature=text_signature(card),
        input_example=list(card["examples"]["text"]),
        pip_requirements=requirements() + [f"pandas=={pd.__version__}", *card_requirements(card)],
        metadata=metadata(card),
    )
    return info.model_uri


def keras_signature(card: dict) -> ModelSignature:
    """int32 token ids `(-1, -1)` in; generated ids `(-1, max_length)` or logits out."""
    tokens = Schema([TensorSpec(np.dtype("int32"), (-1, -1))])
    if classifies(card):
        output = TensorSpec(np.dtype("float32"), (-1, len(card["classes"])))
    else:
        output = TensorSpec(np.dtype("int32"), (-1, int(card["generate"]["max_length"])))
    return ModelSignature(inputs=tokens, outputs=Schema([output]))


def text_signature(card: dict) -> ModelSignature:
    """The records of `text_model.py` out, and the generation params with their defaults.

    No input schema: with one, MLflow's scoring server would coerce what it
    is sent to strings before the model sees it (`1` to `"1"`, `null` to
    `"None"`), so non-strings could not be refused; the model checks its
    inputs itself (`text_model.texts_of`).
    """
    if classifies(card):
        probabilities = {name: 0.5 for name in card["classes"]}
        record = {"label": "", "probabilities": probabilities, "tokens": [""], "attention": [0.5]}
        params = None
    else:
        record = {
            "text": "",
            "tokens": [""],
            "attention": [[0.5]],
            "attended_tokens": [""],
            "score": 0.5,
        }
        if copies(card):
            record["p_gen"] = [0.5]
        params = {"sampler": "greedy", **card["generate"]}
    if "max_input_tokens" in card:
        record["truncated"] = False
    with warnings.catch_warnings():  # integer params are never missing: MLflow's hint is moot
        warnings.filterwarnings("ignore", message=".*integer column", category=UserWarning)
        inferred = infer_signature(list(card["examples"]["text"]), [record], params=params)
    return ModelSignature(inputs=None, outputs=inferred.outputs, params=inferred.params)


def requirements() -> list[str]:
    """The pinned packages both models need (the library itself travels as code)."""
    return [
        f"keras=={keras.__version__}",
        *backends.current().requirements(),
        f"numpy=={np.__version__}",
    ]


def card_requirements(card: dict) -> list[str]:
    """What the card's tokenizers need besides Keras: `sentencepiece` for subword units."""
    classes = {
        entry.get("class_name") for entry in (card.get("input"), card.get("output")) if entry
    }
    if "SentencePieceTokenizer" not in classes:
        return []
    import sentencepiece

    return [f"sentencepiece=={sentencepiece.__version__}"]


def metadata(card: dict) -> dict:
    return {
        "keras_attn_rnn_version": keras_attn_rnn.__version__,
        "task": card["task"],
        "task_kind": card["kind"],
    }


def _save_exported_keras(path, **kwargs) -> None:
    # MLflow 3.17's `mlflow.keras.save_model` writes the input example before it makes
    # the model folder (MLflow issue 16183): make it first.
    os.makedirs(path, exist_ok=True)
    kwargs.pop("validate_serving_input", None)
    mlflow.keras.save_model(path=path, **kwargs)


# `mlflow.keras` as `Model.log` uses a flavor: its name and `save_model`.
_EXPORTED_KERAS = types.SimpleNamespace(__name__="mlflow.keras", save_model=_save_exported_keras)


@contextlib.contextmanager
def _environment_reads_untracked():
    """Log without MLflow's tracking of environment reads, unless the user asked for it.

    While it logs a model, MLflow swaps `os.environ`'s readers for ones that add each name
    read to a set, then iterates over that set; a read by any other thread of the run in
    between (data feeds, logging) grows it mid-iteration and fails the logging with
    "Set changed size during iteration" (seen in CI). What it records are names like
    `*API_KEY*` and `DATABRICKS_*` read while the model predicts: ours read none.
    """
    name = "MLFLOW_RECORD_ENV_VARS_IN_MODEL_LOGGING"
    if name in os.environ:
        yield
        return
    os.environ[name] = "false"
    try:
        yield
    finally:
        os.environ.pop(name, None)


@contextlib.contextmanager
def _sys_path_kept():
    """Restore `sys.path` afterwards: loading a model with code_paths prepends its folder."""
    saved = list(sys.path)
    try:
        yield
    finally:
        sys.path[:] = saved
