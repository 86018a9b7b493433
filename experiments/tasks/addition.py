"""`addition`: "535+61" -> "596", following the keras.io addition example."""

from __future__ import annotations

import numpy as np

from experiments.tasks.split import make_splits, seq2seq_split
from experiments.tasks.task import Task
from experiments.tasks.vocab import Vocab


def build(cfg) -> Task:
    """Unique questions `a+b` with up to `digits` digits per operand.

    As in the keras.io example the question is padded with spaces to
    `2 * digits + 1` characters and (by default) reversed, and the answer is
    padded with spaces to `digits + 1` characters.
    """
    rng = np.random.default_rng(cfg.seed)
    maxlen = 2 * cfg.digits + 1
    capacity = (10**cfg.digits) * (10**cfg.digits + 1) // 2
    wanted = min(cfg.num_examples, capacity)
    vocab = Vocab(list("0123456789+ "))
    seen, pairs = set(), []
    while len(pairs) < wanted:
        for a, b in _numbers(rng, cfg.digits, 2 * wanted).reshape(-1, 2).tolist():
            key = (min(a, b), max(a, b))
            if key in seen or len(pairs) == wanted:
                continue
            seen.add(key)
            question = f"{a}+{b}".ljust(maxlen)
            if cfg.reverse_input:
                question = question[::-1]
            pairs.append((list(question), list(str(a + b).ljust(cfg.digits + 1))))
    data = seq2seq_split(pairs, vocab, vocab)
    train, val, test, probes = make_splits(data, cfg, rng)
    return Task("addition", "seq2seq", vocab, train, val, test, probes, target_vocab=vocab)


def _numbers(rng, digits: int, count: int) -> np.ndarray:
    """`count` numbers of 1..digits random digits each, as in the keras.io generator."""
    lengths = rng.integers(1, digits + 1, size=count)
    values = rng.integers(0, 10, size=(count, digits))
    powers = 10 ** np.arange(digits - 1, -1, -1)
    return (values * powers).sum(axis=1) // 10 ** (digits - lengths)
