"""Random strings and their reversal or copy: the data of the random-string tasks (a
`StringTaskSection`), with the longer strings of their length generalisation split."""

from __future__ import annotations

import string

import numpy as np

from experiments.data.sections import StringTaskSection
from experiments.data.split import (
    bucket_ranges,
    duplicate_count,
    generalization_rng,
    make_splits,
    row_keys,
    seq2seq_split,
)
from experiments.data.vocab import Vocab


def task_fields(cfg: StringTaskSection, reverse: bool) -> dict:
    """The `Task` fields (all but its name and kind) of the random strings `cfg` describes
    over its first `alphabet_size` letters, and their reversal (`reverse`) or copy.

    With `test_min_length`/`test_max_length`, a generalisation split of longer strings
    (as many as the test split) is made too, from the same alphabet and its own random
    stream (`generalization_rng`), going round the lengths, reported in the buckets that
    start at `length_buckets` (default: three of equal width).
    """
    rng = np.random.default_rng(cfg.seed)
    letters = list(string.ascii_lowercase[: cfg.alphabet_size])
    vocab = Vocab(letters)
    tokenizer = vocab.tokenizer()  # each letter a token
    data = _strings(
        rng, letters, tokenizer, cfg.num_examples, cfg.min_length, cfg.max_length, reverse
    )
    train, val, test, probes = make_splits(data, cfg, rng)
    generalization, length_buckets = None, None
    if cfg.test_min_length is not None:
        generalization = _strings(
            generalization_rng(cfg.seed),
            letters,
            tokenizer,
            len(test),
            cfg.test_min_length,
            cfg.test_max_length,
            reverse,
            cycle=True,
        )
        if cfg.length_buckets is not None:
            length_buckets = bucket_ranges(cfg.length_buckets, cfg.test_max_length)
    return dict(
        vocab=vocab,
        train=train,
        val=val,
        test=test,
        probes=probes,
        target_vocab=vocab,
        generalization=generalization,
        tokenizer=tokenizer,
        duplicate_rows=duplicate_count(row_keys(data.x)),
        length_buckets=length_buckets,
    )


def _strings(
    rng, letters, tokenizer, count: int, low: int, high: int, reverse: bool, cycle: bool = False
):
    """`count` random strings of `low..high` letters and their reversal, aligned `S-1-t`
    (or, without `reverse`, their copy, aligned `t`).

    With `cycle`, the lengths go round `low..high` (as many strings of each length).
    """
    pairs, alignments, lengths = [], [], []
    for i in range(count):
        length = low + i % (high - low + 1) if cycle else int(rng.integers(low, high + 1))
        source = "".join(letters[i] for i in rng.integers(len(letters), size=length))
        steps = range(length)
        pairs.append((source, source[::-1] if reverse else source))
        alignments.append([length - 1 - t for t in steps] if reverse else list(steps))
        lengths.append(length)
    return seq2seq_split(pairs, tokenizer, tokenizer, alignments, lengths)
