"""A language model's training windows over a token stream on disk, taken as batches are
made.

`StoredWindows` is `StoredSplit`'s counterpart for the language-model task reading a file
(`experiments.data.text_corpus`): the training ids are one memory-mapped stream, and
window `i` is `ids[i * stride : i * stride + length]` (its targets the same shifted by
one), cut out when `take` asks for it: no array of every window is made.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from experiments.data.split import Split
from experiments.data.stored_split import StoredSplit

IDS = "ids"


@dataclass
class StoredWindows(StoredSplit):
    """Windows of `length` tokens every `stride` over the ids of a one-field `TokenStore`
    (field `ids`, its rows one stream)."""

    length: int = 64
    stride: int = 64

    def _ids(self) -> np.ndarray:
        return self.store.flat(IDS)

    def _starts(self) -> np.ndarray:
        return np.arange(0, max(1, self.store.tokens(IDS) - self.length), self.stride)

    def __len__(self) -> int:
        return len(range(0, max(1, self.store.tokens(IDS) - self.length), self.stride))

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Every window's length (its inputs; the targets are counted with them)."""
        return np.full(len(self), self.length, "int32"), np.zeros(len(self), "int32")

    def count_tokens(self, field: str) -> int:
        """The ids the windows' inputs (`x`) or targets (`y`) hold, padding excluded."""
        left = self.store.tokens(IDS) - self._starts() - (field == "y")
        return int(np.clip(left, 0, self.length).sum())

    def take(self, index, pad_to: int = 1) -> Split:
        """The windows `index` (a slice or window numbers) as an in-memory `Split` of inputs
        and next-token targets, each `length` wide (0 past the end of the text)."""
        starts = self._starts()[index]
        ids = self._ids()
        x = np.zeros((len(starts), self.length), "int32")
        y = np.zeros_like(x)
        for i, s in enumerate(starts):
            window = ids[s : s + self.length + 1]
            x[i, : min(self.length, len(window))] = window[: self.length]
            y[i, : len(window) - 1] = window[1:]
        return Split(x, y)
