"""The CLI is instant for help and `list`, and quiet: TensorFlow's C++ start-up lines never
reach the terminal unless the user set `TF_CPP_MIN_LOG_LEVEL`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from experiments import native_logs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("tensorflow", "keras", "mlflow", "keras_attn_rnn")

ABSL_LINES = [
    b"I0000 00:00:1796246047.610130   18575 port.cc:153] oneDNN custom operations are on.",
    b"E0000 00:00:1796245490.163538   13933 cuda_platform.cc:52] failed call to cuInit: X",
    b"W0000 00:00:1796245490.163538   13933 cpu_feature_guard.cc:227] This TensorFlow binary",
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    b"To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow "
    b"with the appropriate compiler flags.",
]


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return {**env, "PYTHONPATH": ROOT, **extra}


@pytest.mark.parametrize("argv", [["--help"], ["list"], ["run", "--help"], ["bench", "--help"]])
def test_help_and_list_import_no_framework(argv):
    code = (
        "import sys\n"
        "from experiments.commands import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout, done.stdout[-500:]
    assert "usage:" in done.stdout or "demo" in done.stdout


def test_a_command_that_loads_tensorflow_prints_only_its_own_error():
    done = subprocess.run(
        [sys.executable, "-m", "experiments", "run", "demo", "--set", "train.epochs=-1"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == "error: invalid config:", done.stderr
    assert "train.epochs" in done.stderr
    assert not [line for line in done.stderr.splitlines() if "] " in line or "absl" in line]


# JAX: installed with the dev extra (torch comes only with `make test-torch`, after this suite).
def test_a_tensorflow_strategy_on_jax_is_a_clear_error_before_any_run(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "experiments", "run", "demo", "--set", "train.distribute=mirrored"],
        capture_output=True,
        text=True,
        env=_env(KERAS_BACKEND="jax", MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path}/mlruns/mlflow.db"),
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert (
        "train.distribute: got 'mirrored'; expected one of 'none', 'data_parallel' on the jax"
        in (done.stderr)
    )
    assert not (tmp_path / "mlruns").exists()  # checked before the store is opened


def test_the_benchmark_suite_on_jax_is_a_clear_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "experiments", "bench", "--only", "pooling_overhead", "--no-mlflow"],
        capture_output=True,
        text=True,
        env=_env(KERAS_BACKEND="jax"),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "KERAS_BACKEND: the benchmark suite times TensorFlow steps" in done.stderr


def test_the_filter_drops_native_lines_and_forwards_the_rest(capfd, monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    kept = [b"Traceback (most recent call last):", b"  ValueError: x ] y", b"F0000 fatal stays"]
    with native_logs.filtered_stderr():
        assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"
        for line in ABSL_LINES[:2] + kept[:1] + ABSL_LINES[2:] + kept[1:]:
            os.write(2, line + b"\n")
        os.write(2, b"no newline at the end")
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    err = capfd.readouterr().err
    assert err == "\n".join(line.decode() for line in kept) + "\nno newline at the end"


def test_a_level_the_user_set_turns_the_filter_off(capfd, monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    with native_logs.filtered_stderr():
        os.write(2, ABSL_LINES[0] + b"\n")
    assert capfd.readouterr().err == ABSL_LINES[0].decode() + "\n"
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"


def test_every_benchmark_has_a_goal_and_the_bench_choices_are_them():
    from experiments.bench.cases import BENCHMARKS
    from experiments.bench.goals import GOALS
    from experiments.commands.bench import CHOICES

    assert list(BENCHMARKS) == list(GOALS)
    assert [*GOALS, "scaling"] == CHOICES
