"""A remote tracking server: is it one, does it answer, and MLflow's HTTP settings for it.

`check_server(uri)`: before a run touches a remote server, make sure it
answers within 15 s (`ATTN_RNN_TRACKING_TIMEOUT` overrides); otherwise raise
`TrackingUnavailable`, which the CLI turns into exit code 3.
"""

from __future__ import annotations

import contextlib
import os
import time
import urllib.error
import urllib.request
from urllib.parse import urlparse

from experiments.errors import TrackingUnavailable

DEFAULT_CHECK_SECONDS = 15.0


def is_remote(uri: str) -> bool:
    """Whether `uri` is a tracking server (`http(s)://`), not a local store."""
    return urlparse(uri).scheme in ("http", "https")


def check_server(uri: str, timeout: float | None = None) -> None:
    """Raise `TrackingUnavailable` unless the server at `uri` answers within `timeout` s.

    Only `http(s)://` URIs are checked; any HTTP answer below 500 from
    `<uri>/health` counts as reachable. Connection errors are retried until
    the deadline, so a server that is still starting up is waited for.
    """
    if not is_remote(uri):
        return
    if timeout is None:
        timeout = float(os.environ.get("ATTN_RNN_TRACKING_TIMEOUT", DEFAULT_CHECK_SECONDS))
    deadline = time.monotonic() + timeout
    url = uri.rstrip("/") + "/health"
    problem = "no answer"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            with urllib.request.urlopen(url, timeout=max(0.5, min(5.0, left))) as answer:
                if answer.status < 500:
                    return
                problem = f"HTTP {answer.status}"
        except urllib.error.HTTPError as err:
            if err.code < 500:
                return
            problem = f"HTTP {err.code}"
        except (OSError, ValueError) as err:
            problem = f"{type(err).__name__}: {getattr(err, 'reason', err)}"
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
    raise TrackingUnavailable(
        f"the MLflow tracking server at {uri} did not answer within {timeout:g} s "
        f"({problem}). Start it (for example `mlflow server --host 127.0.0.1 --port 5000 "
        "--backend-store-uri sqlite:///mlflow.db --serve-artifacts`), fix "
        "MLFLOW_TRACKING_URI, or unset it to use the local store. Nothing was trained "
        "or logged."
    )


def configure_http(uri: str) -> None:
    """Make MLflow's own HTTP retries short; `resilient.Link` does the retrying and spooling.

    MLflow retries a failed request 7 times with exponential backoff by
    default (minutes per call during an outage). Explicit settings in the
    environment win.
    """
    if is_remote(uri):
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")


@contextlib.contextmanager
def request_timeout(seconds: int):
    """MLflow's HTTP timeout (`MLFLOW_HTTP_REQUEST_TIMEOUT`, read at each request) set to
    `seconds` inside the block, and restored after it."""
    saved = os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT")
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(seconds)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"]
        else:
            os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = saved
