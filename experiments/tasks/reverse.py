"""`reverse`: reverse a random string; target step t attends source S-1-t."""

from __future__ import annotations

from typing import Literal

from experiments import kinds, tasks
from experiments.data import random_strings
from experiments.data.sections import StringTaskSection
from experiments.data.task import Task


@tasks.register
class ReverseTask(StringTaskSection):
    """Reverse a random string; ground-truth alignment is `S-1-t`."""

    name: Literal["reverse"]

    def build(self) -> Task:
        """Random strings over the first `alphabet_size` letters, and their reversal.

        With `test_min_length`/`test_max_length`, a generalisation split of longer
        strings (as many as the test split) is made too, from the same alphabet and
        its own random stream (`generalization_rng`), reported in the buckets that
        start at `length_buckets` (default: three of equal width).
        """
        fields = random_strings.task_fields(self, reverse=True)
        return Task(self.name, kinds.get("seq2seq"), **fields)
