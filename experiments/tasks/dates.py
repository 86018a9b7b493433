"""`dates`: human-written dates in many formats -> ISO 8601 (`YYYY-MM-DD`)."""

from __future__ import annotations

import datetime as dt

import numpy as np

from experiments import kinds
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


def build(cfg) -> Task:
    """Random dates between `min_year` and `max_year`, each in a random style."""
    rng = np.random.default_rng(cfg.seed)
    start = dt.date(cfg.min_year, 1, 1).toordinal()
    stop = dt.date(cfg.max_year, 12, 31).toordinal()
    pairs = []
    for _ in range(cfg.num_examples):
        date = dt.date.fromordinal(int(rng.integers(start, stop + 1)))
        styles = human_formats(date)
        text = styles[int(rng.integers(len(styles)))]
        pairs.append((text, date.isoformat()))
    chars = sorted({c for source, _ in pairs for c in source} | set("0123456789"))
    source_vocab = Vocab(chars)
    target_vocab = Vocab(list("0123456789-"))
    tokenizer = source_vocab.tokenizer()  # each character a token
    data = seq2seq_split(pairs, tokenizer, target_vocab.tokenizer())
    train, val, test, probes = make_splits(data, cfg, rng)
    return Task(
        "dates",
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
