"""The epoch data feed: shuffled mini-batches that depend only on (seed, epoch)."""

from __future__ import annotations

import math

import keras
import numpy as np


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
        self.inputs = inputs or _inputs
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


def _inputs(part):
    return tuple(part.inputs) if isinstance(part.inputs, list) else part.inputs
