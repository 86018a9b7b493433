"""SIGTERM is handled like Ctrl+C: the run ends KILLED and resumable, `ui` stops its children (issue 30)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import mlflow
import psutil
import pytest
from experiments_helpers import TINY_TASKS, migrated_store, runs, write_config
from scaleout_helpers import _listening, child_env, cli, free_port, wait_while_alive


@pytest.mark.slow
def test_sigterm_ends_the_run_killed_with_its_checkpoint_and_how_to_resume(tmp_path):
    uri = migrated_store(tmp_path)
    checkpoints = tmp_path / "ck"
    config = write_config(
        tmp_path,
        TINY_TASKS["needle"],
        train={"epochs": 200, "checkpoint_dir": str(checkpoints)},
        tracking={"log_model": False, "heatmap_every": 100},
    )
    proc = cli(["run", str(config)], child_env(MLFLOW_TRACKING_URI=uri), tmp_path)
    try:
        wait_while_alive(lambda: list(checkpoints.glob("*/state.json")), proc, 300, "checkpoint")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, out[-3000:]  # not -15: the runner handled it
    assert "stopped by SIGTERM" in out
    (run,) = runs(uri)
    run_id = run.info.run_id
    assert run.info.status == "KILLED"
    assert run.data.tags["killed_by"] == "SIGTERM"
    assert run.data.tags["resume_with"] == f"python -m experiments resume {run_id}"
    state = json.loads((checkpoints / run_id / "state.json").read_text())
    assert (checkpoints / run_id / state["checkpoint"] / "model.weights.h5").is_file()
    steps = [m.step for m in mlflow.MlflowClient(uri).get_metric_history(run_id, "loss")]
    assert max(steps, default=0) <= state["epoch"] + 1  # logged after its checkpoint


@pytest.mark.slow
def test_sigterm_on_ui_stops_the_mlflow_ui_and_its_workers(tmp_path):
    port = free_port()
    env = child_env(MLFLOW_TRACKING_URI=migrated_store(tmp_path))
    # Output to a file: an orphaned `mlflow ui` would hold a pipe open.
    with open(tmp_path / "ui.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "experiments", "ui", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its group: what an old `ui` left behind is found there
        )
    children: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 120
        while not _listening(port):
            assert proc.poll() is None, (tmp_path / "ui.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the MLflow UI did not start"
            time.sleep(0.2)
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        gone, alive = psutil.wait_procs(children, timeout=30)
        assert alive == [], [p.cmdline() for p in alive]  # no orphaned `mlflow ui` or worker
        assert not _listening(port)
        assert proc.returncode == 143
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
