"""The epoch data feed: shuffled mini-batches that depend only on (seed, epoch).

`epoch_batches` chooses: `EpochBatches` for a split in memory (every batch padded alike),
`LengthBatches` for one in a token store (batches of rows of similar lengths, each padded
to its own longest row).
"""

from __future__ import annotations

import math

import keras
import numpy as np

from experiments.data.stored_split import StoredSplit


def epoch_batches(
    split, batch_size: int, seed: int, epoch: int = 0, inputs=None, shard=(0, 1), **options
):
    """The training feed of `split`: `LengthBatches` for a `StoredSplit` (`options`:
    `batch_tokens`, `multiple`, `pad_to`), else `EpochBatches` (every batch padded alike:
    `options` do not apply)."""
    if isinstance(split, StoredSplit):
        return LengthBatches(split, batch_size, seed, epoch, inputs, shard, **options)
    return EpochBatches(split, batch_size, seed, epoch, inputs, shard)


class EpochBatches(keras.utils.PyDataset):
    """Shuffled mini-batches whose order depends only on (seed, epoch).

    Resuming at epoch k therefore sees exactly the batches an uninterrupted
    run would have seen. `EpochClock` sets `epoch` when each epoch begins.
    The last batch is filled up from the start of the epoch's order, so every
    batch has the same shape and the training step is traced only once.

    `shard=(index, count)`: in a job of `count` processes that each feed their own
    part of every global batch (JAX's multi-process `data_parallel`), this
    process's rows `[index * b, (index + 1) * b)` of it, `b = batch_size // count`.
    """

    def __init__(
        self, split, batch_size: int, seed: int, epoch: int = 0, inputs=None, shard=(0, 1)
    ):
        super().__init__()
        self.split, self.batch_size, self.seed, self.epoch = split, batch_size, seed, epoch
        # `inputs(part)`: what the model is fed for a batch split (default: its inputs)
        self.inputs = inputs or split_inputs
        self.shard = shard

    def __len__(self) -> int:
        return math.ceil(len(self.split) / self.batch_size)

    def __getitem__(self, index: int):
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.split))
        order = np.resize(order, len(self) * self.batch_size)  # wrap around to full batches
        rows = order[index * self.batch_size : (index + 1) * self.batch_size]
        shard, count = self.shard
        local = self.batch_size // count
        part = self.split.take(rows[shard * local : (shard + 1) * local])
        return self.inputs(part), part.y


def split_inputs(part):
    """What a model is fed for a split (or a batch of one): its inputs, a list as a tuple."""
    return tuple(part.inputs) if isinstance(part.inputs, list) else part.inputs


class LengthBatches(keras.utils.PyDataset):
    """Mini-batches of rows of similar lengths from a `StoredSplit`, each padded to its own
    longest row (rounded up to a multiple of `pad_to`, so that few shapes are traced).

    As fairseq forms its batches: the rows are sorted by target then source length once,
    and cut into batches of `batch_size` rows, or, with `batch_tokens`, of as many rows as
    keep `rows x (longest source + longest target)` (padding included) within that budget
    (at least one row; a multiple of `multiple` rows where the batch is split over replicas
    or processes). Each epoch, rows of equal lengths are shuffled among themselves and the
    batches are visited in a shuffled order, both from (seed, epoch) alone: a resumed run
    sees the batches an uninterrupted one would have seen. Every row is in one batch of
    each epoch (the last batch of rows is short, filled up to a multiple of `multiple` with
    rows of its own).

    `shard=(index, count)`: as `EpochBatches`, this process's part of every batch, so the
    processes of a job read disjoint rows.
    """

    varying_shapes = True  # see `Backend.fit_data`

    def __init__(
        self,
        split,
        batch_size: int,
        seed: int,
        epoch: int = 0,
        inputs=None,
        shard=(0, 1),
        batch_tokens: int | None = None,
        multiple: int = 1,
        pad_to: int = 4,
        pool: int | None = None,
    ):
        super().__init__()
        if pool is not None and (batch_tokens is not None or pool < 1):
            raise ValueError(
                "pool (batches per pool of shuffled rows) needs a fixed batch_size, at least 1 "
                f"batch and no batch_tokens. Received: pool={pool!r}, "
                f"batch_tokens={batch_tokens!r}"
            )
        self.split, self.seed, self.epoch = split, seed, epoch
        self.pool_rows = None if pool is None else pool * batch_size
        self.inputs = inputs or split_inputs
        self.shard, self.pad_to = shard, pad_to
        multiple = multiple * shard[1]
        self.sources, self.targets = split.lengths()
        self._key = _length_key(self.sources, self.targets)
        order = np.argsort(self._key, kind="stable")  # by target length, then source length
        self.bounds = _batch_bounds(
            self._padded(self.sources[order]),
            self._padded(self.targets[order]),
            batch_size,
            batch_tokens,
            multiple,
        )
        self.multiple = multiple
        self._plan_epoch = None
        self._plan = None

    def _padded(self, lengths: np.ndarray) -> np.ndarray:
        return -(-lengths // self.pad_to) * self.pad_to

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def plan(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows of `epoch` in length order (ties shuffled) and the order of its batches."""
        if self._plan_epoch != epoch:
            rng = np.random.default_rng([self.seed, epoch])
            shuffled = rng.permutation(len(self._key))
            key = self._key[shuffled]  # 16-bit where it can be: NumPy's radix sort
            if self.pool_rows is not None:  # sorted within each pool of shuffled rows
                pools = np.arange(len(key)) // self.pool_rows
                key = pools * (int(key.max(initial=0)) + 1) + key.astype("int64")
            # a stable sort of shuffled rows: equal lengths in a random order
            order = shuffled[np.argsort(key, kind="stable")]
            self._plan = order, rng.permutation(len(self))
            self._plan_epoch = epoch
        return self._plan

    def batch_rows(self, index: int, epoch: int | None = None) -> np.ndarray:
        """The row numbers of batch `index` of `epoch` (default: the current one), all
        processes' parts together."""
        order, batches = self.plan(self.epoch if epoch is None else epoch)
        b = batches[index]
        rows = order[self.bounds[b] : self.bounds[b + 1]]
        short = -len(rows) % self.multiple
        return np.concatenate([rows, np.resize(rows, short)]) if short else rows

    def __getitem__(self, index: int):
        rows = self.batch_rows(index)
        shard, count = self.shard
        local = len(rows) // count
        part = self.split.take(rows[shard * local : (shard + 1) * local], pad_to=self.pad_to)
        return self.inputs(part), part.y


def _length_key(sources: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """One sort key per row, ordered as (target length, source length): 16-bit where the
    lengths allow it (NumPy's stable sort of 16-bit keys is a radix sort, linear in the
    rows), else the rank of each row's pair of lengths."""
    width = int(sources.max(initial=0)) + 1
    combined = targets.astype("int64") * width + sources
    if int(combined.max(initial=0)) < 2**16:
        return combined.astype("uint16")
    ranks = np.unique(combined, return_inverse=True)[1].reshape(-1)
    return ranks.astype("uint16" if ranks.max(initial=0) < 2**16 else "uint32")


def _batch_bounds(sources, targets, batch_size, batch_tokens, multiple) -> np.ndarray:
    """Where each batch starts in the length-sorted rows (and where the last one ends):
    every `batch_size` rows, or, with `batch_tokens`, as many rows as fit the budget of
    padded source + target tokens (rounded down to a multiple of `multiple`, at least
    `multiple`)."""
    n = len(sources)
    if batch_tokens is None:
        return np.append(np.arange(0, n, batch_size), n).astype("int64")
    bounds, start = [0], 0
    while start < n:
        # sorted by target length, so the longest target of rows [start, stop) is the last's;
        # the longest source is a running maximum
        longest_source = np.maximum.accumulate(sources[start : start + batch_tokens])
        cost = (np.arange(1, len(longest_source) + 1)) * (
            longest_source + targets[start : start + len(longest_source)]
        )
        rows = int(np.searchsorted(cost, batch_tokens, side="right"))
        rows = max(multiple, rows - rows % multiple)
        start = min(n, start + rows)
        bounds.append(start)
    return np.asarray(bounds, "int64")
