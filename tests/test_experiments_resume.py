"""`resume` after an interruption continues the same run, logging each epoch once."""

from __future__ import annotations

import random
import types

import mlflow
import numpy as np
import pytest
import tensorflow as tf
from experiments_helpers import (
    TINY_TASKS,
    migrated_store,
    run_interrupted_after_checkpoint,
    runs,
    store_uri,
    write_config,
)

from experiments.commands import main
from experiments.training.callbacks import EpochClock

EPOCHS = 2


def _history(uri, run_id, key):
    return mlflow.MlflowClient(uri).get_metric_history(run_id, key)


@pytest.mark.slow
def test_resume_continues_same_run_exactly(tmp_path, monkeypatch):
    uri = migrated_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    config = write_config(
        tmp_path,
        TINY_TASKS["needle"],
        train={"epochs": EPOCHS},
        tracking={"log_model": False},
    )
    # Reference: the same config without interruption.
    assert main(["run", str(config)]) == 0
    (reference,) = runs(uri)

    run_interrupted_after_checkpoint(monkeypatch, config)
    interrupted = runs(uri)[0]
    assert interrupted.info.run_id != reference.info.run_id
    assert interrupted.info.status == "KILLED" and "killed_by" in interrupted.data.tags
    # Epoch 1 was checkpointed but never reached MLflow; resume must log it once.
    assert _history(uri, interrupted.info.run_id, "loss") == []

    assert main(["resume", interrupted.info.run_id]) == 0

    resumed = mlflow.MlflowClient(uri).get_run(interrupted.info.run_id)
    assert resumed.info.status == "FINISHED"
    assert not {"killed_by", "resume_with"} & resumed.data.tags.keys()  # no stale reason
    assert len(runs(uri)) == 2  # no new run was created
    for key in ("loss", "val_loss", "train_accuracy", "val_alignment_accuracy", "epoch_seconds"):
        steps = sorted(m.step for m in _history(uri, resumed.info.run_id, key))
        assert steps == list(range(1, EPOCHS + 1)), (key, steps)
    # Same batches, same optimizer state: the same losses as the uninterrupted run.
    expected = [m.value for m in _history(uri, reference.info.run_id, "loss")]
    got = [
        m.value for m in sorted(_history(uri, resumed.info.run_id, "loss"), key=lambda m: m.step)
    ]
    assert got == pytest.approx(expected, rel=1e-4)


def test_resume_of_finished_or_unknown_run_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri(tmp_path))
    assert main(["resume", "0123456789abcdef0123456789abcdef"]) == 2
    assert "run_id" in capsys.readouterr().err


def test_each_epoch_reseeds_python_and_numpy_but_not_tensorflow():
    # tf.random.set_seed clears TensorFlow's kernel caches: every compiled function
    # (the probe forward, sample generation) was instantiated again after each epoch.
    clock = EpochClock(batches=types.SimpleNamespace(epoch=0), seed=5, tokens_per_epoch=1)
    tf.random.set_seed(123)
    draws = []
    for epoch in (3, 4, 3):
        clock.on_epoch_begin(epoch)
        draws.append((random.random(), float(np.random.random())))
        assert clock.batches.epoch == epoch
        assert tf.compat.v1.random.get_seed(None)[0] == 123  # the global seed is untouched
    assert draws[0] == draws[2] != draws[1]  # the draws depend on (seed, epoch) only
