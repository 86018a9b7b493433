"""Length generalisation: a task's test examples grouped by length, and the plot of a metric
over the groups.

The test split (lengths seen in training) is one bucket; the generalisation
split (longer examples, `Task.generalization`) is cut into the task's own
buckets (`Task.length_buckets`), else into at most three buckets of equal
width. Bucket names (`len_13_16`) suffix the metric names
(`test_exact_match_greedy_len_13_16`).
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from experiments.tasks.split import Split
from experiments.tasks.task import Task

MAX_BUCKETS = 3


def buckets(task: Task, limit: int | None = None) -> dict[str, Split]:
    """`{"len_4_10": split, "len_13_16": split, ...}`, shortest first; at most `limit` rows
    each (the tasks go round the longer lengths, so a prefix keeps every length). Empty when
    the task has no generalisation split."""
    if task.generalization is None:
        return {}
    out = {_name(task.test.length): task.test}
    longer = task.generalization
    for start, stop in task.length_buckets or _equal_widths(longer.length):
        rows = np.flatnonzero((longer.length >= start) & (longer.length <= stop))
        if len(rows):
            out[f"len_{start}_{stop}"] = longer.take(rows)
    if limit is not None:
        out = {name: split.take(slice(0, limit)) for name, split in out.items()}
    return out


def _equal_widths(lengths: np.ndarray) -> list[tuple[int, int]]:
    """At most `MAX_BUCKETS` (first, last) ranges of equal width covering `lengths`."""
    low, high = int(lengths.min()), int(lengths.max())
    width = math.ceil((high - low + 1) / MAX_BUCKETS)
    return [(start, min(start + width - 1, high)) for start in range(low, high + 1, width)]


def _name(lengths: np.ndarray) -> str:
    return f"len_{int(lengths.min())}_{int(lengths.max())}"


def figure(results: dict[str, dict[str, float]], metric: str, title: str) -> Figure:
    """A bar per bucket of `results[bucket][metric]`, the training lengths' bucket first."""
    names = list(results)
    values = [results[name].get(metric, float("nan")) for name in names]
    fig = Figure(figsize=(max(4.0, 1.3 * len(names) + 2), 3.5))
    ax = fig.add_subplot(1, 1, 1)
    colors = ["tab:blue"] + ["tab:orange"] * (len(names) - 1)
    ax.bar(range(len(names)), values, color=colors)
    ax.set_xticks(
        range(len(names)), labels=[n.removeprefix("len_").replace("_", "–") for n in names]
    )
    ax.set_xlabel("length (blue: seen in training)")
    ax.set_ylabel(metric)
    ax.set_ylim(0, 1.05 if all(0 <= v <= 1 for v in values if v == v) else None)
    for i, value in enumerate(values):
        ax.text(i, value, f"{value:.3f}", ha="center", va="bottom", fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    return fig
