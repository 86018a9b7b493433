"""`needle`: find the one marked token that carries the label."""

from __future__ import annotations

import numpy as np

from experiments import kinds
from experiments.data.split import Split, duplicate_count, make_splits, pad, row_keys
from experiments.data.task import Task
from experiments.data.vocab import Vocab


def build(cfg) -> Task:
    """Random filler sequences with one needle token `N<c>` at a random position.

    The label is the needle's class `c`; the ground-truth alignment is its
    position, so a good attention pooling puts its weight there.
    """
    rng = np.random.default_rng(cfg.seed)
    needles = [f"N{c}" for c in range(cfg.num_classes)]
    fillers = [f"w{i}" for i in range(cfg.num_fillers)]
    vocab = Vocab(needles + fillers, joiner=" ")
    # the rows are drawn as ids: a text of them is the tokens joined by spaces
    tokenizer = vocab.tokenizer(split="whitespace")
    first_filler = vocab.index[fillers[0]]
    rows, labels, positions = [], [], []
    for _ in range(cfg.num_examples):
        length = int(rng.integers(cfg.min_length, cfg.max_length + 1))
        row = rng.integers(first_filler, len(vocab), size=length)
        label = int(rng.integers(cfg.num_classes))
        position = int(rng.integers(length))
        row[position] = vocab.index[needles[label]]
        rows.append(row)
        labels.append(label)
        positions.append(position)
    data = Split(
        pad(rows, cfg.max_length), np.array(labels, "int32"), None, np.array(positions, "int32")
    )
    train, val, test, probes = make_splits(data, cfg, rng)
    return Task(
        "needle",
        kinds.get("classification"),
        vocab,
        train,
        val,
        test,
        probes,
        class_names=needles,
        tokenizer=tokenizer,
        duplicate_rows=duplicate_count(row_keys(data.x)),
    )
