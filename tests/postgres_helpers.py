"""A real PostgreSQL server for tests (Debian's `postgresql` package; `make test-slow`
installs it when missing); `scaleout_helpers.MlflowServer(backend=...)` serves MLflow on it.

`PostgresServer` runs `initdb` into a fresh temporary folder and `postgres` on 127.0.0.1 on
a free port (as the `postgres` user when the tests run as root: PostgreSQL refuses root),
with trust authentication for one role; `stop` ends it and removes the folder.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from scaleout_helpers import free_port

ROLE = "tuner"


def postgres_bin() -> Path | None:
    """The folder of PostgreSQL's server programs (`initdb`, `postgres`), newest version."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _version(path: str) -> int:
    part = Path(path).parts[-3]
    return int(part) if part.isdigit() else 0


class PostgresServer:
    """`postgres` on 127.0.0.1:<free port> over a temporary data folder."""

    def __init__(self):
        self.bin = postgres_bin()
        if self.bin is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
        self.folder = Path(tempfile.mkdtemp(prefix="pg-test-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._as = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            user = pwd.getpwnam("postgres")
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def url(self, database: str) -> str:
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{database}"

    def start(self, databases: tuple[str, ...], timeout: float = 60.0) -> PostgresServer:
        subprocess.run(
            [*self._as, str(self.bin / "initdb"), "-D", str(self.data), "-U", ROLE]
            + ["--auth=trust", "-E", "UTF8", "--no-sync"],
            check=True,
            capture_output=True,
        )
        log = open(self.folder / "postgres.log", "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [*self._as, str(self.bin / "postgres"), "-D", str(self.data)]
            + ["-h", "127.0.0.1", "-p", str(self.port), "-k", str(self.folder)]
            + ["-c", "fsync=off", "-c", "max_connections=200"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url("postgres"), autocommit=True) as connection:
                    for name in databases:
                        connection.execute(f'CREATE DATABASE "{name}"')
                return self
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("postgres did not start") from None
                time.sleep(0.3)

    def log(self) -> str:
        path = self.folder / "postgres.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Fast shutdown (SIGINT), then remove the data folder."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self.proc = None
        shutil.rmtree(self.folder, ignore_errors=True)
