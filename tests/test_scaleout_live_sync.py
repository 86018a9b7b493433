"""`sync` while the run is still writing its spool is refused, with a real server outage (issue 30)."""

from __future__ import annotations

import signal

import mlflow
import pytest
from experiments_helpers import TINY_TASKS, write_config
from scaleout_helpers import MlflowServer, child_env, cli, metric_steps, wait_while_alive

from experiments import errors
from experiments.commands import main


@pytest.mark.slow
def test_sync_during_a_live_run_is_refused_and_the_spool_survives(tmp_path, monkeypatch, capsys):
    server = MlflowServer(tmp_path / "server").start()
    checkpoints = tmp_path / "ck"
    config = write_config(
        tmp_path,
        TINY_TASKS["needle"],
        train={"epochs": 300, "checkpoint_dir": str(checkpoints)},
        tracking={"log_model": False, "heatmap_every": 1000, "experiment": "live"},
    )
    http = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    proc = cli(["run", str(config)], child_env(MLFLOW_TRACKING_URI=server.uri, **http), tmp_path)
    try:
        wait_while_alive(
            lambda: list(checkpoints.glob("*/state.json")), proc, 300, "first checkpoint"
        )
        (run_dir,) = checkpoints.iterdir()
        run_id = run_dir.name
        server.stop()  # an outage: the run goes on, spooling
        journal = run_dir / "spool" / "journal.jsonl"
        wait_while_alive(journal.is_file, proc, 120, "spool")
        server.start()  # back, while the run still spools (its link is in its cool-down)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", server.uri)
        for key, value in http.items():
            monkeypatch.setenv(key, value)
        assert main(["sync", run_id]) == errors.EXIT_LOCKED
        assert "in use by another live process" in capsys.readouterr().err
        assert journal.is_file()  # the spool the run writes was neither uploaded nor deleted
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=180)
        # The owner is gone: sync may go on. The run's own end uploaded its spool if it could
        # (the server is back); then there is nothing left, which sync says with exit code 2.
        spooled = journal.is_file()
        assert main(["sync", run_id]) == (0 if spooled else errors.EXIT_CONFIG)
        client = mlflow.MlflowClient(server.uri)
        steps = metric_steps(client, run_id)["loss"]
        assert steps == sorted(set(steps)) and steps[0] == 1
        assert client.get_run(run_id).info.status == "KILLED"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        server.stop()
