"""`tools/gpu_check.py --device cpu`: the GPU script's dry run, end to end (issue 28)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from keras_attn_rnn import mechanisms

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_gpu_script_runs_its_dry_run_on_jax(tmp_path):
    out = tmp_path / "bench_gpu.json"
    done = subprocess.run(
        [sys.executable, "tools/gpu_check.py", "--device", "cpu", "--out", str(out)],
        cwd=ROOT,
        env={**_env(), "KERAS_BACKEND": "jax"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["backend"] == "jax" and report["mode"] == "cpu"
    assert report["device"].startswith("cpu (")
    steps = report["decoder_step"]
    assert set(mechanisms.names()) <= set(steps)  # every registered mechanism is timed
    for name in mechanisms.names():
        assert steps[name]["decoder_s"] > 0
        assert steps[name]["ratio_to_lstm"] == pytest.approx(
            steps[name]["decoder_s"] / steps["lstm_s"]
        )
    demo = report["demo"]["cpu"]
    assert demo["precision"] == "bfloat16" and demo["tokens_per_second"] > 0
    assert demo["epochs_per_second"] == pytest.approx(1 / demo["epoch_seconds"])
    assert report["generation"]["tokens_per_second"] > 0
    assert "| decoder step, content |" in done.stdout  # the benchmarks page's column, printed


def test_the_gpu_mode_refuses_a_machine_without_an_accelerator(tmp_path):
    done = subprocess.run(
        [sys.executable, "tools/gpu_check.py", "--device", "gpu", "--out", str(tmp_path / "x")],
        cwd=ROOT,
        env={**_env(), "KERAS_BACKEND": "jax"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert "--device gpu: no accelerator visible to jax" in done.stderr
    assert not (tmp_path / "x").exists()


def _env() -> dict:
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}
