"""`needle`: find the one marked token that carries the label."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from experiments import kinds, tasks
from experiments.data.sections import MAX_SEQUENCE_LENGTH, NUM_EXAMPLES, TaskSection
from experiments.data.split import Split, duplicate_count, make_splits, pad, row_keys
from experiments.data.task import Task
from experiments.data.vocab import Vocab


@tasks.register
class NeedleTask(TaskSection):
    """Random token sequences; one marked token carries the label."""

    name: Literal["needle"]
    num_examples: int = Field(4000, ge=16, description=NUM_EXAMPLES)
    num_classes: int = Field(4, ge=2, le=64, description="Classes: one needle token each.")
    num_fillers: int = Field(40, ge=2, description="Filler tokens around the needle.")
    min_length: int = Field(10, ge=2, description="The shortest sequence.")
    max_length: int = Field(30, ge=2, le=MAX_SEQUENCE_LENGTH, description="The longest sequence.")

    def build(self) -> Task:
        """Random filler sequences with one needle token `N<c>` at a random position.

        The label is the needle's class `c`; the ground-truth alignment is its
        position, so a good attention pooling puts its weight there.
        """
        rng = np.random.default_rng(self.seed)
        needles = [f"N{c}" for c in range(self.num_classes)]
        fillers = [f"w{i}" for i in range(self.num_fillers)]
        vocab = Vocab(needles + fillers, joiner=" ")
        # the rows are drawn as ids: a text of them is the tokens joined by spaces
        tokenizer = vocab.tokenizer(split="whitespace")
        first_filler = vocab.index[fillers[0]]
        rows, labels, positions = [], [], []
        for _ in range(self.num_examples):
            length = int(rng.integers(self.min_length, self.max_length + 1))
            row = rng.integers(first_filler, len(vocab), size=length)
            label = int(rng.integers(self.num_classes))
            position = int(rng.integers(length))
            row[position] = vocab.index[needles[label]]
            rows.append(row)
            labels.append(label)
            positions.append(position)
        data = Split(
            pad(rows, self.max_length),
            np.array(labels, "int32"),
            None,
            np.array(positions, "int32"),
        )
        train, val, test, probes = make_splits(data, self, rng)
        return Task(
            self.name,
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
