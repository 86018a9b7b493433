"""`reverse`: reverse a random string; target step t attends source S-1-t."""

from __future__ import annotations

import string

import numpy as np

from experiments.tasks.split import make_splits, seq2seq_split
from experiments.tasks.task import Task
from experiments.tasks.vocab import Vocab


def build(cfg) -> Task:
    """Random strings over the first `alphabet_size` letters, and their reversal."""
    rng = np.random.default_rng(cfg.seed)
    letters = list(string.ascii_lowercase[: cfg.alphabet_size])
    vocab = Vocab(letters)
    pairs, alignments = [], []
    for _ in range(cfg.num_examples):
        length = int(rng.integers(cfg.min_length, cfg.max_length + 1))
        source = [letters[i] for i in rng.integers(len(letters), size=length)]
        pairs.append((source, source[::-1]))
        alignments.append([length - 1 - t for t in range(length)])
    data = seq2seq_split(pairs, vocab, vocab, alignments)
    train, val, test, probes = make_splits(data, cfg, rng)
    return Task("reverse", "seq2seq", vocab, train, val, test, probes, target_vocab=vocab)
