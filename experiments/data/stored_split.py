"""A training split read from a token store on disk, a batch at a time.

`StoredSplit` stands where a `Split` stands for a task's training rows when they come
from a user's file (`experiments.data.corpus`): it knows its rows' lengths and token
counts, and `take(rows)` gives those rows as an in-memory `Split`, padded to their own
longest (never to the corpus's), which is what the training feed
(`experiments.training.batches.LengthBatches`) makes each batch of. Nothing else of the
corpus is in memory.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from experiments.data.split import Split
from experiments.data.token_store import TokenStore
from experiments.data.vocab import END, START

SOURCE, TARGET = "source", "target"


@dataclass
class StoredSplit:
    """Sequence-to-sequence rows in a `TokenStore` (fields `source` and `target`, targets
    without their final `</s>`).

    `fingerprint` names the store (the cache key it was built under); `file` and
    `file_sha256` are the file it was read from and that file's SHA-256 when this run
    opened it (what the run's dataset inputs record, not computed twice). `copying`: a
    copying model is fed each source as its own extended source (one vocabulary, no
    unknown words kept), as `split.with_copy` does for an in-memory split.
    """

    store: TokenStore
    fingerprint: str
    file: str | None = None
    file_sha256: str | None = None
    copying: bool = False
    # What an in-memory `Split` has and a stored one has not: no ground truth alignment,
    # lengths, unknown words or texts are kept on disk.
    alignment = None
    length = None
    oov = None
    x_ext = None
    texts = None
    reference = None

    def __len__(self) -> int:
        return len(self.store)

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's source length and target length (`</s>` included), int32."""
        return self.store.lengths(SOURCE), self.store.lengths(TARGET) + 1

    def count_tokens(self, field: str) -> int:
        """The non-padding ids of `x` (sources) or `y` (targets with their `</s>`)."""
        if field == "x":
            return self.store.tokens(SOURCE)
        return self.store.tokens(TARGET) + len(self)

    def take(self, index, pad_to: int = 1) -> Split:
        """The rows `index` (a slice or row numbers) as an in-memory `Split`, padded to the
        longest of them rounded up to a multiple of `pad_to`."""
        rows = np.arange(len(self))[index] if isinstance(index, slice) else np.asarray(index)
        sources = self.store.rows(SOURCE, rows)
        targets = self.store.rows(TARGET, rows)
        x = _padded(sources, pad_to)
        target_width = _round_up(max((len(t) for t in targets), default=0) + 1, pad_to)
        y = np.zeros((len(rows), target_width), "int32")
        x_dec = np.zeros_like(y)
        for i, target in enumerate(targets):
            y[i, : len(target)] = target
            y[i, len(target)] = END
            x_dec[i, 0] = START
            x_dec[i, 1 : len(target) + 1] = target
        split = Split(x, y, x_dec)
        return split.replace(x_ext=x, oov=[()] * len(rows), copying=True) if self.copying else split

    def as_copying(self) -> StoredSplit:
        """The split as a copying model is fed it (`split.with_copy`)."""
        return dataclasses.replace(self, copying=True)


def _round_up(length: int, multiple: int) -> int:
    return max(1, -(-length // multiple) * multiple)


def _padded(rows, pad_to: int) -> np.ndarray:
    out = np.zeros((len(rows), _round_up(max((len(r) for r in rows), default=0), pad_to)), "int32")
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out
