"""A task's data splits, and the helpers that pad, split and encode them."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from experiments.data.vocab import END, PAD, START, UNK
from keras_attn_rnn.tokenizers import Tokenizer


@dataclass
class Split:
    """One split of a task.

    `x` holds input ids (B, T) (the source for seq2seq), `y` labels (B,) or
    target ids (B, T), `x_dec` the teacher-forced decoder input (seq2seq only),
    and `alignment` the ground-truth attended position per example (B,) or per
    target step (B, T), with -1 where there is none. `length` is the size of
    each example that length generalisation is measured by (B,) (a string's
    letters, a sum's operand digits), where a task has one.

    For copy attention (`keras_attn_rnn.copying`), `x_ext` is the source in
    extended ids (`x` and `x_dec` hold `<unk>` where it has an extended id)
    and `oov` each row's unknown words (extended id `V + k` is
    `oov[row][k]`, `V` the vocabulary's size); with `copying`, a copying
    model is fed `x_ext` as its third input and `y` is in extended ids.
    `reference`, where given, is what a decoding is judged against when `y`
    is not: the targets in extended ids beside a `y` that writes the unknown
    words as `<unk>` (what a model without copying trains on, `without_copy`).
    `texts`, where a task read them from a file, are each row's (source,
    target) as written: generated text is scored (BLEU, chrF) against these
    targets, not against the decoding of `y` (cut to the task's length).
    """

    x: np.ndarray
    y: np.ndarray
    x_dec: np.ndarray | None = None
    alignment: np.ndarray | None = None
    length: np.ndarray | None = None
    x_ext: np.ndarray | None = None
    oov: list[tuple[str, ...]] | None = None
    reference: np.ndarray | None = None
    copying: bool = False
    texts: list[tuple[str, str]] | None = None

    def __len__(self) -> int:
        return len(self.x)

    @property
    def inputs(self):
        """What the model is called on: `x`, `[x, x_dec]` for seq2seq, `[x, x_dec, x_ext]`
        with copying."""
        if self.x_dec is None:
            return self.x
        return [self.x, self.x_dec, self.x_ext] if self.copying else [self.x, self.x_dec]

    @property
    def targets(self) -> np.ndarray:
        """What a prediction is judged against: `reference`, else `y`."""
        return self.y if self.reference is None else self.reference

    def take(self, index) -> Split:
        """A new split holding the rows `index` (a slice or index array)."""

        def pick(a):
            return None if a is None else a[index]

        rows = np.arange(len(self.x))[index].tolist()  # lists: picked by row number
        oov = None if self.oov is None else [self.oov[i] for i in rows]
        texts = None if self.texts is None else [self.texts[i] for i in rows]
        return Split(
            self.x[index],
            self.y[index],
            pick(self.x_dec),
            pick(self.alignment),
            pick(self.length),
            pick(self.x_ext),
            oov,
            pick(self.reference),
            self.copying,
            texts,
        )

    def replace(self, **changes) -> Split:
        """A copy with the fields in `changes` replaced."""
        return dataclasses.replace(self, **changes)

    def as_copying(self) -> Split:
        """The split as a copying model is fed it: the source is its own extended source,
        with no unknown words (`with_copy`)."""
        return self.replace(x_ext=self.x, oov=[()] * len(self), copying=True)

    def count_tokens(self, field: str) -> int:
        """The non-padding ids of `x` or `y`."""
        return int((getattr(self, field) != PAD).sum())

    def words(self, row: int) -> tuple[str, ...]:
        """The unknown words of `row` its extended ids stand for (none without `oov`)."""
        return () if self.oov is None else tuple(self.oov[row])


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
    return Split(src, y, x_dec, *_alignment_and_length(alignments, lengths, y.shape))


def _alignment_and_length(alignments, lengths, shape) -> tuple:
    """A split's `alignment` (`shape`, -1 past each row's) and `length`, or None for each
    not given."""
    align = None
    if alignments is not None:
        align = np.full(shape, -1, dtype="int32")
        for i, row in enumerate(alignments):
            align[i, : len(row)] = row
    return align, None if lengths is None else np.asarray(lengths, "int32")


def copy_split(
    pairs: Sequence[tuple[str, str]],
    tokenizer: Tokenizer,
    alignments: Sequence[Sequence[int]] | None = None,
    lengths: Sequence[int] | None = None,
) -> Split:
    """Encode (source text, target text) pairs over one vocabulary for copy attention.

    As `seq2seq_split`, with the source and the target encoded by `tokenizer`,
    and in extended ids too (`Tokenizer.encode_extended`): `x_ext` is the
    source in them, `oov` each row's unknown words, `y` the target in them
    (a target word unknown to the vocabulary that is in its source has its
    extended id, any other one `<unk>`). `x` and the decoder input `x_dec`
    write the unknown words as `<unk>`. A model without copying trains on
    `without_copy(split, ...)` of it.
    """
    sources = [tokenizer.encode_extended(text) for text, _ in pairs]
    targets = [
        tokenizer.encode_target(text, source.oov) + [END]
        for source, (_, text) in zip(sources, pairs)
    ]
    y = pad(targets)
    size = len(tokenizer)
    x_dec = pad(
        [[START] + [t if t < size else UNK for t in row[:-1]] for row in targets], y.shape[1]
    )
    align, length = _alignment_and_length(alignments, lengths, y.shape)
    x = pad([source.ids for source in sources])
    x_ext = pad([source.extended for source in sources], x.shape[1])
    oov = [tuple(source.oov) for source in sources]
    return Split(x, y, x_dec, align, length, x_ext, oov, copying=True)


def without_copy(split: Split, vocab_size: int) -> Split:
    """`split` for a model without copying: not fed `x_ext`, the targets' extended ids
    (`>= vocab_size`) written `<unk>` in `y`, the targets themselves kept as `reference`
    (writing `<unk>` for an unknown word is no match)."""
    if not split.copying:
        return split
    y = np.where(split.y >= vocab_size, UNK, split.y).astype(split.y.dtype)
    return split.replace(y=y, copying=False, reference=split.targets)


def with_copy(split: Split) -> Split:
    """`split` for a copying model: as it is where it has `x_ext`; else (one vocabulary and
    no unknown words kept) the source is its own extended source, with no unknown words."""
    return split if split.copying else split.as_copying()
