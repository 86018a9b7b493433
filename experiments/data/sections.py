"""The config sections' base, and the bases of the task sections: the keys every task has
(`TaskSection`) and those of the random-string tasks with their longer test lengths
(`StringTaskSection`).

A task's own section (in its module under `experiments/tasks/`) subclasses one of them,
adds `name: Literal["<task>"]` and its keys, and builds its data in `build`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from experiments import bounded_input

if TYPE_CHECKING:
    from experiments.data.task import Task

MAX_SEQUENCE_LENGTH = 20_000  # longer inputs are refused before any array is allocated

NUM_EXAMPLES = "Rows generated (before the split)."


class Section(BaseModel):
    """A config section: unknown keys are refused, an assignment is validated too."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TaskSection(Section):
    """The keys every task section has; a task's own section subclasses it, adds
    `name: Literal["<task>"]` and its keys, builds its data in `build`, and is registered
    with `experiments.tasks.register`."""

    name: str = Field(description="The task, by its registered name.")
    seed: int = Field(0, description="Seed of the task's data and of its split.")
    val_fraction: float = Field(
        0.1, gt=0.0, lt=0.5, description="Share of the rows held out for validation."
    )
    test_fraction: float = Field(0.1, lt=0.5, description="Share of the rows held out for test.")
    num_probes: int = Field(
        4, ge=1, le=32, description="Test rows whose attention is drawn every epoch."
    )

    def build(self) -> Task:
        """The task's data and kind, from this section (the task's builder)."""
        raise NotImplementedError

    @field_validator("test_fraction")
    @classmethod
    def _test_rows_of_its_own(cls, value: float) -> float:
        if not value > 0:
            raise ValueError(
                "greater than 0: the test_* metrics need test rows of their own "
                "(with 0 they would score the validation rows again)"
            )
        return value

    @model_validator(mode="after")
    def _length_range(self) -> TaskSection:
        low, high = getattr(self, "min_length", None), getattr(self, "max_length", None)
        if low is not None and high is not None and low > high:
            raise ValueError(f"task.min_length <= task.max_length, got {low} > {high}")
        return self


def existing_file(value: str, expected: str) -> str:
    """`value` (a task's `path`) resolved, when it is a regular file to read; else a
    `ValueError` (a field validator's) saying what is `expected` and why it is not."""
    problem = bounded_input.path_problem(value)
    if problem is not None:
        raise ValueError(f"{expected}; {value} {problem}")
    return str(Path(value).resolve())


def bucket_starts(starts: list[int], low: int, high: int) -> str | None:
    """What is wrong with `task.length_buckets` (the first length of each generalisation
    bucket: a bucket runs to the next one's start - 1, the last to `high`), or None."""
    increasing = all(a < b for a, b in zip(starts, starts[1:]))
    if starts and starts[0] == low and starts[-1] <= high and increasing:
        return None
    return (
        f"the first length of each bucket of the longer examples, increasing from {low} "
        f"to at most {high}"
    )


class StringTaskSection(TaskSection):
    """The keys of the random-string tasks (`random_strings`): the alphabet, the lengths, and
    the longer test lengths of length generalisation with their buckets."""

    num_examples: int = Field(6000, ge=16, description=NUM_EXAMPLES)
    alphabet_size: int = Field(
        12, ge=2, le=26, description="The strings' letters: the first this many of a-z."
    )
    min_length: int = Field(4, ge=1, description="The shortest string.")
    max_length: int = Field(
        10, ge=1, le=MAX_SEQUENCE_LENGTH, description="The longest string in training."
    )
    test_min_length: int | None = Field(
        None,
        ge=1,
        description="Length generalisation: also test on strings of this length "
        "(past `max_length`) ...",
    )
    test_max_length: int | None = Field(
        None, ge=1, le=MAX_SEQUENCE_LENGTH, description="... up to this one."
    )
    length_buckets: list[int] | None = Field(
        None,
        description="The first length of each reported bucket of those longer strings; "
        "unset: three of equal width.",
    )

    @model_validator(mode="after")
    def _longer_test_lengths(self) -> StringTaskSection:
        low, high = self.test_min_length, self.test_max_length
        if (low is None) != (high is None):
            raise ValueError("task.test_min_length and task.test_max_length together, or neither")
        if low is not None and not self.max_length < low <= high:
            raise ValueError(
                f"task.max_length < task.test_min_length <= task.test_max_length, "
                f"got {self.max_length}, {low}, {high}"
            )
        if self.length_buckets is not None:
            if low is None:
                raise ValueError(
                    "task.length_buckets cuts the longer strings: it needs "
                    "task.test_min_length and task.test_max_length"
                )
            wrong = bucket_starts(self.length_buckets, low, high)
            if wrong:
                raise ValueError(f"task.length_buckets: {wrong}, got {self.length_buckets}")
        return self
