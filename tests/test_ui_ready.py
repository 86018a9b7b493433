"""`ui` prints the UI's address once the server answers on it (`/health`), not before."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from experiments_helpers import migrated_store
from scaleout_helpers import child_env, free_port


@pytest.mark.slow
def test_ui_prints_its_address_once_the_server_answers(tmp_path):
    port = free_port()
    log = tmp_path / "ui.log"
    with open(log, "wb") as sink:  # a file: an orphaned `mlflow ui` would hold a pipe open
        proc = subprocess.Popen(
            [sys.executable, "-m", "experiments", "ui", "--port", str(port)],
            cwd=tmp_path,
            env=child_env(MLFLOW_TRACKING_URI=migrated_store(tmp_path)),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while "MLflow UI on http://" not in log.read_text():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no address within 300 s"
            time.sleep(0.05)
        # The moment the address is printed, the server answers there.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
            assert answer.status == 200
        line = next(x for x in log.read_text().splitlines() if "MLflow UI on http://" in x)
        assert f"http://127.0.0.1:{port}/#/?workflowType=machine_learning" in line
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
