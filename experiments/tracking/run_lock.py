"""One process at a time per run: an exclusive `flock` on `<checkpoint folder>/run.lock`.

The process that trains a run (`run`, `resume`) holds the lock from before
it opens the run until it has ended it; `sync` takes it too while it
uploads, so it never uploads or deletes a spool the run is still writing,
and two `resume`s of one run never train it side by side. The lock belongs
to the open file, so the kernel drops it when its process dies, however it
dies (`kill -9` included): a stale lock file never blocks anyone. The file
holds the owner's pid, for the message; it is deleted only with the folder of
a finished run, by the process holding it (`run_folder.discard`): deleting the
lock file of a run that may still be trained, resumed or synced would let two
processes each lock a different file.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from experiments.errors import RunLocked

LOCK_FILE = "run.lock"


class RunLock:
    """The held lock of one run's folder; `release` (or the process ending) frees it."""

    def __init__(self, fd: int, path: Path):
        self.fd, self.path = fd, path

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the file drops the lock
            self.fd = None


def acquire(folder: Path, run_id: str, doing: str) -> RunLock:
    """Lock run `run_id`'s `folder` (created if needed) for `doing`, or raise `RunLocked`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise RunLocked(
            f"run {run_id} is in use by another live process (pid {holder}, holding {path}); "
            f"cannot {doing} now. Wait for it to end, or stop it, then try again"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return RunLock(fd, path)
