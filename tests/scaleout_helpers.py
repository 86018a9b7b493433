"""Helpers for the `tests/test_scaleout_*.py` files: free ports, an MLflow server, subprocess runs."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs the CLI in a fresh interpreter with TensorFlow's deterministic ops enabled.
DETERMINISTIC_MAIN = r"""
import sys
import keras
if keras.backend.backend() == "tensorflow":  # JAX and PyTorch on CPU are deterministic
    import tensorflow as tf
    tf.config.experimental.enable_op_determinism()
from experiments.commands import main
sys.exit(main(sys.argv[1:]))
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python: CPU only, quiet TF, the project importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "MLFLOW_RUN_ID")}
    env.update(
        TF_CPP_MIN_LOG_LEVEL="3",
        CUDA_VISIBLE_DEVICES="",
        KERAS_BACKEND="tensorflow",
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    env.update(extra)
    return env


def cli(args: list[str], env: dict, cwd: Path, deterministic: bool = False, **popen):
    """Start `python -m experiments ARGS` (or the deterministic wrapper) as a child process."""
    head = ["-c", DETERMINISTIC_MAIN] if deterministic else ["-m", "experiments"]
    return subprocess.Popen(
        [sys.executable, *head, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **popen,
    )


def cli_done(args: list[str], env: dict, cwd: Path, timeout: float = 600):
    """Run `python -m experiments ARGS` to its end, which must be exit code 0; return the
    finished process (its `stdout` and `stderr` apart)."""
    done = subprocess.run(
        [sys.executable, "-m", "experiments", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


class MlflowServer:
    """`mlflow server` with the artifact proxy on a free 127.0.0.1 port, its backend store
    `backend` (default: SQLite in `folder`; PostgreSQL in tests/test_scaleout_tune.py).

    Started in its own process group, and stopped by that PID (the MLflow CLI
    runs the web server as its child).
    """

    def __init__(self, folder: Path, port: int | None = None, backend: str | None = None):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.backend = backend or f"sqlite:///{self.folder / 'server.db'}"
        self.proc: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> MlflowServer:
        command = [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--backend-store-uri",
            self.backend,
            "--artifacts-destination",
            str(self.folder / "artifacts"),
            "--serve-artifacts",
            "--workers",
            "1",
        ]
        log = open(self.folder / "server.log", "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.folder,
            env=child_env(MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"),  # no job workers
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited:\n{self.log()[-3000:]}")
            try:
                with urllib.request.urlopen(self.uri + "/health", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"mlflow server did not start in {timeout} s:\n{self.log()[-3000:]}")

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """Kill the server's process group (its PID is the group id)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        self.proc.wait(timeout=30)
        self.proc = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _listening(self.port):
            time.sleep(0.2)

    def log(self) -> str:
        path = self.folder / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class Down:
    """A tracking server that never answers: each call fails as an unreachable one does."""

    def __getattr__(self, name):
        def call(*args, **kwargs):
            raise ConnectionError("server down")

        return call


def metric_steps(client, run_id: str, *, system: bool = False) -> dict[str, list[int]]:
    """The run's metrics with the sorted steps of their history.

    The runner's own metrics by default; `system=True`: MLflow's `system/...`
    metrics only, whose steps count samples, not epochs.
    """
    run = client.get_run(run_id)
    return {
        key: sorted(m.step for m in client.get_metric_history(run_id, key))
        for key in run.data.metrics
        if key.startswith("system/") == system
    }


class FakeClock:
    """`time` for `resilient`: nothing sleeps, the clock moves when told."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


# A process holding a run's lock as a live run does: argv[1] the checkpoint folder; it prints
# "locked", then holds the lock until its stdin is closed.
LOCK_HOLDER = r"""
import fcntl, os, sys
fd = os.open(os.path.join(sys.argv[1], "run.lock"), os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)  # as the live run holds it (see run_lock)
os.write(fd, f"{os.getpid()}\n".encode())
print("locked", flush=True)
sys.stdin.read()  # until the test closes stdin
"""


def wait_while_alive(predicate, proc, seconds: float, what: str) -> None:
    """Poll `predicate` until it holds; fail if `proc` exits first or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert proc.poll() is None, f"exited before {what}:\n{proc.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.05)


@contextlib.contextmanager
def lock_held(folder, run_id: str):
    """A live process holding the run's lock (`LOCK_HOLDER`) for the `with` block; yields it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(folder), run_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_env(),
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


class SlowProxy:
    """An HTTP proxy on a free 127.0.0.1 port in front of `upstream` (a server's URI) that
    holds each request `delay` seconds before passing it on (a server that turned slow).

    Runs on threads of the test process; `delay` can be changed at any time. A request the
    client gave up on is still passed on, as a slow server still carries it out
    (`wait_idle` waits for the last of them).
    """

    def __init__(self, upstream: str):
        self.upstream = urllib.parse.urlparse(upstream)
        self.delay = 0.0
        self.in_flight = 0
        self._count = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self):
                with proxy._count:
                    proxy.in_flight += 1
                try:
                    self._pass_on()
                finally:
                    with proxy._count:
                        proxy.in_flight -= 1

            def _pass_on(self):
                body = self._body()
                time.sleep(proxy.delay)
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                    headers["Content-Length"] = str(len(body))
                    conn.request(self.command, self.path, body=body, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                finally:
                    conn.close()
                with contextlib.suppress(OSError):  # the client may have given up
                    self.send_response(answer.status)
                    for key, value in answer.getheaders():
                        if key.lower() not in HOP and key.lower() != "content-length":
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0], 16)
                        chunk = self.rfile.read(size)
                        self.rfile.readline()  # the CRLF after each chunk
                        if size == 0:
                            return b"".join(chunks)
                        chunks.append(chunk)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward

            def log_message(self, *args):  # quiet
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait_idle(self, seconds: float) -> None:
        """Wait until every request the proxy holds has been passed on and answered."""
        deadline = time.monotonic() + seconds
        while self.in_flight:
            assert time.monotonic() < deadline, f"{self.in_flight} requests still held"
            time.sleep(0.1)

    def __enter__(self) -> SlowProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=30)


# Headers that belong to one connection, not to the request the proxy passes on.
HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"})
