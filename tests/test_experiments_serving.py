"""The logged models and `export`: fresh processes without the library, a served text model.

One tiny run per task kind (reverse, textcls, lm) is trained once for the
module; its trained model and text card are captured in-process, so every
check compares what a fresh process (or a server) gives with what
`generation.generate` gives here for the same input.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import types
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import keras
import mlflow
import numpy as np
import psutil
import pytest
from experiments_helpers import (
    TINY_TASKS,
    migrated_store,
    snapshot,
    write_config,
    write_text_dataset,
)
from hypothesis import given
from hypothesis import strategies as st
from scaleout_helpers import free_port
from serving_helpers import fresh_env, from_a_terminal, post, served

from experiments import config as config_lib
from experiments.commands import main
from experiments.data.split import pad
from experiments.data.vocab import END, START, UNK, Vocab
from experiments.errors import EXIT_CONFIG
from experiments.tasks import textcls
from experiments.tracking import model_logging, text_model
from experiments.tracking.tracker import Tracker
from experiments.training import run as training_run
from experiments.training.distribute import NullTracker
from keras_attn_rnn import generation, samplers, tokenizers

# One worker builds the module fixtures (three trained runs) for all of them (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("serving")

ROOT = Path(__file__).resolve().parents[1]
TEXTS = {"reverse": ["abc", "bad"], "lm": ["the ", "def"], "textcls": ["it was great", "awful"]}
BEAM_LENGTH = 5  # max_length asked of beam search through params
EXPORT_BEAM_WIDTH = 3

# A fresh interpreter: neither the library nor the runner can be imported while the
# Keras-flavor models and the SavedModels load; then the text models bring their own copy.
FRESH = r"""
import json, sys
assert "keras_attn_rnn" not in sys.modules
sys.modules["keras_attn_rnn"] = None
sys.modules["experiments"] = None
import numpy as np, tensorflow as tf
import mlflow, mlflow.keras, mlflow.pyfunc
print("ready", flush=True)
spec = json.loads(sys.stdin.readline())
mlflow.set_tracking_uri(spec["store"])
out = {"runs": {}, "savedmodels": {}}
for name, run in spec["runs"].items():
    tokens = np.array(run["tokens"], "int32")
    model = mlflow.keras.load_model(run["model_uri"])
    out["runs"][name] = {
        "loaded_type": type(model).__module__,
        "serve": np.asarray(model.serve(tokens)).tolist(),
        "pyfunc": np.asarray(mlflow.pyfunc.load_model(run["model_uri"]).predict(tokens)).tolist(),
    }
for name, item in spec["savedmodels"].items():
    loaded = tf.saved_model.load(item["path"])
    tokens = tf.constant(item["tokens"], tf.int32)
    result = {"signatures": sorted(loaded.signatures.keys())}
    for endpoint in ("serve", "serve_beam"):
        if hasattr(loaded, endpoint):
            outputs = getattr(loaded, endpoint)(tokens)
            result[endpoint] = {key: value.numpy().tolist() for key, value in outputs.items()}
    out["savedmodels"][name] = result
try:
    import keras_attn_rnn
    out["library_blocked"] = False
except ImportError:
    out["library_blocked"] = True
del sys.modules["keras_attn_rnn"]
for name, run in spec["runs"].items():
    text_model = mlflow.pyfunc.load_model(run["text_model_uri"])
    import keras_attn_rnn
    from keras_attn_rnn.tokenizers import vocabulary_tokenizer
    result = out["runs"][name]
    result["library_file"] = keras_attn_rnn.__file__
    result["tokenizer_file"] = vocabulary_tokenizer.__file__
    result["tokenizer_source"] = open(vocabulary_tokenizer.__file__, encoding="utf-8").read()
    result["greedy"] = text_model.predict(run["texts"])
    if run["beam"]:
        params = {"sampler": "beam", "beam_width": 4, "max_length": run["beam_length"]}
        result["beam"] = text_model.predict(run["texts"], params=params)
print("RESULT " + json.dumps(out), flush=True)
"""


class Captured(logging.Handler):
    """Every message MLflow logs while installed."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Three tiny runs (seq2seq, classification, LM), their models, cards and log messages."""
    folder = tmp_path_factory.mktemp("serving")
    errors = open(folder / "fresh.err", "w+")  # noqa: SIM115 - closed with the process
    fresh = subprocess.Popen(  # started first: its imports overlap the training
        [sys.executable, "-c", FRESH],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        cwd=folder,
        env=fresh_env(),
    )
    uri = migrated_store(folder)
    captured, logged = Captured(), {}
    original = model_logging.log_models

    def capture(model, card):
        logged[card["task"]] = (model, card)
        return original(model, card)

    mlflow_logger = logging.getLogger("mlflow")
    mlflow_logger.addHandler(captured)
    runs = {}
    try:
        with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            patch.setenv("MLFLOW_TRACKING_URI", uri)
            patch.chdir(folder)
            patch.setattr(model_logging, "log_models", capture)
            for name in TEXTS:
                task = dict(TINY_TASKS[name])
                if name == "textcls":
                    task["path"] = str(write_text_dataset(folder))
                path = write_config(folder, task, f"{name}.yaml", generate={"max_length": 8})
                prepared = training_run.validate(config_lib.load_config(path))
                run_id = training_run.execute(prepared)
                tags = mlflow.MlflowClient(uri).get_run(run_id).data.tags
                model, card = logged[name]
                runs[name] = {
                    "run_id": run_id,
                    "tags": tags,
                    "model": model,
                    "card": card,
                    "task": prepared.task,
                    "cfg": prepared.cfg,
                }
    finally:
        mlflow_logger.removeHandler(captured)
    messages = captured.messages + [str(w.message) for w in seen]
    yield {"store": uri, "folder": folder, "runs": runs, "messages": messages, "fresh": fresh}
    if fresh.poll() is None:
        fresh.kill()
        fresh.wait(timeout=30)
    errors.close()


def _sources(task, texts) -> np.ndarray:
    """The runner's encoding of seq2seq sources / LM prompts typed as characters."""
    return pad([task.vocab.encode(list(text)) for text in texts])


def _generate(entry, prompts, **options):
    """What `generation.generate` gives in-process for the run's model."""
    kind = entry["task"].kind.name
    max_length = options.pop("max_length", entry["cfg"].generate.max_length)
    ids = {"eos_id": END, "start_id": START} if kind == "seq2seq" else {}
    name = options.pop("sampler", "greedy")
    sampler = samplers.get(name, **options)
    return generation.generate(entry["model"], prompts, max_length, sampler=sampler, **ids)


def _expected_records(entry, texts, **options) -> list[dict]:
    """The text model's records, built from `generation.generate` and the runner's vocab."""
    task = entry["task"]
    prompts = [task.vocab.encode(list(text)) for text in texts]
    result = _generate(entry, prompts, **options)
    records = []
    for row, prompt in enumerate(prompts):
        ids = result.tokens[row]
        steps = next((i for i, t in enumerate(ids) if t in (0, END)), len(ids))
        if task.kind.name != "seq2seq":
            steps = int((ids != 0).sum())  # a language model never stops early
        tokens = [task.output_vocab.tokens[i] for i in ids[:steps]]
        attended = [task.vocab.tokens[i] for i in prompt]
        if task.kind.name == "lm":
            attended += tokens[:-1]
        records.append(
            {
                "text": task.output_vocab.decode(ids),
                "tokens": tokens,
                "attended_tokens": attended,
                "attention": result.attention[row, :steps, : len(attended)],
                "score": float(result.scores[row]),
            }
        )
    return records


def _assert_records(got: list[dict], expected: list[dict]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g["text"] == e["text"]
        assert g["tokens"] == e["tokens"] and g["attended_tokens"] == e["attended_tokens"]
        np.testing.assert_allclose(
            np.array(g["attention"]).reshape(e["attention"].shape), e["attention"], atol=1e-5
        )
        assert g["score"] == pytest.approx(e["score"], abs=1e-4)


def _classify(entry, texts):
    """The runner's encoding and logits for raw texts (textcls)."""
    task = entry["task"]
    ids = [task.tokenizer.encode(t) for t in texts]  # as `TextClsTask.build` encodes its rows
    tokens = pad(ids)
    logits, weights = entry["model"](tokens, training=False, return_attention_scores=True)
    return ids, np.asarray(logits, "float64"), np.asarray(weights, "float64")


@pytest.fixture(scope="module")
def fresh(trained):
    """What the fresh process (no `keras_attn_rnn`, no runner) got from the logged models."""
    runs, savedmodels = trained["runs"], {}
    folder = trained["folder"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", trained["store"])
        for name in ("reverse", "textcls"):
            out = folder / f"{name}_savedmodel"
            argv = ["export", runs[name]["run_id"], "--format", "savedmodel", str(out)]
            assert main(argv + ["--beam-width", str(EXPORT_BEAM_WIDTH)]) == 0
            tokens = _sources(runs[name]["task"], TEXTS[name])
            if name == "textcls":
                tokens = pad(_classify(runs[name], TEXTS[name])[0])
            savedmodels[name] = {"path": str(out), "tokens": tokens.tolist()}
    spec = {
        "store": trained["store"],
        "savedmodels": savedmodels,
        "runs": {
            name: {
                "model_uri": entry["tags"]["model_uri"],
                "text_model_uri": entry["tags"]["text_model_uri"],
                "tokens": entry["card"]["examples"]["tokens"],
                "texts": TEXTS[name],
                "beam": entry["card"]["kind"] != "classification",
                "beam_length": BEAM_LENGTH,
            }
            for name, entry in runs.items()
        },
    }
    process = trained["fresh"]
    errors = (trained["folder"] / "fresh.err").read_text
    assert process.stdout.readline().strip() == "ready", errors()[-3000:]
    out, _ = process.communicate(json.dumps(spec) + "\n", timeout=300)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert lines, f"fresh process failed (exit {process.returncode}):\n{errors()[-4000:]}"
    return json.loads(lines[0][len("RESULT ") :])


@pytest.mark.slow
def test_keras_flavor_loads_without_the_library_and_serves_generate(trained, fresh):
    assert fresh["library_blocked"]  # the library really could not be imported there
    for name, entry in trained["runs"].items():
        got = fresh["runs"][name]
        assert got["loaded_type"].startswith("tensorflow"), got["loaded_type"]  # a SavedModel
        tokens = np.array(entry["card"]["examples"]["tokens"], "int32")
        if name == "textcls":
            expected = np.asarray(entry["model"](tokens, training=False))
            np.testing.assert_allclose(got["serve"], expected, atol=1e-5)
            np.testing.assert_allclose(got["pyfunc"], expected, atol=1e-5)
        else:
            expected = _generate(entry, tokens).tokens
            assert expected.shape == (len(tokens), 8)
            np.testing.assert_array_equal(got["serve"], expected)
            np.testing.assert_array_equal(got["pyfunc"], expected)


@pytest.mark.slow
def test_text_model_loads_with_its_own_library_and_matches_generate(trained, fresh):
    for name, entry in trained["runs"].items():
        got = fresh["runs"][name]
        library = Path(got["library_file"])
        assert library.parts[-3:] == ("code", "keras_attn_rnn", "__init__.py"), library
        assert ROOT not in library.parents  # the copy that travels with the model
        tokenizer = Path(got["tokenizer_file"])  # the library's tokenizer, travelling with it
        assert tokenizer.parts[-4:-1] == ("code", "keras_attn_rnn", "tokenizers"), tokenizer
        source = ROOT / "keras_attn_rnn" / "tokenizers" / "vocabulary_tokenizer.py"
        assert got["tokenizer_source"] == source.read_text(encoding="utf-8")
        if name == "textcls":
            ids, logits, weights = _classify(entry, TEXTS[name])
            classes = entry["task"].class_names
            for row, record in enumerate(got["greedy"]):
                probabilities = np.exp(logits[row]) / np.exp(logits[row]).sum()
                assert record["label"] == classes[int(np.argmax(logits[row]))]
                assert list(record["probabilities"]) == classes
                np.testing.assert_allclose(
                    list(record["probabilities"].values()), probabilities, atol=1e-5
                )
                assert record["tokens"] == [entry["task"].vocab.tokens[i] for i in ids[row]]
                np.testing.assert_allclose(
                    record["attention"], weights[row, : len(ids[row])], atol=1e-5
                )
            continue
        _assert_records(got["greedy"], _expected_records(entry, TEXTS[name]))
        beam = _expected_records(
            entry, TEXTS[name], sampler="beam", beam_width=4, max_length=BEAM_LENGTH
        )
        _assert_records(got["beam"], beam)


@pytest.mark.slow
def test_exported_savedmodel_reproduces_generate_without_the_library(trained, fresh):
    reverse = trained["runs"]["reverse"]
    got = fresh["savedmodels"]["reverse"]
    assert {"serve", "serve_beam", "serving_default"} <= set(got["signatures"])
    sources = _sources(reverse["task"], TEXTS["reverse"])
    greedy = _generate(reverse, sources)
    np.testing.assert_array_equal(got["serve"]["tokens"], greedy.tokens)
    np.testing.assert_allclose(got["serve"]["scores"], greedy.scores, atol=1e-4)
    beam = _generate(reverse, sources, sampler="beam", beam_width=EXPORT_BEAM_WIDTH)
    np.testing.assert_array_equal(got["serve_beam"]["tokens"], beam.tokens)
    np.testing.assert_allclose(got["serve_beam"]["scores"], beam.scores, atol=1e-4)
    classifier = trained["runs"]["textcls"]
    _, logits, _ = _classify(classifier, TEXTS["textcls"])
    np.testing.assert_allclose(
        fresh["savedmodels"]["textcls"]["serve"]["logits"], logits, atol=1e-5
    )
    assert "serve_beam" not in fresh["savedmodels"]["textcls"]


@pytest.mark.slow
def test_logged_models_carry_signature_example_and_pinned_requirements(trained, tmp_path):
    messages = trained["messages"]
    assert any("Validating input example" in m for m in messages)  # the capture works
    assert not [m for m in messages if "without specifying model signature" in m]
    assert not [m for m in messages if "Failed to validate serving input" in m]
    entry = trained["runs"]["reverse"]
    mlflow.set_tracking_uri(trained["store"])
    keras_info = mlflow.models.get_model_info(entry["tags"]["model_uri"])
    assert keras_info.flavors["keras"]["save_exported_model"] is True
    (tokens,) = keras_info.signature.inputs.inputs
    assert tokens.type == np.dtype("int32") and tuple(tokens.shape) == (-1, -1)
    assert keras_info.saved_input_example_info["type"] == "ndarray"
    text_info = mlflow.models.get_model_info(entry["tags"]["text_model_uri"])
    params = {p.name: p.default for p in text_info.signature.params.params}
    assert params["sampler"] == "greedy" and params["max_length"] == 8
    assert {p.name for p in text_info.signature.outputs.inputs} >= {"text", "attention"}
    assert text_info.metadata["keras_attn_rnn_version"] == "0.1.0"
    local = Path(
        mlflow.artifacts.download_artifacts(entry["tags"]["text_model_uri"], dst_path=str(tmp_path))
    )
    requirements = (local / "requirements.txt").read_text().split()
    assert f"keras=={keras.__version__}" in requirements
    assert any(r.startswith("tensorflow==") for r in requirements)
    assert not any(r.startswith("keras-attn-rnn") for r in requirements)  # travels as code
    assert (local / "code" / "keras_attn_rnn" / "generation.py").is_file()
    card = json.loads((local / "artifacts" / "card.json").read_text())
    assert card == json.loads(json.dumps(entry["card"]))  # the vocabulary travels too
    assert not list(local.rglob("*.pkl"))  # nothing pickled


@pytest.mark.slow
def test_served_text_model_answers_http_and_refuses_bad_input(trained, tmp_path):
    entry = trained["runs"]["reverse"]
    started = time.monotonic()
    uri = f"runs:/{entry['run_id']}/text_model"
    with served(uri, trained["store"], tmp_path) as url:
        status, body = post(url, {"inputs": ["abc"]})
        assert status == 200, body
        _assert_records(body["predictions"], _expected_records(entry, ["abc"]))
        status, body = post(url, {"dataframe_split": {"columns": ["text"], "data": [["abc"]]}})
        assert status == 200, body  # a pandas column
        _assert_records(body["predictions"], _expected_records(entry, ["abc"]))
        params = {"sampler": "beam", "beam_width": 4, "max_length": BEAM_LENGTH}
        status, body = post(url, {"inputs": ["abc", "bad"], "params": params})
        assert status == 200, body
        _assert_records(body["predictions"], _expected_records(entry, ["abc", "bad"], **params))
        refused = {
            "non-strings": ({"inputs": [1, 2]}, "non-empty strings. Received: 1"),
            "a null": ({"inputs": ["abc", None]}, "Received: None at position 1"),
            "an empty string": ({"inputs": [""]}, "non-empty strings. Received: ''"),
            "no inputs": ({"inputs": []}, "at least one string"),
            "a bad sampler": ({"inputs": ["abc"], "params": {"sampler": "nope"}}, "sampler must"),
            # bounded requests: refused at once, not minutes of work and a huge answer
            "a long string": (
                {"inputs": ["abc", "a" * (text_model.MAX_INPUT_CHARS + 1)]},
                f"Received: {text_model.MAX_INPUT_CHARS + 1} characters at position 1",
            ),
            "too many strings": (
                {"inputs": ["abc"] * (text_model.MAX_INPUTS + 1)},
                f"Received: {text_model.MAX_INPUTS + 1} strings",
            ),
            "too much attention": (
                {"inputs": ["abcdefgh"] * 200, "params": {"max_length": 1000}},
                "Received: 200 inputs x 1 beams x 1000 tokens x 8 attended tokens = 1600000",
            ),
            "too many beams": (
                {"inputs": ["abc"], "params": {"sampler": "beam", "beam_width": 100_000}},
                "Received: 1 inputs x 100000 beams x 8 tokens x 3 attended tokens",
            ),
        }
        for case, (request, message) in refused.items():
            status, body = post(url, request)
            assert status == 400, (case, body)
            assert message in body["message"], (case, body["message"])
            assert "Traceback" not in body["message"], case
            # the request the server repeats before the message is cut (`text_model.Refused`)
            assert len(json.dumps(body)) < 2000, (case, len(json.dumps(body)))
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_serve_command_starts_answers_and_stops_on_ctrl_c(trained, tmp_path):
    """`python -m experiments serve RUN_ID` from a shell whose PATH lacks the venv (the
    serving guide's newcomer case): it serves text in, text out, and Ctrl+C stops every process."""
    entry = trained["runs"]["reverse"]
    port = free_port()
    env = {**fresh_env(), "MLFLOW_TRACKING_URI": trained["store"], "PATH": "/usr/bin:/bin"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])  # the runner, not installed
    command = [sys.executable, "-m", "experiments", "serve", entry["run_id"]]
    process = subprocess.Popen(
        from_a_terminal(command + ["--port", str(port)]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )
    output = []
    try:
        deadline = time.monotonic() + 150
        while not any(line.startswith("curl -s") for line in output):
            line = process.stdout.readline()
            assert line and time.monotonic() < deadline, "".join(output)[-3000:]
            output.append(line)
        url = f"http://127.0.0.1:{port}/invocations"
        assert any(url in line for line in output), output
        status, body = post(url, {"inputs": ["abc"]})
        assert status == 200, body
        _assert_records(body["predictions"], _expected_records(entry, ["abc"]))
        process.send_signal(signal.SIGINT)  # Ctrl+C
        assert process.wait(timeout=60) == 0, "".join(output)[-3000:]
        with pytest.raises(OSError):  # the server's workers are gone too
            urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2)
    finally:
        # The server runs in a session of its own, which only the command stops: killed
        # (a failed test), the command leaves it to be killed here.
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(process.pid).children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        process.stdout.close()


def test_serve_command_refuses_an_unknown_run_before_starting_anything(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", migrated_store(tmp_path))
    assert main(["serve", "no-such-run", "--dry-run"]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "run_id: no run 'no-such-run'" in err, err
    assert main(["serve", "x", "--port", "0"]) == EXIT_CONFIG
    assert "--port: expected 1 to 65535. Received: --port=0" in capsys.readouterr().err


@pytest.mark.slow
def test_export_keras_writes_a_loadable_copy_and_refuses_bad_requests(trained, tmp_path, capsys):
    entry = trained["runs"]["reverse"]
    run_id = entry["run_id"]
    mlflow.set_tracking_uri(trained["store"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", trained["store"])
        out = tmp_path / "out" / "model.keras"
        assert main(["export", run_id, "--format", "keras", str(out)]) == 0
        loaded = keras.saving.load_model(out, safe_mode=True)
        sources = _sources(entry["task"], TEXTS["reverse"])
        np.testing.assert_array_equal(
            generation.generate(loaded, sources, 8, eos_id=END, start_id=START).tokens,
            _generate(entry, sources).tokens,
        )
        bare = mlflow.MlflowClient(trained["store"]).create_run(
            mlflow.get_experiment_by_name("tests").experiment_id
        )
        before = snapshot(tmp_path)
        cases = {
            "an unknown run": (["nope", "--format", "keras", str(tmp_path / "a.keras")], "no run"),
            "a run with no model": (
                [bare.info.run_id, "--format", "savedmodel", str(tmp_path / "b")],
                "has no logged model",
            ),
            "an existing output": ([run_id, "--format", "keras", str(out)], "--force"),
            "an unknown format": (
                [run_id, "--format", "onnx", str(tmp_path / "c")],
                "format: expected one of savedmodel, keras",
            ),
        }
        for case, (argv, message) in cases.items():
            assert main(["export", *argv]) == EXIT_CONFIG, case
            assert message in capsys.readouterr().err, case
            assert snapshot(tmp_path) == before, case  # nothing written
        assert main(["export", run_id, "--format", "keras", str(out), "--force"]) == 0
        assert keras.saving.load_model(out, safe_mode=True).count_params() == loaded.count_params()
        assert sorted(p.name for p in out.parent.iterdir()) == ["model.keras"]  # no temporaries


# --- the text card's encoding is the runner's (fast, no training) -----------------------

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
TEXT = st.text(alphabet="abcde +1209,.!?xyz\u00e9\n", max_size=12)


@given(text=TEXT)
def test_text_codec_encodes_characters_like_the_runner(text):
    letters = Vocab(list("abcde"))
    card = {"specials": SPECIALS, "input": letters.to_dict()}
    assert text_model.TextCodec(card).encode(text) == letters.encode(list(text))


@given(text=TEXT, lowercase=st.booleans())
def test_text_codec_encodes_words_like_textcls(text, lowercase):
    words = Vocab(["it", "was", "great", ",", "!", "A"], joiner=" ")
    options = types.SimpleNamespace(lowercase=lowercase)
    runner = textcls.tokenizer(options, words)  # as `TextClsTask.build` makes it
    # a card as earlier versions wrote it (the keys they set, the cut among them), and as
    # this one does (the cut in `max_input_tokens`)
    old = {"split": "regex", "pattern": textcls.TOKEN_PATTERN, "lowercase": lowercase}
    old |= {"max_tokens": 4, "empty_as_unknown": True}
    cards = [
        {"specials": SPECIALS, "input": {**words.to_dict(), **old}},
        {"specials": SPECIALS, "input": tokenizers.serialize(runner), "max_input_tokens": 4},
    ]
    # words and single punctuation marks, the first 4, never none (an independent reference)
    tokens = re.findall(r"\w+|[^\w\s]", text.lower() if lowercase else text)[:4]
    expected = words.encode(tokens) or [UNK]
    assert runner.encode(text)[:4] == expected
    for card in cards:
        assert text_model.TextCodec(card).encode(text) == expected


@given(a=st.integers(0, 99), b=st.integers(0, 99), reverse=st.booleans())
def test_text_codec_encodes_questions_like_addition(a, b, reverse):
    task = {"name": "addition", "digits": 2, "num_examples": 16, "reverse_input": reverse}
    runner = config_lib.validate({"task": task}).task.build().tokenizer
    digits = Vocab(list("0123456789+ "))
    old = {"split": "chars", "pad_to": 5, "reverse": reverse}  # as earlier versions wrote it
    question = f"{a}+{b}".ljust(5)  # padded to two operands and "+", as keras.io's example
    expected = digits.encode(question[::-1] if reverse else question)
    assert runner.encode(f"{a}+{b}") == expected
    for spec in ({**digits.to_dict(), **old}, tokenizers.serialize(runner)):
        card = {"specials": SPECIALS, "input": spec}
        assert text_model.TextCodec(card).encode(f"{a}+{b}") == expected


@given(ids=st.lists(st.integers(0, 8), max_size=10), end_id=st.sampled_from([None, END]))
def test_text_codec_decodes_like_the_runner(ids, end_id):
    vocab = Vocab(list("abcde"))
    card = {"specials": SPECIALS, "input": vocab.to_dict(), "end_id": end_id}
    assert text_model.TextCodec(card).decode(ids) == vocab.decode(ids)


def test_text_model_refuses_what_is_not_text():
    for bad, message in [
        ([], "at least one string"),
        (["a", 3], "Received: 3 at position 1"),
        (["a", ""], "Received: '' at position 1"),
        ("abc", r"a list of strings, even for one text.*Received: a single string, 'abc'"),
        (np.array("abc"), r"even for one text: send \{\"inputs\": \[\"...\"\]\}"),
        (np.array([["a"]]), r"Received: an array of shape \(1, 1\)"),
        (["a", "b" * 10_001], "at most 10000 characters. Received: 10001 characters at position 1"),
        (["a"] * 257, r"at most 256 strings \(send more requests\). Received: 257 strings"),
        ([["a" * 1000] * 1000], r"Received: \['a+\.\.\.a+', .*, \.\.\.\] at position 0"),
    ]:
        with pytest.raises(mlflow.exceptions.MlflowException, match=message) as caught:
            text_model.texts_of(bad)
        assert caught.value.error_code == "INVALID_PARAMETER_VALUE"
    assert text_model.texts_of(np.array(["a", "b"])) == ["a", "b"]
    assert text_model.texts_of(["a" * 10_000] * 256) == ["a" * 10_000] * 256  # the bounds


def test_a_refusal_repeats_a_bounded_part_of_the_request():
    """MLflow's scoring server puts the whole request before a refusal's message; the answer to
    a 20,000-character input keeps 200 characters of it, not 20 KB (issue 50 item 7)."""
    from mlflow.pyfunc import scoring_server

    def predict(data, params=None):
        text_model.texts_of(data)

    served = types.SimpleNamespace(metadata=None, predict=predict)
    request = json.dumps({"inputs": ["a" * 20_000]})
    with pytest.raises(mlflow.exceptions.MlflowException) as caught:
        scoring_server.invocations(request, "application/json", served, None)
    answer = json.loads(caught.value.serialize_as_json())
    assert caught.value.get_http_status_code() == 400
    assert len(caught.value.serialize_as_json()) < 1000, len(caught.value.serialize_as_json())
    head = f"Failed to predict data '['{'a' * (text_model.REQUEST_ECHO - 2)}... "
    assert answer["message"].startswith(head + "(20004 characters in all)'. \nError: ")
    assert answer["message"].endswith("Received: 20000 characters at position 0")
    short = text_model.invalid("x")  # a short request is repeated whole
    short.message = f"{text_model.ECHO_HEAD}['abc']{text_model.ECHO_TAIL}x"
    assert short.message == "Failed to predict data '['abc']'. \nError: x"


def test_text_model_refuses_a_request_past_its_attention_bound():
    text_model.check_attention(10, 4, 1000, 25)  # 1,000,000 weights: the bound
    with pytest.raises(mlflow.exceptions.MlflowException, match="= 1000010") as caught:
        text_model.check_attention(1, 1, 10, 100_001)
    assert caught.value.error_code == "INVALID_PARAMETER_VALUE"


def test_non_chief_workers_take_the_model_logging_call_and_log_nothing():
    tracker_call = inspect.signature(Tracker.log_model).parameters
    assert list(inspect.signature(NullTracker.log_model).parameters) == list(tracker_call)
    assert NullTracker().log_model(object(), {"kind": "seq2seq"}) == {}
