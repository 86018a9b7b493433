"""`dates`: human-written dates in many formats -> ISO 8601 (`YYYY-MM-DD`)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

import numpy as np
from pydantic import Field

from experiments import kinds, tasks
from experiments.data.sections import NUM_EXAMPLES, TaskSection
from experiments.data.split import duplicate_count, make_splits, row_keys, seq2seq_split
from experiments.data.task import Task
from experiments.data.vocab import Vocab

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def human_formats(date: dt.date) -> list[str]:
    """The same date written in a dozen unambiguous human styles."""
    d, m, y = date.day, date.month, date.year
    month, mon, day = MONTHS[m - 1], MONTHS[m - 1][:3], DAYS[date.weekday()]
    return [
        f"{d} {month} {y}",
        f"{d:02d} {month} {y}",
        f"{month} {d}, {y}",
        f"{d} {mon} {y}",
        f"{mon} {d} {y}",
        f"{day}, {month} {d}, {y}",
        f"{day[:3]} {d} {mon} {y}",
        f"{d:02d}.{m:02d}.{y}",
        f"{d}.{m}.{y}",
        f"{y}/{m:02d}/{d:02d}",
        f"{month.upper()} {d} {y}",
        f"{d} {mon.lower()} {y}",
        f"the {d} of {month}, {y}",
    ]


@tasks.register
class DatesTask(TaskSection):
    """Human-written dates in many formats, mapped to ISO 8601."""

    name: Literal["dates"]
    num_examples: int = Field(10000, ge=16, description=NUM_EXAMPLES)
    min_year: int = Field(1950, ge=1, description="The earliest year of a date.")
    max_year: int = Field(2050, le=9999, description="The latest year of a date.")

    def build(self) -> Task:
        """Random dates between `min_year` and `max_year`, each in a random style."""
        rng = np.random.default_rng(self.seed)
        start = dt.date(self.min_year, 1, 1).toordinal()
        stop = dt.date(self.max_year, 12, 31).toordinal()
        pairs = []
        for _ in range(self.num_examples):
            date = dt.date.fromordinal(int(rng.integers(start, stop + 1)))
            styles = human_formats(date)
            text = styles[int(rng.integers(len(styles)))]
            pairs.append((text, date.isoformat()))
        chars = sorted({c for source, _ in pairs for c in source} | set("0123456789"))
        source_vocab = Vocab(chars)
        target_vocab = Vocab(list("0123456789-"))
        tokenizer = source_vocab.tokenizer()  # each character a token
        data = seq2seq_split(pairs, tokenizer, target_vocab.tokenizer())
        train, val, test, probes = make_splits(data, self, rng)
        return Task(
            self.name,
            kinds.get("seq2seq"),
            source_vocab,
            train,
            val,
            test,
            probes,
            target_vocab=target_vocab,
            tokenizer=tokenizer,
            duplicate_rows=duplicate_count(row_keys(data.x)),
        )
