"""An append-only file of framed records: each written whole or not at all, and checked on reading.

A record is one line, `@<length>:<crc32>:<payload>\\n`: the payload (UTF-8
JSON, no newline) with its length in bytes and its CRC32 (8 hex digits). A
line that does not match its frame is *bad*, wherever it is: `read` returns
it apart from the good records, never silently dropped, and never confused
with its neighbours (each record ends at its own newline). Lines of older
journals, bare JSON objects (`{...}`), are still read.

`Journal.append` writes a record with as many `write` calls as the system
needs; when one fails (a full disk, a file-size limit, an interrupt), the
file is truncated back to where the record began and `JournalWriteError`
says which file and why: no record is ever torn by a failed write.
Durability: the record reaches the operating system before `append`
returns (it survives `kill -9`), and the disk (`fsync`) within
`FSYNC_SECONDS`; an fsync that fails is raised by the next call.
"""

from __future__ import annotations

import json
import os
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from experiments.errors import JournalWriteError

FSYNC_SECONDS = 0.5


def frame(payload: str) -> bytes:
    """The framed line of one record."""
    data = payload.encode("utf-8")
    if b"\n" in data:
        raise ValueError("a journal record cannot hold a newline")
    return b"@%d:%08x:%s\n" % (len(data), zlib.crc32(data), data)


def unframe(line: bytes) -> dict:
    """The record of one complete line (without its newline); ValueError says why it is bad."""
    if line.startswith(b"@"):
        head, sep, rest = line[1:].partition(b":")
        crc, sep2, data = rest.partition(b":")
        if not (sep and sep2 and head.isdigit() and len(crc) == 8):
            raise ValueError("damaged frame header")
        if int(head) != len(data):
            raise ValueError(f"length {len(data)} where the frame says {int(head)}")
        if f"{zlib.crc32(data):08x}".encode() != crc.lower():
            raise ValueError("checksum mismatch")
    elif line.startswith(b"{"):
        data = line  # an unframed record of an older journal
    else:
        raise ValueError("not a journal record")
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"not JSON ({err})") from None
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return record


@dataclass
class BadLine:
    """A line that is not a whole record: its 1-based number, bytes and what is wrong."""

    number: int
    raw: bytes
    reason: str

    def as_json(self) -> dict:
        return {
            "line": self.number,
            "reason": self.reason,
            "raw": self.raw.decode("utf-8", "backslashreplace"),
        }


@dataclass
class Reading:
    """What `read` found: the good records in order and the bad lines."""

    records: list[dict] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)


def read(path: Path, check=None) -> Reading:
    """Every line of the journal at `path`, each a good record or a `BadLine`.

    `check(record)` returns why a well-framed record is still unusable (or
    None). A last line without its newline (the writer died in the middle of
    it) is bad too.
    """
    out = Reading()
    path = Path(path)
    if not path.is_file():
        return out
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            record = unframe(line)
            reason = check(record) if check else None
        except ValueError as err:
            reason = str(err)
        if reason:
            out.bad.append(BadLine(number, line, reason))
        else:
            out.records.append(record)
    if tail:
        out.bad.append(BadLine(len(lines) + 1, tail, "incomplete last line (no newline)"))
    return out


class Journal:
    """The writer of one journal file (one writer at a time: see `run_lock`)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._dirty = False
        self._synced = float("-inf")
        self._timer: threading.Timer | None = None
        self._error: JournalWriteError | None = None  # a failed background fsync, raised next

    def append(self, payload: str) -> None:
        """Write one framed record; on return it is in the file whole (see the module docstring)."""
        data = frame(payload)
        with self._lock:
            self._raise_pending()
            fd = self._open()
            start = os.fstat(fd).st_size
            try:
                _write_all(fd, data)
            except BaseException as err:
                os.ftruncate(fd, start)  # the file ends where the last whole record ended
                if isinstance(err, OSError):
                    raise self._failure(f"cannot append a record ({err.strerror or err})") from err
                raise
            self._dirty = True
            if time.monotonic() - self._synced >= FSYNC_SECONDS:
                self._fsync()
            elif self._timer is None:
                self._timer = threading.Timer(FSYNC_SECONDS, self._background_sync)
                self._timer.name, self._timer.daemon = "spool-fsync", True
                self._timer.start()

    def sync(self) -> None:
        """fsync what was appended since the last fsync."""
        with self._lock:
            self._timer = None
            self._raise_pending()
            if self._dirty and self._fd is not None:
                self._fsync()

    def close(self) -> None:
        """fsync and close; a later `append` reopens the file."""
        with self._lock:
            timer, self._timer = self._timer, None
            if timer is not None:
                timer.cancel()
            if self._fd is None:
                return
            try:
                self._raise_pending()
                if self._dirty:
                    self._fsync()
            finally:
                os.close(self._fd)
                self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                # A line torn by a crash: end it, so it stays one bad line of its own
                # (kept and reported by `read`) and never swallows the next record.
                try:
                    _write_all(fd, b"\n")
                except OSError as err:
                    os.ftruncate(fd, size)
                    os.close(fd)
                    raise self._failure(f"cannot append ({err.strerror or err})") from err
            self._fd = fd
        return self._fd

    def _background_sync(self) -> None:
        with self._lock:
            self._timer = None
            if self._dirty and self._fd is not None:
                try:
                    self._fsync()
                except JournalWriteError as err:
                    self._error = err

    def _fsync(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as err:
            raise self._failure(f"cannot fsync ({err.strerror or err})") from err
        self._synced = time.monotonic()
        self._dirty = False

    def _raise_pending(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _failure(self, what: str) -> JournalWriteError:
        return JournalWriteError(f"{self.path}: {what}", self.path)


def fsync_dir(folder: Path) -> None:
    """fsync a folder, so the names just created or moved into it survive a power loss."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    """`os.write` until every byte is written (a short write is continued, never ignored)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(f"write returned {written}")
        view = view[written:]
