"""A remote MLflow server: reachability, the full round trip, and an outage (issue 7, 3-4)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import keras
import mlflow
import numpy as np
import pytest
from experiments_helpers import TINY_TASKS, image_steps, runs, write_config
from scaleout_helpers import MlflowServer, free_port, metric_steps

from experiments import errors
from experiments.commands import main
from experiments.tracking import resilient
from experiments.tracking import server as tracking_server
from experiments.training import run as training_run

# the tests of one server run on one worker (`--dist loadgroup`), which starts it once
pytestmark = pytest.mark.xdist_group("mlflow_server")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = MlflowServer(tmp_path_factory.mktemp("mlflow-server")).start()
    yield srv
    srv.stop()


@pytest.fixture
def remote(server, tmp_path, monkeypatch):
    """Point the runner at the test server; MLflow's own HTTP retries off (the runner retries)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.uri)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    monkeypatch.chdir(tmp_path)
    return server


def test_unreachable_server_exits_3_before_anything(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("ATTN_RNN_TRACKING_TIMEOUT", "2")
    monkeypatch.chdir(tmp_path)
    config = write_config(
        tmp_path, TINY_TASKS["needle"], train={"checkpoint_dir": str(tmp_path / "ck")}
    )
    started = time.monotonic()
    assert main(["run", str(config)]) == errors.EXIT_TRACKING_UNAVAILABLE
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert "did not answer within 2 s" in err and "MLFLOW_TRACKING_URI" in err
    assert not (tmp_path / "ck").exists()  # nothing trained, nothing written
    assert tracking_server.DEFAULT_CHECK_SECONDS == 15


@pytest.mark.slow
def test_remote_server_round_trip(remote, tmp_path):
    config = write_config(
        tmp_path,
        TINY_TASKS["reverse"],
        train={"checkpoint_dir": str(tmp_path / "ck")},
        tracking={"experiment": "remote"},
    )
    assert main(["run", str(config)]) == 0
    (run,) = runs(remote.uri, "remote")
    run_id = run.info.run_id
    assert run.info.status == "FINISHED"
    assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # proxied by the server
    client = mlflow.MlflowClient(remote.uri)
    steps = metric_steps(client, run_id)
    assert steps["loss"] == [1] and steps["val_exact_match_greedy"] == [1]
    # A heatmap, read back over HTTP.
    names = [a.path for a in client.list_artifacts(run_id, "heatmaps/final")]
    assert names and names[0].endswith(".png")
    local = client.download_artifacts(run_id, names[0], str(tmp_path))
    assert Path(local).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list((remote.folder / "artifacts").rglob("*.png"))  # stored by the server
    # The model, read back over HTTP, serves what the runner decoded before logging.
    folder = mlflow.artifacts.download_artifacts(
        run_id=run_id, artifact_path="", dst_path=str(tmp_path / "dl"), tracking_uri=remote.uri
    )
    tokens = json.loads(Path(folder, "input_example.json").read_text())["tokens"]
    expected = np.load(f"{folder}/expected_output.npy")
    model = mlflow.keras.load_model(run.data.tags["model_uri"])
    np.testing.assert_array_equal(np.asarray(model.serve(np.array(tokens, "int32"))), expected)
    assert run.data.tags["text_model_uri"].startswith("models:/")


class Outage(keras.callbacks.Callback):
    """Kills the tracking server once the first epoch is logged."""

    def __init__(self, server: MlflowServer):
        super().__init__()
        self.server = server

    def on_epoch_end(self, epoch, logs=None):
        if epoch == 0:
            self.server.stop()


@pytest.mark.slow
def test_outage_spools_then_sync_uploads_exactly_once(remote, tmp_path, monkeypatch, capsys):
    epochs = 3
    checkpoints = tmp_path / "ck"
    config = write_config(
        tmp_path,
        TINY_TASKS["needle"],
        train={"epochs": epochs, "checkpoint_dir": str(checkpoints)},
        tracking={"experiment": "outage"},
    )
    original = training_run.make_callbacks
    monkeypatch.setattr(
        training_run, "make_callbacks", lambda *a, **k: original(*a, **k) + [Outage(remote)]
    )
    monkeypatch.setattr(resilient.Link, "__init__", _fast_link)
    try:
        assert main(["run", str(config)]) == 0  # the run finishes without the server
    finally:
        if remote.proc is None:
            remote.start()  # "restarted later": same port, same database
    err = capsys.readouterr().err
    assert "logging to the local spool" in err and "sync" in err
    (run_dir,) = checkpoints.iterdir()
    run_id = run_dir.name
    client = mlflow.MlflowClient(remote.uri)
    assert client.get_run(run_id).info.status == "RUNNING"  # the end is still spooled
    assert metric_steps(client, run_id)["loss"] == [1]
    assert (run_dir / "spool" / "journal.jsonl").is_file()

    assert main(["sync", run_id]) == 0
    capsys.readouterr()
    assert main(["sync", run_id]) == errors.EXIT_CONFIG  # nothing left: said, not "uploaded 0"
    assert "nothing of run" in capsys.readouterr().err
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    steps = metric_steps(client, run_id)
    for key, got in steps.items():
        expected = (
            [epochs]
            if key.startswith(("test_", "baseline_test_"))
            or key in ("train_peak_memory_mb", "run_peak_memory_mb")
            else list(range(1, epochs + 1))
        )
        expected = (
            [0] if key in ("duplicate_rows", "model_parameters") else expected
        )  # at the start
        assert got == expected, (key, got)
    assert {"loss", "val_loss", "train_accuracy", "val_alignment_accuracy", "test_accuracy"} <= set(
        steps
    )
    images = {a.path for a in client.list_artifacts(run_id, "images")}
    assert image_steps(images)["attention_probe_0"] == set(range(epochs + 1))  # 0: untrained
    assert "system/cpu_utilization_percentage" in metric_steps(client, run_id, system=True)
    assert run.data.tags["model_uri"].startswith("models:/")
    assert run.data.tags["text_model_uri"].startswith("models:/")  # the card was spooled too
    assert not (run_dir / "spool").exists()


_LINK_INIT = resilient.Link.__init__


def _fast_link(self, attempts=2, backoff=0.1, cooldown=60.0):
    _LINK_INIT(self, attempts, backoff, cooldown)
