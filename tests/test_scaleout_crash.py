"""Crash safety: SIGKILL at random points then `resume`; a non-finite loss fails cleanly (issue 7, 5)."""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path

import h5py
import keras
import mlflow
import numpy as np
import pytest
from experiments_helpers import TINY_TASKS, migrated_store, runs, write_config
from scaleout_helpers import child_env, cli, metric_steps, wait_while_alive

from experiments import errors
from experiments.commands import main
from experiments.training import run as training_run

EPOCHS = 5
TASK = {**TINY_TASKS["needle"], "num_examples": 192, "min_length": 6, "max_length": 8}


def _config(folder: Path, checkpoints: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_config(
        folder,
        TASK,
        # dropout: random masks, so the seed-generator state must be checkpointed;
        # one GRU direction keeps each of the five processes short.
        model={"dropout": 0.1, "rnn": "gru", "bidirectional": False},
        train={
            "epochs": EPOCHS,
            "batch_size": 16,
            # no tracing: cheaper for five short processes, and epochs slow enough to be
            # killed in the middle of the run (compiled, JAX finishes before the first kill)
            "run_eagerly": True,
            "seed": 11,
            "checkpoint_dir": str(checkpoints),
            "keep_checkpoints": True,  # the finished runs' weights are compared
        },
        tracking={"log_model": False, "heatmap_every": 100},
    )


def _checkpointed_epoch(checkpoints: Path) -> int:
    """The latest checkpointed 0-based epoch (-1 before the first)."""
    for state in checkpoints.glob("*/state.json"):
        return json.loads(state.read_text())["epoch"]
    return -1


def _kill_after_next_checkpoint(proc, checkpoints: Path, rng: random.Random) -> float:
    """SIGKILL `proc` a random moment after its next checkpoint; return the delay used."""
    before = _checkpointed_epoch(checkpoints)
    deadline = time.monotonic() + 400
    while _checkpointed_epoch(checkpoints) <= before:
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.02)
    delay = rng.uniform(0.05, 0.6)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    return delay


def _weights(path: Path) -> dict[str, np.ndarray]:
    out = {}
    with h5py.File(path, "r") as handle:
        handle.visititems(
            lambda name, item: (
                out.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None
            )
        )
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "kills"),
    # three kills on TensorFlow; one on JAX, whose processes cost the most (what JAX adds is
    # its own checkpointed state, restored once as three times)
    [("tensorflow", 3), ("jax", 1)],
)
def test_sigkill_then_resume_equals_uninterrupted(tmp_path, backend, kills):
    ref_ck, kill_ck = tmp_path / "ref-ck", tmp_path / "kill-ck"
    ref_uri, kill_uri = migrated_store(tmp_path / "ref"), migrated_store(tmp_path / "kill")
    ref = cli(
        ["run", str(_config(tmp_path / "ref", ref_ck))],
        child_env(MLFLOW_TRACKING_URI=ref_uri, KERAS_BACKEND=backend),
        tmp_path,
        deterministic=True,
    )
    env = child_env(MLFLOW_TRACKING_URI=kill_uri, KERAS_BACKEND=backend)
    rng = random.Random()
    proc = cli(["run", str(_config(tmp_path / "kill", kill_ck))], env, tmp_path, True)
    delays = [_kill_after_next_checkpoint(proc, kill_ck, rng)]
    (run_dir,) = kill_ck.iterdir()
    run_id = run_dir.name
    for _ in range(kills - 1):
        proc = cli(["resume", run_id], env, tmp_path, deterministic=True)
        delays.append(_kill_after_next_checkpoint(proc, kill_ck, rng))
    proc = cli(["resume", run_id], env, tmp_path, deterministic=True)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, (delays, out[-4000:])
    ref_out, _ = ref.communicate(timeout=600)
    assert ref.returncode == 0, ref_out[-4000:]

    (run,) = runs(kill_uri)  # resume never created another run
    assert run.info.run_id == run_id and run.info.status == "FINISHED"
    assert run.data.tags["keras_backend"] == backend
    steps = metric_steps(mlflow.MlflowClient(kill_uri), run_id)
    for key, got in steps.items():
        expected = (
            [EPOCHS]
            if key.startswith(("test_", "baseline_test_"))
            or key in ("train_peak_memory_mb", "run_peak_memory_mb")
            else list(range(1, EPOCHS + 1))
        )
        expected = (
            [0] if key in ("duplicate_rows", "model_parameters") else expected
        )  # at the start
        assert got == expected, (key, got, delays)
    # System metrics go on where each killed process left them: no step twice.
    system = metric_steps(mlflow.MlflowClient(kill_uri), run_id, system=True)
    assert "system/cpu_utilization_percentage" in system
    for key, got in system.items():
        assert len(got) == len(set(got)), (key, got)
    # Only the final, complete checkpoint is left; no half-written folder.
    files = sorted(p.name for p in run_dir.iterdir())
    assert files == [f"epoch-{EPOCHS - 1:04d}", "run.json", "run.lock", "state.json"]
    (ref_dir,) = ref_ck.iterdir()
    name = f"epoch-{EPOCHS - 1:04d}/model.weights.h5"
    expected_weights, got_weights = _weights(ref_dir / name), _weights(run_dir / name)
    assert expected_weights.keys() == got_weights.keys()
    for key, value in expected_weights.items():
        np.testing.assert_allclose(got_weights[key], value, atol=1e-5, err_msg=f"{key} {delays}")


def _flip(path: Path, offset: int = -64) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.slow
def test_a_refused_resume_of_a_sigkilled_run_ends_it_failed_until_it_finishes(
    tmp_path, monkeypatch, capsys
):
    uri = migrated_store(tmp_path)
    checkpoints = tmp_path / "ck"
    config = write_config(
        tmp_path,
        TINY_TASKS["needle"],
        train={"epochs": 4, "checkpoint_dir": str(checkpoints)},
        tracking={"log_model": False},
    )
    proc = cli(["run", str(config)], child_env(MLFLOW_TRACKING_URI=uri), tmp_path)
    try:
        wait_while_alive(lambda: list(checkpoints.glob("*/state.json")), proc, 300, "checkpoint")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    (run,) = runs(uri)
    run_id = run.info.run_id
    assert run.info.status == "RUNNING"  # nobody could end it
    state = json.loads((checkpoints / run_id / "state.json").read_text())
    weights = checkpoints / run_id / state["checkpoint"] / "model.weights.h5"
    _flip(weights)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    assert main(["resume", run_id]) == errors.EXIT_CONFIG  # refused as input
    assert "is damaged" in capsys.readouterr().err
    client = mlflow.MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FAILED" and run.info.end_time is not None
    reason = run.data.tags["failure_reason"]
    assert reason.startswith("resume refused") and "model.weights.h5 is damaged" in reason
    _flip(weights)  # the file restored from a backup: the run can go on
    assert main(["resume", run_id]) == 0
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert "failure_reason" not in run.data.tags  # the reason of its earlier ending is gone
    assert metric_steps(client, run_id)["loss"] == [1, 2, 3, 4]


class Poison(keras.callbacks.Callback):
    """Turns the embedding into NaN at the second batch of the second epoch."""

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.epoch == 1 and batch == 1:
            variable = self.model.trainable_variables[0]
            variable.assign(np.full(variable.shape, np.nan, dtype=variable.dtype))


def test_non_finite_loss_fails_run_and_keeps_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    uri = migrated_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    checkpoints = tmp_path / "ck"
    config = write_config(
        tmp_path,
        TINY_TASKS["needle"],
        train={"epochs": 3, "checkpoint_dir": str(checkpoints)},
        tracking={"log_model": False},
    )
    original = training_run.make_callbacks
    monkeypatch.setattr(
        training_run, "make_callbacks", lambda *a, **k: [Poison(), *original(*a, **k)]
    )
    assert main(["run", str(config)]) == 1
    assert "non-finite training loss" in capsys.readouterr().err
    (run,) = runs(uri)
    assert run.info.status == "FAILED"
    reason = run.data.tags["failure_reason"]
    assert "non-finite training loss" in reason and "epoch 2" in reason
    assert metric_steps(mlflow.MlflowClient(uri), run.info.run_id)["loss"] == [1]
    (run_dir,) = checkpoints.iterdir()
    assert json.loads((run_dir / "state.json").read_text())["epoch"] == 0
    weights = _weights(run_dir / "epoch-0000" / "model.weights.h5")
    assert all(np.isfinite(v).all() for v in weights.values() if v.dtype.kind == "f")
