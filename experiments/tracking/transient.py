"""Which tracking errors look like the server being away (retry, then spool), not a bad call."""

from __future__ import annotations

import requests
from mlflow.exceptions import MlflowException


def is_transient(err: BaseException) -> bool:
    """Whether `err` looks like the server being unreachable, not a bad request."""
    if isinstance(err, OSError):  # ConnectionError, timeouts, requests' exceptions
        return True
    if isinstance(err, requests.RequestException):
        return True
    if isinstance(err, MlflowException):
        transient_codes = ("TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED", "INTERNAL_ERROR")
        text = str(err)
        return err.error_code in transient_codes or "API request to" in text
    return False
