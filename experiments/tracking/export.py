"""Exporting a run's trained model out of the tracking store: a SavedModel or the `.keras` file.

`export_run` reads the run's text model (its `.keras` file and text card,
see `model_logging`) and writes:

- `savedmodel`: a TensorFlow SavedModel (`serving.export_savedmodel`) whose
  `serve` (greedy, also `serving_default`) and `serve_beam` (beam search of
  a width fixed here) map int32 token ids `tokens (B, L)` to generated ids
  `tokens (B, max_length)` and their `scores (B,)` (a classifier: `serve`
  to `logits`). It loads with `tf.saved_model.load` without this library,
  and TF Serving serves it.
- `keras`: the trained model's `.keras` file (load it with
  `keras.saving.load_model` after `import keras_attn_rnn`).

A copy-attention model (`model.copy`) is exported as `keras` only: it is fed
each source in extended ids too (`source_ext`), which the SavedModel's
token-ids-in signature has no place for.

Every check of the request (format, output path, run, model) comes before
anything is written; the result is written next to `out` under a temporary
name and renamed into place, so a failure or a crash leaves no half-written
`out`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import mlflow

from experiments import backends
from experiments.errors import ConfigError
from experiments.tracking import resilient, serving, store
from experiments.tracking.text_model import copies, current_names

FORMATS = ("savedmodel", "keras")


def export_run(
    run_id: str, fmt: str, out: Path, force: bool = False, beam_width: int | None = None
) -> Path:
    """Write the model of run `run_id` to `out` in format `fmt`; return `out`."""
    out = Path(out)
    _check_request(fmt, out, force, beam_width)
    client = store.connect()
    run = store.get_run(client, run_id)
    uri = run.data.tags.get("text_model_uri")
    if not uri:
        raise ConfigError(
            f"run_id: run {run_id} has no logged model (no text_model_uri tag: it ran with "
            "tracking.log_model=false, did not finish, or predates text models)"
        )
    if uri.startswith("spooled:"):
        raise ConfigError(
            f"run_id: the model of run {run_id} is still in its local spool; upload it with "
            f"`python -m experiments sync {run_id}` first"
        )
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=tmp))
        keras_file = local / "artifacts" / "model.keras"
        card = json.loads((local / "artifacts" / "card.json").read_text(encoding="utf-8"))
        if fmt == "savedmodel" and copies(card):
            raise ConfigError(
                f"format: savedmodel takes token ids alone, and the model of run {run_id} has "
                "copy attention (model.copy), which is also fed each source in extended ids "
                "(source_ext); export it with --format keras, or serve its text_model "
                "(`python -m experiments serve RUN_ID`), which makes them from the text. "
                "Received: format='savedmodel'"
            )
        with _written_in_place(out, force) as target:
            if fmt == "keras":
                shutil.copyfile(keras_file, target)
            else:
                width = beam_width or int(
                    current_names(card.get("generate", {})).get("num_beams", 4)
                )
                serving.export_savedmodel(resilient.load_keras(keras_file), card, target, width)
    return out


def _check_request(fmt: str, out: Path, force: bool, beam_width: int | None) -> None:
    if fmt not in FORMATS:
        raise ConfigError(f"format: expected one of {', '.join(FORMATS)}. Received: format={fmt!r}")
    backend = backends.current()
    if fmt == "savedmodel" and not backend.saved_model:
        raise ConfigError(
            f"format: savedmodel needs KERAS_BACKEND=tensorflow (TensorFlow traces its serving "
            f"functions); the run's .keras file loads there whatever backend trained it. "
            f"Received: KERAS_BACKEND={backend.name!r}"
        )
    if fmt == "keras" and out.suffix != ".keras":
        raise ConfigError(
            f"OUT: a --format keras file must end with .keras (Keras loads no other). "
            f"Received: OUT={str(out)!r}"
        )
    if (out.exists() or out.is_symlink()) and not force:
        raise ConfigError(
            f"OUT: {out} exists; pass --force to replace it. Received: OUT={str(out)!r}"
        )
    if beam_width is not None and (isinstance(beam_width, bool) or beam_width < 1):
        raise ConfigError(
            f"beam_width: expected an integer >= 1. Received: beam_width={beam_width!r}"
        )


@contextlib.contextmanager
def _written_in_place(out: Path, force: bool):
    """A temporary path next to `out` to write; renamed to `out` when the block succeeds."""
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    target = folder / out.name
    try:
        yield target
        if force and (out.exists() or out.is_symlink()):
            os.replace(out, folder / ".replaced")
        os.replace(target, out)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # what was replaced, or a failed write
