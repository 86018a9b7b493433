"""`sync` uploads each spooled record once, wherever it is stopped (issue 43, item 3).

A sync stopped after a record reached the server but before `done.jsonl`
says so uploads that record again on the next sync. Metrics, params, tags
and artifacts were checked or overwritten in place; stepped images (a new
file name per call) and tables (MLflow appends to one already there) were
doubled. The fast tests stop the upload in-process at each such point; the
slow one kills real `sync` processes with SIGKILL there, against a real
`mlflow server`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import mlflow
import numpy as np
import pytest
from experiments_helpers import store_with_run
from scaleout_helpers import Down, MlflowServer, child_env, metric_steps

from experiments.commands import main
from experiments.tracking import resilient, run_folder
from experiments.tracking import spool as spool_lib
from experiments.tracking.sync import sync_run

KEY, STEPS = "attention_probe_0", (1, 2, 3)
TABLE = "samples/final.json"
TESTS = Path(__file__).resolve().parent
ROWS = [{"source": "a b", "generated": "b a"}]


def _outage_spool(folder: Path, run_id: str) -> spool_lib.Spool:
    """Run `run_id`'s marked folder with a spool as a run's outage leaves it.

    Records: #0-#2 metrics, #3-#5 images (steps 1-3), #6 table, #7 its CSV, #8 status.
    """
    run_folder.claim(folder, run_id)
    tracker = resilient.ResilientTracker(Down(), run_id, folder, resilient.Link(attempts=1))
    for step in STEPS:
        tracker.log_metrics({"loss": 1.0 / step}, step)
    for step in STEPS:
        tracker.log_image(np.full((4, 6, 3), 40 * step, "uint8"), KEY, step)
    tracker.log_table(ROWS, TABLE)
    tracker.spool.append({"op": "status", "status": "FINISHED", "end_time": 1})
    tracker.close()
    ops = [r["op"] for r in tracker.spool.pending()]
    assert ops == ["metrics"] * 3 + ["image"] * 3 + ["table", "artifact", "status"]
    return tracker.spool


def _assert_each_record_once(client, run_id: str) -> None:
    assert metric_steps(client, run_id)["loss"] == list(STEPS)
    files = Counter()
    for info in client.list_artifacts(run_id, "images"):
        name = info.path.removeprefix("images/")
        key, _, step, *_ = name.split("+")
        files[key, int(step), "compressed" if name.endswith("+compressed.webp") else "png"] += 1
    expected = {(KEY, step, kind): 1 for step in STEPS for kind in ("png", "compressed")}
    assert dict(files) == expected  # one full image and one thumbnail per step, no more
    with tempfile.TemporaryDirectory() as tmp:
        table = json.loads(Path(client.download_artifacts(run_id, TABLE, tmp)).read_text())
    assert table["data"] == [list(ROWS[0].values())]  # its rows once, not appended again
    listed = json.loads(client.get_run(run_id).data.tags["mlflow.loggedArtifacts"])
    assert listed == [{"path": TABLE, "type": "table"}]
    assert client.get_run(run_id).data.tags["mlflow.loggedImages"] == "True"
    assert client.get_run(run_id).info.status == "FINISHED"


@pytest.fixture
def store(tmp_path, monkeypatch):
    return *store_with_run(tmp_path, monkeypatch, "once"), tmp_path


class Stopped(BaseException):
    """Stands for the process dying at the chosen point (the slow test uses SIGKILL)."""


def stop_at(patch, where: str, count: int, stop) -> None:
    """Make the upload call `stop()` before the done mark of record `count` (`where="mark"`),
    or right after the `count`-th artifact file reached the server (`"artifact"`).

    `patch(owner, name, value)` replaces a method (`setattr`, `monkeypatch.setattr`).
    """
    if where == "mark":
        real_mark = spool_lib.Spool.mark_done

        def mark_done(self, seq):
            if seq == count:
                stop()
            real_mark(self, seq)

        patch(spool_lib.Spool, "mark_done", mark_done)
    else:
        real_log = mlflow.MlflowClient.log_artifact
        calls = []

        def log_artifact(self, *args, **kwargs):
            real_log(self, *args, **kwargs)
            calls.append(1)
            if len(calls) == count:
                stop()

        patch(mlflow.MlflowClient, "log_artifact", log_artifact)


def _raise_stopped():
    raise Stopped


@pytest.mark.parametrize(
    ("where", "count"),
    [("mark", 4), ("artifact", 3), ("mark", 6)],
    ids=["image_uploaded_not_marked", "image_without_its_thumbnail", "table_uploaded_not_marked"],
)
def test_a_sync_stopped_between_upload_and_mark_uploads_nothing_twice(
    store, monkeypatch, where, count
):
    client, run_id, tmp_path = store
    folder = tmp_path / "ck" / run_id
    _outage_spool(folder, run_id)
    with monkeypatch.context() as patch:
        stop_at(patch.setattr, where, count, _raise_stopped)
        with pytest.raises(Stopped):
            sync_run(run_id, str(folder))
    assert main(["sync", run_id, "--checkpoint-dir", str(folder)]) == 0
    _assert_each_record_once(client, run_id)
    assert not (folder / spool_lib.SPOOL_DIR).exists()


# `sync` in a child process that kills itself with SIGKILL at a chosen point (`stop_at`):
# argv[1] the tests folder, argv[2] `mark` or `artifact`, argv[3] the count, then the command.
KILLED_SYNC = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from test_sync_once import stop_at
from experiments.commands import main

stop_at(setattr, sys.argv[2], int(sys.argv[3]), lambda: os.kill(os.getpid(), signal.SIGKILL))
sys.exit(main(sys.argv[4:]))
"""


@pytest.mark.slow
def test_syncs_killed_by_sigkill_mid_upload_leave_every_step_and_image_once(tmp_path):
    server = MlflowServer(tmp_path / "server").start()
    try:
        client = mlflow.MlflowClient(server.uri)
        run_id = client.create_run(client.create_experiment("killed")).info.run_id
        folder = tmp_path / "ck" / run_id
        _outage_spool(folder, run_id)
        env = child_env(MLFLOW_TRACKING_URI=server.uri, MLFLOW_HTTP_REQUEST_MAX_RETRIES="0")
        argv = ["sync", run_id, "--checkpoint-dir", str(folder)]
        # Between an image's full file and its thumbnail; after an image; after the table.
        for where, count in [("artifact", 3), ("mark", 5), ("mark", 6)]:
            done = subprocess.run(
                [sys.executable, "-c", KILLED_SYNC, str(TESTS), where, str(count), *argv],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == -signal.SIGKILL, done.stdout[-2000:] + done.stderr[-2000:]
        done = subprocess.run(
            [sys.executable, "-m", "experiments", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "spool empty" in done.stdout
        _assert_each_record_once(client, run_id)
        assert not (folder / spool_lib.SPOOL_DIR).exists()
    finally:
        server.stop()
