"""`train.distribute`: mirrored on 2 logical CPUs, multi-worker on 127.0.0.1 (issue 7, 1-2)."""

from __future__ import annotations

import json

import mlflow
import pytest
from experiments_helpers import TINY_TASKS, migrated_store, runs, write_config
from scaleout_helpers import child_env, cli, free_port

from experiments.errors import ConfigError
from experiments.training import distribute

# Graph mode (not the TINY default of eager): strategies run their steps as tf.functions.
TRAIN = {"epochs": 2, "batch_size": 16, "run_eagerly": False, "seed": 3}
TRACKING = {"log_model": False, "heatmap_every": 100}
NEEDLE = {**TINY_TASKS["needle"], "num_examples": 96}
MODEL = {"rnn": "gru", "bidirectional": False}  # the cheapest graph to trace per process

# Logical devices must exist before TensorFlow initialises, so this runs in a child process.
MIRRORED = r"""
import sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from experiments.commands import main
for name in ("none", "mirrored"):
    code = main(["run", sys.argv[1], "--set", f"train.distribute={name}",
                 "--set", f"tracking.run_name={name}"])
    assert code == 0, (name, code)
"""


@pytest.mark.slow
def test_mirrored_two_devices_matches_one_device(tmp_path):
    uri = migrated_store(tmp_path)
    config = write_config(tmp_path, NEEDLE, model=MODEL, train=TRAIN, tracking=TRACKING)
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", MIRRORED, str(config)],
        cwd=tmp_path,
        env=child_env(MLFLOW_TRACKING_URI=uri),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "mirrored strategy: 2 replicas" in done.stderr
    client = mlflow.MlflowClient(uri)
    by_name = {r.info.run_name: r for r in runs(uri)}
    assert set(by_name) == {"none", "mirrored"}
    losses = {}
    for name, run in by_name.items():
        assert run.info.status == "FINISHED"
        assert run.data.params["train.distribute"] == name
        history = sorted(client.get_metric_history(run.info.run_id, "loss"), key=lambda m: m.step)
        assert [m.step for m in history] == [1, 2]
        losses[name] = [m.value for m in history]
    # Same global batch of 16 (2 x 8 per replica): the same steps, the same losses.
    assert losses["mirrored"] == pytest.approx(losses["none"], abs=1e-4)


@pytest.mark.slow
def test_multi_worker_two_processes_log_one_run(tmp_path):
    uri = migrated_store(tmp_path)
    checkpoints = tmp_path / "ck"
    config = write_config(
        tmp_path,
        NEEDLE,
        model=MODEL,
        # kept, to show whose they are
        train={**TRAIN, "distribute": "multi_worker", "checkpoint_dir": str(checkpoints)}
        | {"keep_checkpoints": True},
        tracking=TRACKING,
    )
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}
    procs = []
    for index in range(2):
        spec = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = child_env(MLFLOW_TRACKING_URI=uri, TF_CONFIG=json.dumps(spec))
        procs.append(cli(["run", str(config)], env, tmp_path))
    outputs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        outputs.append(out)
    for proc, out in zip(procs, outputs):
        assert proc.returncode == 0, out[-4000:]
    assert "worker:1 is not the chief" in outputs[1]
    (run,) = runs(uri)  # exactly one run: the chief's
    assert run.info.status == "FINISHED"
    assert f"run id: {run.info.run_id}" in outputs[0]
    steps = sorted(
        m.step for m in mlflow.MlflowClient(uri).get_metric_history(run.info.run_id, "loss")
    )
    assert steps == [1, 2]
    assert [p.name for p in checkpoints.iterdir()] == [run.info.run_id]  # worker 1 wrote nothing


def test_tf_config_and_chief_rules(monkeypatch):
    cluster = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}})
    )
    assert not distribute.is_chief("multi_worker")
    assert distribute.is_chief("none")  # TF_CONFIG only matters for multi_worker
    with_chief = {
        "cluster": {**cluster, "chief": ["127.0.0.1:3"]},
        "task": {"type": "worker", "index": 0},
    }
    monkeypatch.setenv("TF_CONFIG", json.dumps(with_chief))
    assert not distribute.is_chief("multi_worker")
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ConfigError, match="TF_CONFIG"):
        distribute.tf_config()
    monkeypatch.delenv("TF_CONFIG")
    with pytest.raises(ConfigError, match="multi_worker"):
        distribute._validate_cluster(distribute.tf_config())
    with pytest.raises(ConfigError, match="multiple of the 3 replicas"):
        distribute.check_batch(3, 16)
