"""The servers the CLI starts keep lines a user cannot act on off piped output (issue 50):
`ui` (and `serve`) start MLflow's server without Starlette's deprecation warning, one per
uvicorn worker; the served text model drops TensorFlow's retracing warning."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
from experiments_helpers import TINY_TASKS, store_uri, write_config

from experiments import native_logs
from experiments.commands import serve, ui
from experiments.tracking import text_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPORT = [sys.executable, "-c", "import starlette.middleware.wsgi"]  # what MLflow's server does


def test_the_server_env_keeps_starlette_s_deprecation_warning_off():
    plain = subprocess.run(IMPORT, capture_output=True, text=True, env=dict(os.environ))
    assert "StarletteDeprecationWarning" in plain.stderr  # what `ui` printed, per worker
    quiet = subprocess.run(IMPORT, capture_output=True, text=True, env=ui.server_env())
    assert quiet.returncode == 0 and quiet.stderr == ""
    served = serve.serve_env("sqlite:///x.db")
    assert served["PYTHONWARNINGS"].startswith(ui.QUIET_WARNINGS[0])


def test_a_user_s_own_pythonwarnings_still_win():
    env = ui.server_env({"PYTHONWARNINGS": "error::UserWarning"})
    assert env["PYTHONWARNINGS"] == f"{ui.QUIET_WARNINGS[0]},error::UserWarning"
    assert ui.server_env({})["PYTHONWARNINGS"] == ui.QUIET_WARNINGS[0]


def test_the_served_model_drops_tensorflow_s_retracing_warning(caplog):
    text_model.quiet_retracing()
    text_model.quiet_retracing()  # once
    logger = logging.getLogger("tensorflow")
    assert sum(isinstance(f, text_model._NoRetracing) for f in logger.filters) == 1
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        logger.warning("5 out of the last 5 calls to <f> triggered tf.function retracing.")
        logger.warning("something else")
    assert [r.getMessage() for r in caplog.records] == ["something else"]


@pytest.mark.slow  # a whole run in a fresh process (~30 s)
def test_a_run_piped_to_a_file_holds_no_native_line_and_no_warning(tmp_path):
    config = write_config(
        tmp_path,
        TINY_TASKS["reverse"],
        tracking={"system_metrics": False, "num_samples": 0},
    )
    log = tmp_path / "run.log"
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env |= {"PYTHONPATH": ROOT, "MLFLOW_TRACKING_URI": store_uri(tmp_path)}
    with open(log, "wb") as out:  # not a terminal: what nohup and CI logs get
        done = subprocess.run(
            [sys.executable, "-m", "experiments", "run", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=tmp_path,
            timeout=300,
        )
    lines = log.read_bytes().splitlines()
    assert done.returncode == 0, lines[-20:]
    assert not [line for line in lines if native_logs.is_native_log(line)]
    assert not [line for line in lines if b"Warning" in line or b"retracing" in line], lines
    assert any(line.startswith(b"run id: ") for line in lines)
