"""`reverse`: reverse a random string; target step t attends source S-1-t."""

from __future__ import annotations

import string

import numpy as np

from experiments import kinds
from experiments.data.split import (
    bucket_ranges,
    duplicate_count,
    generalization_rng,
    make_splits,
    row_keys,
    seq2seq_split,
)
from experiments.data.task import Task
from experiments.data.vocab import Vocab


def build(cfg) -> Task:
    """Random strings over the first `alphabet_size` letters, and their reversal.

    With `test_min_length`/`test_max_length`, a generalisation split of longer
    strings (as many as the test split) is made too, from the same alphabet and
    its own random stream (`generalization_rng`), reported in the buckets that
    start at `length_buckets` (default: three of equal width).
    """
    return string_task(cfg, "reverse", reverse=True)


def string_task(cfg, name: str, reverse: bool) -> Task:
    """The task `name` of random strings (a `reverse` or `copy` config section) and their
    reversal (`reverse`) or copy."""
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
    return Task(
        name,
        kinds.get("seq2seq"),
        vocab,
        train,
        val,
        test,
        probes,
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
