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
a bad parameter, a bug.
"""

from __future__ import annotations

from collections.abc import Iterator

import requests
from mlflow.exceptions import MlflowException, RestException

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


def is_transient(err: BaseException) -> bool:
    """Whether `err` means the tracking server is unreachable or busy, not a bad request."""
    for cause in causes(err):
        if isinstance(cause, NETWORK_ERRORS):
            return True
        if isinstance(cause, requests.HTTPError) and cause.response is not None:
            return transient_status(cause.response.status_code)
        if isinstance(cause, RestException):
            return transient_status(cause.get_http_status_code())
        if isinstance(cause, MlflowException) and cause.error_code in BUSY_CODES:
            return True
    return False


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
        todo += [current.__cause__, current.__context__]
