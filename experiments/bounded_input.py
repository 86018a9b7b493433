"""What users hand the runner, read within bounds: paths, YAML, and the lines of data files.

The memory and time a hostile file can cost follow from the bounds here, not from
what the file holds:

- `path_problem`: a path that must be a regular file says what it is instead
  (a folder, a FIFO or a device is not "no such file");
- `read_text`: a file read whole (a config) is read up to a byte limit;
- `load_yaml`: YAML safe-loaded with its nesting and its size once aliases are
  expanded counted while it is composed, so an alias bomb is refused before it
  expands (a few hundred bytes of aliases can stand for hundreds of millions of
  values);
- `RecordLines`: a data file's lines read one at a time, each and each record
  (a CSV row may span lines) at most so many characters, so a file without a
  newline is refused after reading that many.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import yaml

from experiments.errors import ConfigError

# Values (scalars, lists, mappings) in one YAML document once its aliases are expanded,
# and how deeply they nest: a config holds a few hundred, a few levels deep.
MAX_YAML_VALUES = 100_000
MAX_YAML_DEPTH = 64

# What each `stat.S_IS*` test finds, for `path_problem`.
_KINDS = (
    (stat.S_ISDIR, "is a directory"),
    (stat.S_ISFIFO, "is a FIFO (named pipe)"),
    (stat.S_ISCHR, "is a character device"),
    (stat.S_ISBLK, "is a block device"),
    (stat.S_ISSOCK, "is a socket"),
)


def path_problem(path: str | os.PathLike) -> str | None:
    """Why `path` cannot be read as a file ("does not exist", "is a directory", "is a FIFO
    (named pipe)", "is a character device", ...), or None when it is a regular file (a
    symbolic link counts as what it links to)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as err:
        return f"cannot be read ({err.strerror or type(err).__name__})"
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS if test(mode)), "is not a regular file")


def read_text(path: str | os.PathLike, max_bytes: int, what: str) -> str:
    """The UTF-8 text of the regular file `path`, read only when it holds at most
    `max_bytes` bytes; a `ConfigError` naming `what` and `path` otherwise."""
    problem = path_problem(path)
    if problem is not None:
        raise ConfigError(f"{what} {path} {problem}; expected a file")
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)  # never more than the limit, however big the file
    if len(data) > max_bytes:
        raise ConfigError(f"{what} {path} holds more than {max_bytes} bytes; expected at most that")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{what} {path} is not UTF-8 text ({err})") from None


class _TooLarge(yaml.YAMLError):
    """A YAML document past `MAX_YAML_VALUES` or `MAX_YAML_DEPTH`, or an alias of itself."""


class _BoundedLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` counting, while it composes, the values the document holds with
    every alias expanded (an alias counts the values of what it names) and how deep they
    nest; past either bound, or at an alias naming a value that contains it, it stops."""

    def __init__(self, stream):
        super().__init__(stream)
        self._values = 0
        self._depth = 0
        self._sizes: dict[int, int] = {}  # id of each composed node: its expanded size

    def compose_node(self, parent, index):
        alias = self.check_event(yaml.AliasEvent)
        start = self.peek_event().start_mark
        mark = f" (line {start.line + 1}, column {start.column + 1})"
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise _TooLarge(f"values nested more than {MAX_YAML_DEPTH} deep{mark}")
        before = self._values
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if alias:
            if id(node) not in self._sizes:  # its anchor is still being composed
                raise _TooLarge(f"an alias inside the value it names{mark}")
            self._values += self._sizes[id(node)]
        else:
            self._values += 1
            self._sizes[id(node)] = self._values - before
        if self._values > MAX_YAML_VALUES:
            raise _TooLarge(
                f"more than {MAX_YAML_VALUES} values once its aliases (*name) are expanded{mark}"
            )
        return node


def load_yaml(text: str, where: str) -> Any:
    """`yaml.safe_load(text)` within the bounds above; a `ConfigError` starting with `where`
    (the file, or the `--set` key) otherwise."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()  # what `yaml.safe_load` does, with this loader
    except _TooLarge as err:
        raise ConfigError(f"{where}: refused: {err}") from None
    except (yaml.YAMLError, ValueError) as err:  # ValueError: an int of over 4300 digits
        raise ConfigError(f"{where}: invalid YAML ({err})") from None
    finally:
        loader.dispose()


class RecordLines:
    """The lines of a text file opened with `newline=""`, read one at a time: none longer
    than `limit` characters (its line ending not counted), and no record longer than
    `limit` + 2 (line endings counted: a record of many short, or empty, lines is as
    long as it holds).

    Iterate it (or hand it to `csv.reader`) and call `next_record()` after each record:
    the characters read since are what the current record holds. A line or record past
    the limit is refused with a `ConfigError` naming `key`, `path` and the line, after at
    most `limit` + 2 characters of it were read.
    """

    def __init__(self, handle: TextIO, path: str | Path, limit: int, key: str):
        self.handle = handle
        self.path = path
        self.limit = limit
        self.key = key
        self.line = 0  # lines read so far: the number of the last one
        self._record = 0  # characters of the current record

    def next_record(self) -> None:
        """The lines read from now on are a new record's."""
        self._record = 0

    def __iter__(self) -> Iterator[str]:
        while True:
            line = self.handle.readline(self.limit + 2)  # room for a "\r\n" ending
            if not line:
                return
            self.line += 1
            length = len(line.rstrip("\r\n"))
            self._record += len(line)
            if length > self.limit:
                raise ConfigError(
                    f"{self.key}: line {self.line} of {self.path} is longer than {self.limit} "
                    f"characters; expected at most {self.key}={self.limit} per row (raise it "
                    "for longer rows)"
                )
            if self._record > self.limit + 2:
                raise ConfigError(
                    f"{self.key}: the row ending on line {self.line} of {self.path} is longer "
                    f"than {self.limit} characters (a quoted field spanning lines?); expected "
                    f"at most {self.key}={self.limit} per row (raise it for longer rows)"
                )
            yield line
