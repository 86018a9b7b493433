"""Rows of a user's data file (CSV, TSV or JSONL), read one at a time within bounds.

A CSV file has a header row and is read by `csv` (quoted fields may span lines); a TSV file
is tab-separated without quoting, with a header row or, when its fields are given by
position, without one; a JSONL file holds one JSON object per line (blank lines skipped).
Every row and every line is at most `max_row_chars` characters (`RecordLines`), so a file
without newlines costs no more than one row. What is wrong with a row (no such field, a
wrong number of columns, an empty value, a value that is no text, bytes that are not UTF-8,
JSON nested deeper than Python's reader follows) is a `ConfigError` (exit code 2) naming the config key, the file, the row and its line, and
what was found, raised before anything is made of the file. A UTF-8 byte order mark
(`utf-8-sig`) at the start of a file is dropped: the first header is `source`, not
`\ufeffsource`.
"""

from __future__ import annotations

import contextlib
import csv
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from experiments.bounded_input import RecordLines
from experiments.errors import ConfigError, shown

# File suffixes -> format.
FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".txt": "tsv",
    ".jsonl": "jsonl",
    ".json": "jsonl",
}

# How a user's text file is read: UTF-8, a byte order mark at its start dropped.
ENCODING = "utf-8-sig"


class Row(NamedTuple):
    """One row: its number (1-based, the header not counted), the line it ends on, and the
    values of the fields asked for, in their order."""

    number: int
    line: int
    values: tuple[str, ...]


def file_format(path: str | Path) -> str | None:
    """`"csv"`, `"tsv"` or `"jsonl"` by the file's suffix, or None."""
    return FORMATS.get(Path(path).suffix.lower())


def read_rows(
    path: str | Path,
    fields: Sequence[str | int],
    max_row_chars: int,
    key: str = "task.path",
    allow_empty: bool = False,
) -> Iterator[Row]:
    """The rows of `path` as `Row`s holding the values of `fields` (names, or positions
    in a TSV file without a header), each checked: present, text, not empty (unless
    `allow_empty`). Errors name `key`."""
    fmt = file_format(path)
    if fmt is None:
        raise ConfigError(
            f"{key}: {path} is not a .csv, .tsv or .jsonl file (by its suffix); expected one"
        )
    by_position = all(isinstance(f, int) for f in fields)
    if fmt != "tsv" and by_position:
        raise ConfigError(
            f"{key}: fields by position ({list(fields)}) need a .tsv file; {path} is {fmt.upper()}"
            "; name the fields instead"
        )
    try:
        with open(path, encoding=ENCODING, newline="") as handle, csv_fields_up_to(max_row_chars):
            lines = RecordLines(handle, path, max_row_chars, "task.max_row_chars")
            records = _records(lines, fmt, path, fields, key, by_position)
            for number, values in records:
                for name, value in zip(fields, values):
                    if not allow_empty and not value.strip():
                        raise ConfigError(
                            f"{key}: row {number} (line {lines.line}) of {path} has an empty "
                            f"{name!r} value; expected text on both sides (drop the row)"
                        )
                yield Row(number, lines.line, values)
    except UnicodeDecodeError as err:
        line, byte = _bad_utf8(path, max_row_chars)
        raise ConfigError(
            f"{key}: line {line} of {path} is not UTF-8 text: byte {byte!r} ({err.reason}); "
            "expected a UTF-8 file"
        ) from None
    except (csv.Error, json.JSONDecodeError) as err:
        raise ConfigError(
            f"{key}: line {lines.line} of {path} is not readable {fmt.upper()} "
            f"({type(err).__name__}: {err})"
        ) from None


def _records(lines, fmt, path, fields, key, by_position) -> Iterator[tuple[int, tuple[str, ...]]]:
    if fmt == "jsonl":
        yield from _jsonl(lines, path, fields, key)
        return
    reader = (
        csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
        if fmt == "tsv"
        else csv.reader(lines)
    )
    header, width = None, None
    for number, row in enumerate(reader, start=0 if not by_position else 1):
        lines.next_record()
        if header is None and not by_position:
            header = row
            missing = [f for f in fields if f not in header]
            if missing:
                raise ConfigError(
                    f"{key}: the header row of {path} has no column {missing[0]!r}; it has "
                    f"{shown(header)} (set the task's field names, or give their positions "
                    "(0, 1) for a TSV file without a header)"
                )
            positions = [header.index(f) for f in fields]
            width = len(header)
            continue
        if width is None:
            width = len(row)
            positions = list(fields)
            if max(positions) >= width:
                raise ConfigError(
                    f"{key}: row 1 of {path} has {width} column(s); the fields {list(fields)} "
                    f"need {max(positions) + 1}"
                )
        if len(row) != width:
            raise ConfigError(
                f"{key}: row {number} (line {lines.line}) of {path} has {len(row)} column(s); "
                f"expected {width}, as {'the header' if header else 'row 1'} has. "
                f"Received: {shown(row)}"
            )
        yield number, tuple(row[i] for i in positions)


def _jsonl(lines, path, fields, key) -> Iterator[tuple[int, tuple[str, ...]]]:
    number = 0
    for line in lines:
        lines.next_record()
        if not line.strip():
            continue
        number += 1
        record = json_value(line, key, f"row {number} (line {lines.line}) of {path}")
        if not isinstance(record, dict):
            raise ConfigError(
                f"{key}: row {number} (line {lines.line}) of {path} is not an object with "
                f"the fields {list(fields)}. Received: {shown(record)}"
            )
        values = []
        for name in fields:
            if name not in record:
                raise ConfigError(
                    f"{key}: row {number} (line {lines.line}) of {path} lacks the field "
                    f"{name!r}; it has {shown(sorted(record))}"
                )
            value = record[name]
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise ConfigError(
                    f"{key}: row {number} (line {lines.line}) of {path}: the {name!r} value is "
                    f"not text. Received: {shown(value)}"
                )
            values.append(str(value))
        yield number, tuple(values)


def json_value(line: str, key: str, where: str) -> object:
    """The value of one JSONL line (`json.JSONDecodeError` when it is no JSON), refused as a
    `ConfigError` naming `key` and `where` (the row, its line and the file) when its arrays or
    objects nest deeper than Python's JSON reader can follow (its recursion limit)."""
    try:
        return json.loads(line)
    except RecursionError:
        raise ConfigError(
            f"{key}: {where} nests arrays or objects deeper than the JSON reader can follow "
            f"(about {sys.getrecursionlimit()} levels); expected one object of text fields. "
            f"Received: {shown(line)}"
        ) from None


def _bad_utf8(path, max_row_chars: int) -> tuple[int, bytes]:
    """The number of the first line of `path` that is not UTF-8, and its first bad byte
    (the text reader decodes a block at a time: it cannot tell the line). Each read is
    bounded, as the rows are."""
    with open(path, "rb") as handle:
        number = 0
        while chunk := handle.readline(4 * max_row_chars + 8):
            number += 1
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError as err:
                if err.end < len(chunk) or chunk.endswith(b"\n"):  # not a cut character
                    return number, chunk[err.start : err.start + 1]
    return number, b""


@contextlib.contextmanager
def csv_fields_up_to(limit: int):
    """`csv`'s (process-wide) largest field set for a while to what a row of `limit`
    characters may hold (`RecordLines`), not `csv`'s default 131072: a longer field is a
    longer row, refused as one."""
    before = csv.field_size_limit(limit + 2)
    try:
        yield
    finally:
        csv.field_size_limit(before)
