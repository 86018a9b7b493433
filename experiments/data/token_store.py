"""Ragged token ids on disk: each field of a split as two NumPy files, memory-mapped to read.

A field (`source`, `target`) is `NAME.npy`, every row's ids one after the other (int32, no
padding), and `NAME_offsets.npy`, where row `i` starts and ends (int64, `rows + 1` values):
the layout of fairseq's binarised datasets and of Arrow's list arrays. Reading maps the
files (`np.load(mmap_mode="r")`): a run's memory holds the pages it touches, whatever the
corpus's size.

Why NumPy files and not `tf.data.Dataset.save` or an Arrow cache: measured on this
project's 2-core machine with 1,000,000 rows of two fields, `tf.data`'s snapshot of
variable-length elements wrote at about 25,000 rows/s (40 s: 400 s for a corpus of ten
million, most of the 5-minute budget to a first training step) and padded-batch reading at
90,000 rows/s, while these files are written at the speed of the disk and a batch is a
slice of a map. Arrow's list arrays are this same layout, behind a dependency of ~100 MB
(`datasets`, `pyarrow`) the runner does not need otherwise. See docs/guides/runner.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

IDS = "int32"
OFFSETS = "int64"


class StoreWriter:
    """Appends rows of ids to the fields of one split in `folder`, a chunk at a time.

    Each field's ids and offsets go straight to their `.npy` files as they come (nothing is
    kept in memory but one chunk, and no file is mapped while writing); `close` writes the
    final row counts into the files' headers.
    """

    def __init__(self, folder: Path, fields: Sequence[str]):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.fields = tuple(fields)
        self._ids = {f: _NpyAppender(self.folder / f"{f}.npy", IDS) for f in self.fields}
        self._offsets = {
            f: _NpyAppender(self.folder / f"{f}_offsets.npy", OFFSETS) for f in self.fields
        }
        self._ends = dict.fromkeys(self.fields, 0)
        for offsets in self._offsets.values():
            offsets.append(np.zeros(1, OFFSETS))
        self.rows = 0

    def append(self, columns: dict[str, list[list[int]]], limits: dict | None = None) -> dict:
        """Add one chunk: `columns[field]` is a list of id lists, as many for every field;
        with `limits[field]`, each row of that field is cut to that many ids. Returns how
        many rows of each field were cut."""
        counts = {len(rows) for rows in columns.values()}
        if len(counts) != 1 or set(columns) != set(self.fields):
            raise ValueError(
                f"a chunk needs the same number of rows for each of {self.fields}. Received: "
                f"{ {name: len(rows) for name, rows in columns.items()} }"
            )
        cut = {}
        for name, rows in columns.items():
            lengths = np.fromiter(map(len, rows), OFFSETS, len(rows))
            flat = np.fromiter(itertools.chain.from_iterable(rows), IDS, int(lengths.sum()))
            limit = (limits or {}).get(name)
            cut[name] = 0 if limit is None else int((lengths > limit).sum())
            if cut[name]:  # keep each row's first `limit` ids
                starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
                flat = flat[np.arange(len(flat)) - starts < limit]
                lengths = np.minimum(lengths, limit)
            self._ids[name].append(flat)
            ends = self._ends[name] + np.cumsum(lengths)
            self._offsets[name].append(ends)
            self._ends[name] = int(ends[-1]) if len(ends) else self._ends[name]
        self.rows += counts.pop()
        return cut

    def close(self) -> None:
        """Finish every field's files."""
        for appender in (*self._ids.values(), *self._offsets.values()):
            appender.close()

    def abort(self) -> None:
        """Close the files as they are (the caller deletes the folder)."""
        for appender in (*self._ids.values(), *self._offsets.values()):
            appender.handle.close()


class _NpyAppender:
    """A one-dimensional `.npy` file written by appending blocks: its header holds a row
    count of fixed width, written again with the real count on `close` (NumPy's own
    format; `np.load` reads it)."""

    WIDTH = 20  # digits of the row count in the header

    def __init__(self, path: Path, dtype: str):
        self.path, self.dtype = path, np.dtype(dtype)
        self.count = 0
        self.handle = open(path, "wb")  # noqa: SIM115 - closed by close() or abort()
        self._header()

    def _header(self) -> None:
        descr = np.lib.format.dtype_to_descr(self.dtype)
        text = f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': ({self.count:>{self.WIDTH}},), }}"
        size = 10 + len(text) + 1  # magic, version, length; the text; its newline
        text += " " * (-size % 64) + "\n"
        self.handle.write(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode())

    def append(self, values: np.ndarray) -> None:
        values.astype(self.dtype, copy=False).tofile(self.handle)
        self.count += len(values)

    def close(self) -> None:
        self.handle.seek(0)
        self._header()
        self.handle.close()


class TokenStore:
    """The fields of one split, memory-mapped (read only).

    `lengths(field)` are the rows' lengths; `rows(field, index)` the id lists of the rows
    `index` (an array of row numbers); `len(store)` the number of rows.
    """

    def __init__(self, folder: Path, fields: Iterable[str]):
        self.folder = Path(folder)
        self._ids, self._offsets = {}, {}
        for name in fields:
            self._ids[name] = np.load(self.folder / f"{name}.npy", mmap_mode="r")
            self._offsets[name] = np.load(self.folder / f"{name}_offsets.npy", mmap_mode="r")
        self.fields = tuple(self._ids)
        sizes = {len(offsets) - 1 for offsets in self._offsets.values()}
        if len(sizes) != 1:
            raise ValueError(f"the fields of {self.folder} hold different numbers of rows")
        self._rows = sizes.pop()

    def __len__(self) -> int:
        return self._rows

    def lengths(self, field: str) -> np.ndarray:
        """Every row's length, int32 (rows,), read from the offsets."""
        return np.diff(self._offsets[field]).astype("int32")

    def tokens(self, field: str) -> int:
        """All ids of `field`, summed over the rows."""
        return int(self._offsets[field][-1])

    def flat(self, field: str) -> np.ndarray:
        """Every id of `field`, the rows one after the other (memory-mapped)."""
        return self._ids[field]

    def rows(self, field: str, index) -> list[np.ndarray]:
        """The ids of rows `index` (row numbers), each a NumPy array."""
        ids, offsets = self._ids[field], self._offsets[field]
        return [ids[offsets[i] : offsets[i + 1]] for i in np.asarray(index)]

    def padded(self, field: str, index, length: int, end: int | None = None) -> np.ndarray:
        """The rows `index` of `field` as an int32 array (len(index), length) padded with 0,
        each cut at `length` (with `end`, that id is written after each row, within it)."""
        out = np.zeros((len(index), length), IDS)
        for i, row in enumerate(self.rows(field, index)):
            row = row[: length - (end is not None)]
            out[i, : len(row)] = row
            if end is not None:
                out[i, len(row)] = end
        return out
