"""A classification training split read from a token store on disk, a batch at a time.

`StoredClasses` is `StoredSplit`'s counterpart for texts with a class label (`textcls`
reading a file, `experiments.data.label_corpus`): the same interface (`take(rows,
pad_to)`, `lengths()`, `count_tokens`), so the length-bucketed feed, the run's dataset
inputs and every check that knows a stored split take it as they take one of pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from experiments.data.split import Split, pad
from experiments.data.stored_split import StoredSplit

TEXT, LABEL = "text", "label"


@dataclass
class StoredClasses(StoredSplit):
    """Rows in a `TokenStore` of fields `text` (the ids of each text, cut at the task's
    length) and `label` (one id a row: its class's index)."""

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's text length and a label length of 0 (what the feed sorts and budgets
        by: the text alone)."""
        return self.store.lengths(TEXT), np.zeros(len(self), "int32")

    def count_tokens(self, field: str) -> int:
        """The ids of the texts (`x`), or one label a row (`y`)."""
        return self.store.tokens(TEXT) if field == "x" else len(self)

    def take(self, index, pad_to: int = 1) -> Split:
        """The rows `index` (a slice or row numbers) as an in-memory `Split`: `x` padded to
        the longest of them rounded up to a multiple of `pad_to`, `y` their classes."""
        rows = np.arange(len(self))[index] if isinstance(index, slice) else np.asarray(index)
        texts = self.store.rows(TEXT, rows)
        width = max(1, -(-max((len(t) for t in texts), default=0) // pad_to) * pad_to)
        labels = np.asarray([int(r[0]) for r in self.store.rows(LABEL, rows)], "int32")
        return Split(pad(texts, width), labels)
