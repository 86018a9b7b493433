"""`copy`: copy a random string; target step t attends source t."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from experiments import kinds, tasks
from experiments.data import random_strings
from experiments.data.sections import MAX_SEQUENCE_LENGTH, NUM_EXAMPLES, StringTaskSection
from experiments.data.task import Task


@tasks.register
class CopyTask(StringTaskSection):
    """Copy a random string; ground-truth alignment is `t`. By default the length
    generalisation benchmark: train on 4-12 letters, test on 13-48 in buckets 13-16, 17-20,
    21-24, 25-48."""

    name: Literal["copy"]
    num_examples: int = Field(10000, ge=16, description=NUM_EXAMPLES)
    min_length: int = Field(4, ge=1, description="The shortest string.")
    max_length: int = Field(
        12, ge=1, le=MAX_SEQUENCE_LENGTH, description="The longest string in training."
    )
    test_min_length: int | None = Field(
        13, ge=1, description="Also test on strings of this length ..."
    )
    test_max_length: int | None = Field(
        48, ge=1, le=MAX_SEQUENCE_LENGTH, description="... up to this one."
    )
    length_buckets: list[int] | None = Field(
        default_factory=lambda: [13, 17, 21, 25],
        description="The first length of each reported bucket of the longer strings.",
    )

    def build(self) -> Task:
        """Random strings over the first `alphabet_size` letters, and the same strings.

        By default a length generalisation benchmark: train on strings of 4-12 letters, test
        on 13-48, reported in the buckets 13-16, 17-20, 21-24 and 25-48
        (`task.length_buckets: [13, 17, 21, 25]`). The strings are drawn by
        `random_strings.task_fields`: the training rows from the task seed, the longer ones
        from its own stream (`split.generalization_rng`), going round the lengths.
        """
        fields = random_strings.task_fields(self, reverse=False)
        return Task(self.name, kinds.get("seq2seq"), **fields)
