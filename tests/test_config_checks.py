"""A run's config is checked in one stage (`run.validate`): every check, in one order whatever
`train.distribute` is, before any MLflow run, checkpoint folder or strategy exists."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from experiments_helpers import TINY_TASKS, migrated_store, snapshot, write_config
from scaleout_helpers import child_env

from experiments import config as config_lib
from experiments.commands import main
from experiments.errors import ConfigError
from experiments.training import distribute
from experiments.training import run as training_run

ONE_WORKER = {"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}}
DISTRIBUTE = ("none", "mirrored", "multi_worker")

# One bad config per check, in the order `validate` makes them: (task, overrides, message).
STAGES = {
    "schema": (TINY_TASKS["needle"], ["train.epochs=-1"], "train.epochs: got -1"),
    "task_data": (
        {"name": "lm", "max_chars": 200, "seq_length": 8},
        ["task.test_fraction=0.001"],
        "task.test_fraction",
    ),
    "kind": (TINY_TASKS["reverse"], ["model.num_layers=2"], "model.num_layers: got 2"),
    "losses": (TINY_TASKS["dates"], ["train.alignment_loss_weight=1.0"], "alignment_loss_w"),
    "model": (
        TINY_TASKS["reverse"],
        ["model.attention.mechanism=coverage", "model.decoder=luong"],
        "model: got 'Seq2Seq'; expected arguments it takes: decoder='luong'",
    ),
    "metrics": (
        TINY_TASKS["needle"],
        ["train.early_stopping.monitor=val_bleu"],
        "train.early_stopping.monitor: got 'val_bleu'",
    ),
}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A migrated store to watch, and no strategy can be made (making one fails the test)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", migrated_store(tmp_path))
    monkeypatch.setenv("TF_CONFIG", json.dumps(ONE_WORKER))  # read by multi_worker only
    monkeypatch.chdir(tmp_path)

    def no_strategy(name):
        raise AssertionError(f"a {name} strategy was made before the config was checked")

    monkeypatch.setattr(distribute, "make_strategy", no_strategy)
    return tmp_path


def _run(folder: Path, task: dict, overrides: list[str], capsys) -> str:
    path = write_config(folder, task)
    before = snapshot(folder / "mlruns")
    args = ["run", str(path)] + [arg for item in overrides for arg in ("--set", item)]
    assert main(args) == 2
    assert snapshot(folder / "mlruns") == before
    assert not (folder / "mlruns" / "checkpoints").exists()
    return capsys.readouterr().err


@pytest.mark.parametrize("distribute_name", DISTRIBUTE)
@pytest.mark.parametrize("stage", sorted(STAGES))
def test_each_check_fails_before_a_run_a_folder_or_a_strategy(
    stage, distribute_name, store, capsys
):
    task, overrides, message = STAGES[stage]
    err = _run(store, task, [*overrides, f"train.distribute={distribute_name}"], capsys)
    assert message in err, err


def test_the_order_is_the_same_whatever_the_distribute_setting(store, capsys):
    # bad for the kind, the model and the metrics at once: the kind's check speaks first
    overrides = STAGES["kind"][1] + STAGES["model"][1] + STAGES["metrics"][1]
    errors = {
        name: _run(store, TINY_TASKS["reverse"], [*overrides, f"train.distribute={name}"], capsys)
        for name in DISTRIBUTE
    }
    assert all("model.num_layers: got 2" in err for err in errors.values()), errors
    assert len(set(errors.values())) == 1, errors


def test_the_global_batch_is_checked_against_the_planned_replicas(store, monkeypatch, capsys):
    workers = {**ONE_WORKER, "cluster": {"worker": [f"127.0.0.1:{p}" for p in (1, 2, 3)]}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(workers))
    assert distribute.planned_replicas("none") == 1
    planned = distribute.planned_replicas("multi_worker")
    assert planned % 3 == 0  # each worker's local devices (one CPU, or its GPUs)
    batch = f"train.batch_size={planned + 1}"
    err = _run(store, TINY_TASKS["needle"], ["train.distribute=multi_worker", batch], capsys)
    assert (
        f"train.batch_size: got {planned + 1}; expected a multiple of the {planned} replicas" in err
    )


@pytest.mark.parametrize(
    "spec, message",
    [
        ("{not json", "TF_CONFIG: got '{not json'; expected valid JSON"),
        ('{"task": {"type": "worker"}}', "TF_CONFIG cluster: got None; expected a mapping"),
        (json.dumps({**ONE_WORKER, "task": {"type": "worker", "index": 1}}), "task.index: got 1"),
    ],
)
def test_a_bad_tf_config_fails_with_the_config(spec, message, store, monkeypatch, capsys):
    monkeypatch.setenv("TF_CONFIG", spec)
    err = _run(store, TINY_TASKS["needle"], ["train.distribute=multi_worker"], capsys)
    assert message in err, err


def test_planned_replicas_are_the_strategy_s():
    import tensorflow as tf

    local = len(tf.config.list_logical_devices("GPU")) or len(tf.config.list_logical_devices("CPU"))
    assert distribute.planned_replicas("mirrored") == local


def test_validate_takes_a_mapping_and_returns_the_resolved_config():
    prepared = training_run.validate({"task": TINY_TASKS["reverse"], "model": {"units": 8}})
    assert prepared.cfg.model.attention.score == "additive"  # the kind's default, filled in
    assert prepared.task.name == "reverse" and prepared.cfg.generate.max_length > 0
    with pytest.raises(ConfigError, match="model.units"):
        training_run.validate({"task": TINY_TASKS["reverse"], "model": {"units": 0}})


# A fresh process: the checks of a multi-worker config start no TensorFlow runtime, so the
# strategy can still be made after them.
FRESH = r"""
import json, sys
from tensorflow.python.eager import context
from experiments.training import run
prepared = run.validate(json.loads(sys.argv[1]))
print(json.dumps({"runtime_started": context.context()._context_handle is not None}))
"""


@pytest.mark.slow
def test_the_checks_start_no_tensorflow_runtime(tmp_path):
    data = {
        "task": TINY_TASKS["reverse"],
        "model": {"units": 8, "embedding_dim": 8, "dropout": 0.1, "bidirectional": True},
        "train": {"distribute": "multi_worker"},
    }
    config_lib.validate(data)
    done = subprocess.run(
        [sys.executable, "-c", FRESH, json.dumps(data)],
        cwd=Path(__file__).resolve().parents[1],
        env=child_env(TF_CONFIG=json.dumps(ONE_WORKER)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"runtime_started": False}
