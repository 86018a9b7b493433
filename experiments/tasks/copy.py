"""`copy`: copy a random string; target step t attends source t."""

from __future__ import annotations

from experiments.data.task import Task
from experiments.tasks.reverse import string_task


def build(cfg) -> Task:
    """Random strings over the first `alphabet_size` letters, and the same strings.

    By default a length generalisation benchmark: train on strings of 4-12 letters, test
    on 13-48, reported in the buckets 13-16, 17-20, 21-24 and 25-48
    (`task.length_buckets: [13, 17, 21, 25]`). The strings are drawn as `reverse` draws
    them (`reverse.string_task`): the training rows from the task seed, the longer ones
    from its own stream (`split.generalization_rng`), going round the lengths.
    """
    return string_task(cfg, "copy", reverse=False)
