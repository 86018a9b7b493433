"""The shape of each spool record, checked before anything is uploaded.

`problem(record)` says what is wrong with a record (None when it is
usable): an unknown `op`, a missing or mistyped field, or a `file` that is
not a plain name inside the spool's `files/` folder. A record that fails is
quarantined by `sync` like an unreadable line, instead of failing it with a
`TypeError` or `KeyError` halfway through, or reaching outside the spool.
"""

from __future__ import annotations

from pathlib import PurePosixPath

STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _string_map(value) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def file_name_problem(name) -> str | None:
    """Why `name` cannot be a file of the spool's `files/` folder (None when it can)."""
    if not isinstance(name, str) or not name:
        return "file: expected a file name"
    if "/" in name or "\\" in name or "\0" in name or name.startswith("."):
        return f"file: {name!r} is not a plain file name inside the spool's files/ folder"
    return None


def artifact_path_problem(path) -> str | None:
    """Why `path` cannot be a run-relative artifact path (None when it can)."""
    if not isinstance(path, str) or not path:
        return "path: expected an artifact path"
    parts = PurePosixPath(path).parts
    if path.startswith("/") or "\\" in path or ".." in parts or "\0" in path:
        return f"path: {path!r} is not a relative artifact path"
    return None


def _metrics(record) -> str | None:
    rows = record.get("metrics")
    if not isinstance(rows, list):
        return "metrics: expected a list"
    for row in rows:
        if not (
            isinstance(row, list)
            and len(row) == 4
            and isinstance(row[0], str)
            and _is_number(row[1])
            and _is_number(row[2])
            and _is_number(row[3])
        ):
            return f"metrics: expected [key, value, timestamp, step] rows. Received: {row!r:.80}"
    return None


def _params(record) -> str | None:
    return None if _string_map(record.get("params")) else "params: expected {name: text}"


def _tags(record) -> str | None:
    return None if _string_map(record.get("tags")) else "tags: expected {name: text}"


def _file_at_path(record) -> str | None:
    return file_name_problem(record.get("file")) or artifact_path_problem(record.get("path"))


def _image(record) -> str | None:
    if not isinstance(record.get("key"), str) or not _is_int(record.get("step")):
        return "image: expected a text key and an integer step"
    if record.get("timestamp") is not None and not _is_number(record["timestamp"]):
        return "image: timestamp must be a number"
    return file_name_problem(record.get("file"))


def _inputs(record) -> str | None:
    items = record.get("inputs")
    if not isinstance(items, list):
        return "inputs: expected a list"
    for item in items:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("dataset"), dict)
            and _string_map(item.get("tags"))
        ):
            return "inputs: expected {dataset: {...}, tags: {...}} items"
    return None


def _model(record) -> str | None:
    if "card" in record and not isinstance(record["card"], dict):
        return "card: expected a JSON object"
    return file_name_problem(record.get("file"))


def _status(record) -> str | None:
    if record.get("status") not in STATUSES:
        return f"status: expected one of {', '.join(STATUSES)}"
    end = record.get("end_time")
    return None if end is None or _is_number(end) else "end_time: expected a number"


CHECKS = {
    "metrics": _metrics,
    "params": _params,
    "tags": _tags,
    "artifact": _file_at_path,
    "table": _file_at_path,
    "image": _image,
    "inputs": _inputs,
    "model": _model,
    "status": _status,
}


def problem(record: dict) -> str | None:
    """What makes `record` unusable, or None."""
    if not _is_int(record.get("seq")) or record["seq"] < 0:
        return "seq: expected a non-negative integer"
    check = CHECKS.get(record.get("op"))
    if check is None:
        return f"op: expected one of {', '.join(CHECKS)}. Received: {record.get('op')!r:.40}"
    return check(record)


def done_problem(record: dict) -> str | None:
    """What makes a line of `done.jsonl` unusable, or None."""
    return None if _is_int(record.get("seq")) else "seq: expected an integer"
