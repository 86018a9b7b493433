"""The runner on JAX and PyTorch: tracked as on TensorFlow, models reload; JAX data parallelism."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import mlflow
import pytest
from experiments_helpers import (
    TINY_TASKS,
    artifact_paths,
    image_steps,
    migrated_store,
    runs,
    write_config,
)
from scaleout_helpers import child_env, cli, free_port

from experiments.errors import ConfigError
from experiments.training import run as training_run

# Loads a run's text model through MLflow on the child's backend; prints its records as JSON.
PREDICT = r"""
import json, sys
import mlflow
model = mlflow.pyfunc.load_model(sys.argv[1])
print("RESULT " + json.dumps(model.predict(sys.argv[2:])))
"""


def _predict(text_model_uri: str, texts: list[str], env: dict) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-c", PREDICT, text_model_uri, *texts],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


# The runner with TensorFlow made unimportable: what a machine without it (a GPU box with
# CUDA JAX or PyTorch only) has.
WITHOUT_TENSORFLOW = r"""
import sys
sys.modules["tensorflow"] = None  # `import tensorflow` raises ImportError
from experiments.commands import main
sys.exit(main(sys.argv[1:]))
"""


def _train(tmp_path, backend: str, task: dict, **sections) -> tuple[str, object]:
    uri = migrated_store(tmp_path)
    config = write_config(tmp_path, task, **sections)
    env = child_env(MLFLOW_TRACKING_URI=uri, KERAS_BACKEND=backend)
    proc = subprocess.Popen(
        [sys.executable, "-c", WITHOUT_TENSORFLOW, "run", str(config)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    (run,) = runs(uri)
    return uri, run


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_run_on_another_backend_is_tracked_and_its_text_model_reloads(backend, tmp_path):
    """Trained where TensorFlow cannot be imported; reloaded on its backend and on TF."""
    # with a generalisation split (length buckets), the attention losses and early stopping
    task = {**TINY_TASKS["reverse"], "num_examples": 96, "test_min_length": 7, "test_max_length": 9}
    uri, run = _train(
        tmp_path,
        backend,
        task,
        train={
            "epochs": 1,
            "run_eagerly": False,
            "alignment_loss_weight": 0.5,
            "coverage_loss_weight": 0.1,
            "early_stopping": {"monitor": "val_loss", "patience": 1},
        },
        tracking={"heatmap_every": 1, "num_samples": 2},
    )
    tags, metrics = run.data.tags, run.data.metrics
    assert run.info.status == "FINISHED"
    assert tags["keras_backend"] == backend and f"{backend}_version" in tags
    assert tags["device"].startswith("cpu (")
    assert "tensorflow_version" not in tags and "tf_thread_pools" not in tags
    # No SavedModel off TensorFlow: the run says why, and logs the text model.
    assert "model_uri" not in tags and backend in tags["keras_model_skipped"]
    assert tags["text_model_uri"].startswith("models:/")
    assert {"loss", "val_loss", "test_exact_match_greedy", "epoch_seconds", "best_epoch"} <= set(
        metrics
    )
    assert run.data.params["train.alignment_loss_weight"] == "0.5"  # trained with add_loss
    assert any(key.startswith("test_exact_match_greedy_len_7") for key in metrics), sorted(metrics)
    assert run.data.params["train.epochs"] == "1"
    assert run.inputs.dataset_inputs  # the Datasets panel
    files = artifact_paths(uri, run.info.run_id)
    assert {"config.yaml", "samples/final.json", "length_generalisation.png"} <= files
    assert image_steps(files), files  # the stepped attention images
    # The text model reloads through MLflow on the backend it trained on and on TensorFlow,
    # and both generate the same text.
    texts = ["abcd", "dcba"]
    env = child_env(MLFLOW_TRACKING_URI=uri, KERAS_BACKEND=backend)
    here = _predict(tags["text_model_uri"], texts, env)
    there = _predict(tags["text_model_uri"], texts, {**env, "KERAS_BACKEND": "tensorflow"})
    assert [r["text"] for r in here] == [r["text"] for r in there]
    assert len(here) == 2 and all(len(r["attention"]) == len(r["tokens"]) for r in here)
    if backend == "jax":  # a SavedModel of the run: made where TensorFlow is the backend
        out = tmp_path / "saved"
        export = ["export", run.info.run_id, "--format", "savedmodel", str(out)]
        refused = cli(export, env, tmp_path)
        assert refused.wait(timeout=300) == 2
        assert "format: savedmodel needs KERAS_BACKEND=tensorflow" in refused.stdout.read()
        made = cli(export, {**env, "KERAS_BACKEND": "tensorflow"}, tmp_path)
        assert made.wait(timeout=300) == 0, made.stdout.read()[-3000:]
        assert (out / "saved_model.pb").is_file()


@pytest.mark.slow
def test_jax_data_parallel_on_two_devices_equals_one_device(tmp_path):
    """The same global batch, split over 2 simulated CPU devices: the same losses."""
    task = {**TINY_TASKS["reverse"], "num_examples": 96}
    losses = {}
    for distribute in ("none", "data_parallel"):
        folder = tmp_path / distribute
        folder.mkdir()
        uri = migrated_store(folder)
        config = write_config(
            folder,
            task,
            train={"epochs": 2, "batch_size": 16, "run_eagerly": False, "distribute": distribute},
            tracking={"log_model": False, "heatmap_every": 100},
        )
        env = child_env(
            MLFLOW_TRACKING_URI=uri,
            KERAS_BACKEND="jax",
            # two simulated devices, beside the flags the suite runs with (`make test-slow`)
            XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2",
        )
        proc = cli(["run", str(config)], env, folder)
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, out[-4000:]
        if distribute == "data_parallel":
            assert "data_parallel strategy: 2 replicas in sync" in out
        (run,) = runs(uri)
        client = mlflow.MlflowClient(uri)
        losses[distribute] = [
            m.value
            for key in ("loss", "val_loss")
            for m in sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: m.step)
        ]
    assert len(losses["none"]) == 4
    assert losses["data_parallel"] == pytest.approx(losses["none"], abs=1e-5)


def test_a_distribute_setting_of_another_backend_is_a_config_error(tmp_path):
    """On TensorFlow (this process), JAX's data_parallel is refused, naming the key."""
    config = write_config(tmp_path, TINY_TASKS["reverse"], train={"distribute": "data_parallel"})
    from experiments import config as config_lib

    with pytest.raises(ConfigError, match="train.distribute: got 'data_parallel'; expected one of"):
        training_run.validate(config_lib.load_config(config))


@pytest.mark.slow
def test_two_jax_processes_train_one_run_logged_by_process_0(tmp_path):
    """A 2-process JAX job (Keras' job variables, Gloo on CPU): one MLflow run, logged by
    process 0; each process feeds its half of every global batch, so the losses equal one
    process's on the same global batch."""
    task = {**TINY_TASKS["reverse"], "num_examples": 96}
    train = {"epochs": 2, "batch_size": 16, "run_eagerly": False}
    tracking = {"log_model": False, "heatmap_every": 100}
    one_uri = migrated_store(tmp_path / "one")
    config = write_config(tmp_path / "one", task, train=train, tracking=tracking)
    single = cli(
        ["run", str(config)], child_env(MLFLOW_TRACKING_URI=one_uri, KERAS_BACKEND="jax"), tmp_path
    )
    uri = migrated_store(tmp_path / "job")
    config = write_config(
        tmp_path / "job", task, train={**train, "distribute": "data_parallel"}, tracking=tracking
    )
    addresses = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    procs = [
        cli(
            ["run", str(config)],
            child_env(
                MLFLOW_TRACKING_URI=uri,
                KERAS_BACKEND="jax",
                KERAS_DISTRIBUTION_JOB_ADDRESSES=addresses,
                KERAS_DISTRIBUTION_NUM_PROCESSES="2",
                KERAS_DISTRIBUTION_PROCESS_ID=str(index),
            ),
            tmp_path / "job",
        )
        for index in (0, 1)
    ]
    outs = [proc.communicate(timeout=900)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [out[-3000:] for out in outs]
    assert "process:1: training as a non-chief worker" in outs[1]
    single_out, _ = single.communicate(timeout=900)
    assert single.returncode == 0, single_out[-3000:]
    (run,) = runs(uri)  # one run for the job
    (alone,) = runs(one_uri)

    def history(store, run_id):
        client = mlflow.MlflowClient(store)
        return [
            m.value for m in sorted(client.get_metric_history(run_id, "loss"), key=lambda m: m.step)
        ]

    assert len(history(uri, run.info.run_id)) == 2
    assert history(uri, run.info.run_id) == pytest.approx(
        history(one_uri, alone.info.run_id), abs=1e-5
    )
