"""Checkpoints carry their run id and a sha256 per file; damage is refused in one line (issue 30)."""

from __future__ import annotations

import json

import keras
import mlflow
import numpy as np
import pytest
from experiments_helpers import (
    TINY_TASKS,
    migrated_store,
    run_interrupted_after_checkpoint,
    runs,
    write_config,
)

from experiments import errors
from experiments.commands import main
from experiments.errors import CorruptData
from experiments.training import checkpoints


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0)
    return model


def _flip_byte(path, offset=None):
    data = bytearray(path.read_bytes())
    offset = len(data) // 2 if offset is None else offset
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_damaged_checkpoint_file_is_refused(tmp_path):
    folder = tmp_path / "run"
    model = _model()
    checkpoints.save(folder, model, 0, {"logs": {"loss": 1.0}})
    state = checkpoints.load_state(folder)
    assert set(state["files"]) == {"model.weights.h5", "optimizer.npz", "rng.npz"}
    checkpoints.restore(folder, _model(), state)  # intact: accepted
    _flip_byte(folder / "epoch-0000" / "model.weights.h5", offset=-64)
    with pytest.raises(CorruptData, match=r"model\.weights\.h5 is damaged"):
        checkpoints.restore(folder, _model(), state)


def test_damaged_best_epoch_weights_are_refused(tmp_path):
    folder = tmp_path / "run"
    model = _model()
    digest = checkpoints.save_best(folder, model, 2)
    reloaded = _model()
    checkpoints.load_best(folder, reloaded, 2, digest)  # intact: accepted, the same weights
    for mine, theirs in zip(model.get_weights(), reloaded.get_weights()):
        np.testing.assert_array_equal(mine, theirs)
    _flip_byte(checkpoints.best_path(folder, 2), offset=-64)
    with pytest.raises(CorruptData, match=r"best-0002\.weights\.h5 are damaged"):
        checkpoints.load_best(folder, _model(), 2, digest)


def test_unreadable_state_and_legacy_damage_give_one_clear_line(tmp_path):
    folder = tmp_path / "run"
    checkpoints.save(folder, _model(), 0, {"logs": {}})
    state = checkpoints.load_state(folder)
    legacy = {k: v for k, v in state.items() if k != "files"}  # written before checksums
    npz = folder / "epoch-0000" / "optimizer.npz"
    npz.write_bytes(npz.read_bytes()[:40])  # truncated
    with pytest.raises(CorruptData, match=r"optimizer\.npz|cannot be read"):
        checkpoints.restore(folder, _model(), legacy)
    (folder / "state.json").write_text('{"epoch": 0, "checkp')
    with pytest.raises(CorruptData, match=r"state\.json is unreadable"):
        checkpoints.load_state(folder)


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "run.json").write_text('{"run_id": "a" }')
    checkpoints.save(folder, _model(), 0, {"logs": {}})
    state = checkpoints.load_state(folder)
    assert state["run_id"] == "a"
    with pytest.raises(CorruptData, match="belongs to run a, not to run b"):
        checkpoints.restore(folder, _model(), state, run_id="b")


@pytest.mark.slow
def test_resume_refuses_a_damaged_checkpoint_and_ends_the_run_failed(tmp_path, monkeypatch, capsys):
    uri = migrated_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    config = write_config(
        tmp_path, TINY_TASKS["needle"], train={"epochs": 2}, tracking={"log_model": False}
    )
    run_interrupted_after_checkpoint(monkeypatch, config)
    (run,) = runs(uri)
    run_id = run.info.run_id
    assert run.info.status == "KILLED" and "resume_with" in run.data.tags
    folder = next((tmp_path / "mlruns" / "checkpoints").glob(run_id))
    state = json.loads((folder / "state.json").read_text())
    assert state["run_id"] == run_id
    _flip_byte(folder / state["checkpoint"] / "model.weights.h5", offset=-64)
    assert main(["resume", run_id]) == errors.EXIT_CONFIG  # refused as input
    err = capsys.readouterr().err
    assert "is damaged" in err and "Traceback" not in err
    run = mlflow.MlflowClient(uri).get_run(run_id)
    assert run.info.status == "FAILED" and "is damaged" in run.data.tags["failure_reason"]
    assert not {"killed_by", "resume_with"} & run.data.tags.keys()  # resuming fails again
    assert mlflow.MlflowClient(uri).get_metric_history(run_id, "loss") == []
