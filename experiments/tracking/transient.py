"""Which tracking errors are the server being away (retry, then spool) and which are not.

Classified by exception type, never by message text. The exception and
everything it was raised from or during (`__cause__`, `__context__`) count:
MLflow's REST client raises an `MlflowException` *inside* the `except` that
caught the `requests` error, so the network failure is its context.

Transient (the call is retried, then spooled):

- a connection failure or a timeout: `ConnectionError`, `TimeoutError`,
  `requests.ConnectionError`, `requests.Timeout`;
- the server kept answering with a retryable status (MLflow's retries on
  429/5xx ran out): `requests.exceptions.RetryError`;
- an HTTP answer 429 or 5xx (except 501): `requests.HTTPError` (artifact
  uploads) or a `RestException` (the server's own error document);
- an `MlflowException` whose code says "busy, try again":
  `TEMPORARILY_UNAVAILABLE`, `REQUEST_LIMIT_EXCEEDED`, `RESOURCE_EXHAUSTED`,
  `DEADLINE_EXCEEDED` (a local SQLite store that is locked says so too).

Everything else fails the call: a missing or unreadable local file, a 4xx,
a bad parameter, a bug. A full disk under a local store is no outage
either, though MLflow reports SQLite's "database or disk is full" as
`TEMPORARILY_UNAVAILABLE`: `storage_failure` finds it (SQLite's
`SQLITE_FULL`, or `ENOSPC`/`EDQUOT`), and `raise_if_storage` turns it into
a `StorageError` that says so, naming the folder to free space in (the
artifact store, or the temporary folder) and the file.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from tempfile import gettempdir

import mlflow
import requests
from mlflow.exceptions import MlflowException, RestException

from experiments.errors import StorageError

NETWORK_ERRORS = (
    ConnectionError,
    TimeoutError,
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.RetryError,
)
BUSY_CODES = frozenset(
    {"TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"}
)
# Two processes logging the same row at once (two tune workers, the same dataset): MLflow's
# store looks for the row, then inserts it, so the second insert breaks the table's key and
# the server answers 400 with the database's words. Tried again, the row is found and reused.
RACED_INSERT = ("duplicate key value violates unique constraint", "UNIQUE constraint failed")
SQLITE_FULL = 13  # "database or disk is full"
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def is_transient(err: BaseException) -> bool:
    """Whether `err` means the tracking server is unreachable or busy, not a bad request."""
    if storage_failure(err) is not None:
        return False
    for cause in causes(err):
        if isinstance(cause, NETWORK_ERRORS):
            return True
        if isinstance(cause, MlflowException) and any(w in cause.message for w in RACED_INSERT):
            return True
        if isinstance(cause, requests.HTTPError) and cause.response is not None:
            return transient_status(cause.response.status_code)
        if isinstance(cause, RestException):
            return transient_status(cause.get_http_status_code())
        if isinstance(cause, MlflowException) and cause.error_code in BUSY_CODES:
            return True
    return False


def storage_failure(err: BaseException) -> BaseException | None:
    """The cause of `err` that says a local disk is full (SQLite's or the OS's), else None."""
    for cause in causes(err):
        if isinstance(cause, sqlite3.Error) and _sqlite_full(cause):
            return cause
        if isinstance(cause, OSError) and cause.errno in DISK_FULL_ERRNOS:
            return cause
    return None


def raise_if_storage(
    err: BaseException, artifact_root: Callable[[], str | None] | None = None
) -> None:
    """Raise `StorageError` (one line: what is full, what to do) if `err` is a full disk.

    The line names the folder to free space in: the run's artifact store
    (`artifact_root()`, its local folder; None when it has none) or the
    temporary folder when the file written lies in one, and the file.
    """
    full = storage_failure(err)
    if full is None:
        return
    if isinstance(full, OSError):
        # A copy (shutil) names the file it read as `filename`, the one it wrote as `filename2`.
        path = full.filename2 or full.filename
        what = f"{path}: {full.strerror}" if path else full.strerror or str(full)
        folder = _full_folder(path, artifact_root)
        if folder:
            what = f"{folder} is full; {what}"
    else:
        what = f"the tracking store {mlflow.get_tracking_uri()}: database or disk is full"
    raise StorageError(
        f"tracking data cannot be written ({what}); free space there, then resume the run"
    ) from err


def _full_folder(path, artifact_root) -> str | None:
    """`the artifact store ROOT` or `the temporary folder TMP`, whichever holds `path`; both
    when the OS did not name the file (a write, not a copy); None when neither holds it."""
    try:
        root = artifact_root() if artifact_root is not None else None
    except Exception:  # noqa: BLE001 - a message only: the full disk is the error to report
        root = None
    places = {"the artifact store": root, "the temporary folder": gettempdir()}
    named = {f"{name} {folder}": folder for name, folder in places.items() if folder}
    if path is None:
        return " or ".join(named)
    return next(
        (place for place, folder in named.items() if Path(path).is_relative_to(folder)), None
    )


def _sqlite_full(err: sqlite3.Error) -> bool:
    code = getattr(err, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF == SQLITE_FULL
    return str(err) == "database or disk is full"  # SQLite's fixed text for SQLITE_FULL


def transient_status(status: int) -> bool:
    """HTTP 429 and 5xx (except 501 Not Implemented) are worth retrying."""
    return status == 429 or (status >= 500 and status != 501)


def causes(err: BaseException) -> Iterator[BaseException]:
    """`err`, then what it was raised from or during, and so on (each once)."""
    seen: set[int] = set()
    todo = [err]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        # SQLAlchemy's errors carry the driver's own (sqlite3's) as `orig`.
        todo += [current.__cause__, current.__context__, getattr(current, "orig", None)]
