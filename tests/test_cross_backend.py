"""`.keras` files saved on TensorFlow load on JAX and PyTorch and give the same outputs.

Every public layer (the five scores, AttentionPooling, SequenceAttention,
AttentionDecoder), the three models, a `Seq2Seq` with each stateful mechanism and a
copy-attention `Seq2Seq` (generating over its extended vocabulary) are saved by `cross_backend.py` in a
TensorFlow process, then loaded in safe mode in a JAX and a PyTorch process
(each backend chosen before Keras is imported), which compare outputs (within
2e-5) and, for the generating models, greedy tokens (exactly).

Needs TensorFlow, JAX and torch in this environment (`make test-torch` installs
torch into `.venv`).
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from helpers import ROOT

from keras_attn_rnn import mechanisms, scores

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(ROOT, "tests", "cross_backend.py")
MODULES = ("tensorflow", "jax", "torch")
CASES = (
    {f"score_{name}" for name in scores.names()}
    | {
        "score_additive_normalize",
        "pooling_learned",
        "pooling_external_additive",
        "sequence_attention_causal_window",
        "sequence_attention_additive",
        "decoder_lstm_bahdanau",
        "decoder_gru_luong_stacked",
        "model_classifier",
        "model_language_model",
        "model_seq2seq_bahdanau",
        "model_seq2seq_luong",
        "model_seq2seq_copy",
    }
    | {f"model_seq2seq_{name}" for name in mechanisms.names() if name != "content"}
)


def _env(backend):
    return dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)


def test_keras_files_saved_on_tensorflow_load_identically_on_jax_and_torch(tmp_path):
    missing = [m for m in MODULES if importlib.util.find_spec(m) is None]
    assert not missing, (
        f"the cross-backend test needs {missing} installed in {sys.prefix} "
        "(make test-torch installs torch==2.13.0 into .venv)"
    )
    saved = subprocess.run(
        [sys.executable, SCRIPT, "save", str(tmp_path)],
        capture_output=True,
        text=True,
        env=_env("tensorflow"),
        timeout=600,
    )
    assert saved.returncode == 0 and "SAVED" in saved.stdout, saved.stderr[-3000:]
    with open(tmp_path / "cases.json") as f:
        cases = list(json.load(f)["cases"])
    assert set(cases) == CASES, set(cases) ^ CASES

    # The two loads run side by side (one process per backend).
    checks = {
        backend: subprocess.Popen(
            [sys.executable, SCRIPT, "check", str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(backend),
        )
        for backend in ("jax", "torch")
    }
    reports = {backend: process.communicate(timeout=900) for backend, process in checks.items()}
    for backend, (out, err) in reports.items():
        assert f"on {backend}," in out, f"{backend} process did not start:\n{err[-3000:]}"
        passed = {line.split()[1] for line in out.splitlines() if line.startswith("OK ")}
        assert checks[backend].returncode == 0 and passed == set(cases), (
            f"saved on tensorflow, loaded on {backend}: "
            f"{sorted(set(cases) - passed)} failed\n{out[-6000:]}\n{err[-2000:]}"
        )
