"""Shared pieces of every task: vocabularies, splits and the Task record."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

PAD, START, END, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")


class Vocab:
    """Token <-> id mapping; ids 0-3 are `<pad>`, `<s>`, `</s>`, `<unk>`.

    Args:
        tokens: the non-special tokens, in id order.
        joiner: string used to join decoded tokens ("" for characters).
    """

    def __init__(self, tokens: Iterable[str], joiner: str = ""):
        self.tokens = list(SPECIALS) + [t for t in tokens if t not in SPECIALS]
        self.joiner = joiner
        self.index = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of `tokens`; unknown tokens map to `<unk>`."""
        return [self.index.get(t, UNK) for t in tokens]

    def labels(self, ids: Iterable[int]) -> list[str]:
        """Token strings of `ids`, padding dropped."""
        return [self.tokens[int(i)] for i in ids if int(i) != PAD]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids` up to the first `</s>`, without specials."""
        out = []
        for i in ids:
            i = int(i)
            if i == END:
                break
            if i >= len(SPECIALS):
                out.append(self.tokens[i])
        return self.joiner.join(out)

    def to_dict(self) -> dict:
        """Serializable form, logged as an artifact."""
        return {"tokens": self.tokens, "joiner": self.joiner}


@dataclass
class Split:
    """One split of a task.

    `x` holds input ids (B, T) (the source for seq2seq), `y` labels (B,) or
    target ids (B, T), `x_dec` the teacher-forced decoder input (seq2seq only),
    and `alignment` the ground-truth attended position per example (B,) or per
    target step (B, T), with -1 where there is none.
    """

    x: np.ndarray
    y: np.ndarray
    x_dec: np.ndarray | None = None
    alignment: np.ndarray | None = None

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

        return Split(self.x[index], self.y[index], pick(self.x_dec), pick(self.alignment))


@dataclass
class Task:
    """Everything a run needs from a task.

    `kind` is "classification", "seq2seq" or "lm". `vocab` is the input
    vocabulary, `target_vocab` the output one for seq2seq, `class_names` the
    label names for classification. `probes` are fixed examples plotted over
    the epochs.
    """

    name: str
    kind: str
    vocab: Vocab
    train: Split
    val: Split
    test: Split
    probes: Split
    target_vocab: Vocab | None = None
    class_names: list[str] | None = None
    prompts: list[str] = field(default_factory=list)

    @property
    def output_vocab(self) -> Vocab:
        """The vocabulary of the model's predictions (seq2seq/LM)."""
        return self.target_vocab or self.vocab

    def vocabularies(self) -> dict:
        """All vocabularies and label names, for the vocab artifact."""
        out = {"input": self.vocab.to_dict()}
        if self.target_vocab is not None:
            out["target"] = self.target_vocab.to_dict()
        if self.class_names is not None:
            out["classes"] = list(self.class_names)
        return out


def pad(rows: Sequence[Sequence[int]], length: int | None = None) -> np.ndarray:
    """Right-pad integer rows with 0 into an int32 array."""
    length = length or max((len(r) for r in rows), default=1)
    out = np.zeros((len(rows), length), dtype="int32")
    for i, row in enumerate(rows):
        row = list(row)[:length]
        out[i, : len(row)] = row
    return out


def split_indices(n: int, val_fraction: float, test_fraction: float, rng) -> tuple:
    """Shuffled (train, val, test) index arrays; val and test get at least one row."""
    order = rng.permutation(n)
    n_val = max(1, int(round(n * val_fraction)))
    n_test = max(1, int(round(n * test_fraction))) if test_fraction > 0 else 0
    val, test = order[:n_val], order[n_val : n_val + n_test]
    train = order[n_val + n_test :]
    if n_test == 0:
        test = val
    return train, val, test


def make_splits(data: Split, cfg, rng) -> tuple[Split, Split, Split, Split]:
    """Train/val/test splits of `data` plus the first `cfg.num_probes` test rows as probes."""
    train, val, test = split_indices(len(data), cfg.val_fraction, cfg.test_fraction, rng)
    test_split = data.take(test)
    return data.take(train), data.take(val), test_split, test_split.take(slice(0, cfg.num_probes))


def seq2seq_split(
    pairs: Sequence[tuple[list[str], list[str]]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    alignments: Sequence[Sequence[int]] | None = None,
) -> Split:
    """Encode (source tokens, target tokens) pairs with teacher forcing.

    Targets get a final `</s>`; the decoder input is `<s>` + target[:-1].
    """
    src = pad([src_vocab.encode(source) for source, _ in pairs])
    tgt = [tgt_vocab.encode(t) + [END] for _, t in pairs]
    y = pad(tgt)
    x_dec = pad([[START] + t[:-1] for t in tgt], y.shape[1])
    align = None
    if alignments is not None:
        align = np.full(y.shape, -1, dtype="int32")
        for i, row in enumerate(alignments):
            align[i, : len(row)] = row
    return Split(src, y, x_dec, align)
