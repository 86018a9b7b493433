"""A task's data splits, and the helpers that pad, split and encode them."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from experiments.tasks.vocab import END, START
from text_tokenizer import Tokenizer


@dataclass
class Split:
    """One split of a task.

    `x` holds input ids (B, T) (the source for seq2seq), `y` labels (B,) or
    target ids (B, T), `x_dec` the teacher-forced decoder input (seq2seq only),
    and `alignment` the ground-truth attended position per example (B,) or per
    target step (B, T), with -1 where there is none. `length` is the size of
    each example that length generalisation is measured by (B,) (the string
    length for `reverse`, the operand digits for `addition`), where a task
    has one.
    """

    x: np.ndarray
    y: np.ndarray
    x_dec: np.ndarray | None = None
    alignment: np.ndarray | None = None
    length: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.x)

    @property
    def inputs(self):
        """What the model is called on: `x`, or `[x, x_dec]` for seq2seq."""
        return self.x if self.x_dec is None else [self.x, self.x_dec]

    def take(self, index) -> Split:
        """A new split holding the rows `index` (a slice or index array)."""

        def pick(a):
            return None if a is None else a[index]

        return Split(
            self.x[index],
            self.y[index],
            pick(self.x_dec),
            pick(self.alignment),
            pick(self.length),
        )


# The generalisation split's random stream, beside the task seed's main one.
GENERALIZATION_STREAM = 1


def generalization_rng(seed: int) -> np.random.Generator:
    """The generator of a task's generalisation split: its own stream of the task seed, so
    that its examples do not depend on how much data was drawn before them."""
    return np.random.default_rng([seed, GENERALIZATION_STREAM])


def bucket_ranges(starts: Sequence[int], last: int) -> list[tuple[int, int]]:
    """The `(first, last)` length ranges of buckets starting at `starts` (increasing): each
    runs to the next one's start - 1, the last one to `last` (`Task.length_buckets`)."""
    stops = [start - 1 for start in starts[1:]] + [last]
    return [(int(start), int(stop)) for start, stop in zip(starts, stops)]


def pad(rows: Sequence[Sequence[int]], length: int | None = None) -> np.ndarray:
    """Right-pad integer rows with 0 into an int32 array."""
    length = length or max((len(r) for r in rows), default=1)
    out = np.zeros((len(rows), length), dtype="int32")
    for i, row in enumerate(rows):
        row = list(row)[:length]
        out[i, : len(row)] = row
    return out


def split_indices(keys: Sequence, val_fraction: float, test_fraction: float, rng) -> tuple:
    """Shuffled (train, val, test) index arrays of the rows, split by key: rows with equal
    keys (duplicates) land in one split together, so no validation or test input is also a
    training input. Val and test get at least one key each; with every key distinct this is
    a plain shuffle of the rows."""
    groups: dict = {}
    members = [groups.setdefault(key, len(groups)) for key in keys]
    rows_of: list[list[int]] = [[] for _ in groups]
    for row, group in enumerate(members):
        rows_of[group].append(row)
    n = len(members)
    n_val = max(1, int(round(n * val_fraction)))
    n_test = max(1, int(round(n * test_fraction)))  # the config refuses test_fraction=0
    val, test, train = [], [], []
    for group in rng.permutation(len(groups)):
        part = val if len(val) < n_val else test if len(test) < n_test else train
        part.extend(rows_of[group])
    as_array = functools.partial(np.asarray, dtype="int64")
    return as_array(train), as_array(val), as_array(test)


def duplicate_count(keys: Sequence) -> int:
    """How many rows repeat an earlier row's key."""
    return len(keys) - len(set(keys))


def row_keys(x: np.ndarray) -> list[bytes]:
    """One key per row of an id array: its bytes (two rows are equal exactly when these are)."""
    return [row.tobytes() for row in np.ascontiguousarray(x)]


def make_splits(data: Split, cfg, rng, keys: Sequence | None = None) -> tuple[Split, ...]:
    """Train/val/test splits of `data` plus the first `cfg.num_probes` test rows as probes.

    Rows are split by `keys` (default: the input `x` itself), so duplicates never straddle
    splits (see `split_indices`).
    """
    keys = row_keys(data.x) if keys is None else keys
    train, val, test = split_indices(keys, cfg.val_fraction, cfg.test_fraction, rng)
    test_split = data.take(test)
    return data.take(train), data.take(val), test_split, test_split.take(slice(0, cfg.num_probes))


def seq2seq_split(
    pairs: Sequence[tuple[str, str]],
    source: Tokenizer,
    target: Tokenizer,
    alignments: Sequence[Sequence[int]] | None = None,
    lengths: Sequence[int] | None = None,
) -> Split:
    """Encode (source text, target text) pairs with teacher forcing.

    The source is encoded by `source` (the task's tokenizer: what the served
    text model encodes a request with), the target by `target`. Targets get a
    final `</s>`; the decoder input is `<s>` + target[:-1]. `lengths` become
    the split's `length` (see `Split`).
    """
    src = pad([source.encode(text) for text, _ in pairs])
    tgt = [target.encode(text) + [END] for _, text in pairs]
    y = pad(tgt)
    x_dec = pad([[START] + t[:-1] for t in tgt], y.shape[1])
    align = None
    if alignments is not None:
        align = np.full(y.shape, -1, dtype="int32")
        for i, row in enumerate(alignments):
            align[i, : len(row)] = row
    length = None if lengths is None else np.asarray(lengths, "int32")
    return Split(src, y, x_dec, align, length)
