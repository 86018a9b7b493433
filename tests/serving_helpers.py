"""Serving a logged model in tests: `mlflow models serve` on 127.0.0.1 in a fresh environment,
and JSON requests to it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from scaleout_helpers import child_env, free_port


def from_a_terminal(command: list[str]) -> list[str]:
    """`command` with Ctrl+C (SIGINT) at its default, as a terminal starts it: tests started
    in the background by a non-interactive shell inherit SIGINT ignored, and an ignored
    signal stays ignored across `exec` (Python then never raises KeyboardInterrupt)."""
    reset = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [sys.executable, "-c", reset, *command]


def fresh_env() -> dict:
    """A child environment where this checkout is not on the path."""
    env = child_env()
    env.pop("PYTHONPATH", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def post(url: str, body: dict) -> tuple[int, dict]:
    """POST `body` as JSON; the status and the JSON answer (an error's too)."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@contextlib.contextmanager
def served(model_uri: str, store: str, folder: Path):
    """`mlflow models serve` on a free 127.0.0.1 port; terminated and waited for afterwards."""
    port = free_port()
    env = {**fresh_env(), "MLFLOW_TRACKING_URI": store}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")  # uvicorn
    log = open(folder / "serve.log", "w+b")  # noqa: SIM115 - closed below
    command = [sys.executable, "-m", "mlflow", "models", "serve", "-m", model_uri]
    command += ["--env-manager", "local", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, cwd=folder, env=env, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise AssertionError(f"the server did not start:\n{log.read()[-3000:]!r}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/invocations"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # the CLI and the uvicorn it started
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        log.close()
