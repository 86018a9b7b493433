"""Length generalisation: a task's test examples grouped by length, and the plot of a metric
over the groups.

The test split (lengths seen in training) is one bucket; the generalisation
split (longer examples, `Task.generalization`) is cut into the task's own
buckets (`Task.length_buckets`), else into at most three buckets of equal
width. Bucket names (`len_13_16`) suffix the metric names
(`test_exact_match_greedy_len_13_16`, `test_exact_match_oracle_len_13_16`).
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from experiments.data.split import Split
from experiments.data.task import Task

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


def figure(results: dict[str, dict[str, float]], metrics: str | list[str], title: str) -> Figure:
    """Bars per bucket of `results[bucket][metric]` for each of `metrics` (one name or
    several: grouped side by side, `exact_match_greedy` beside `exact_match_oracle`), the
    training lengths' bucket first (hatched)."""
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    names = list(results)
    fig = Figure(figsize=(max(4.0, (0.7 + 0.6 * len(metrics)) * len(names) + 2), 3.5))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / len(metrics)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    values = []
    for k, metric in enumerate(metrics):
        row = [results[name].get(metric, float("nan")) for name in names]
        values += row
        xs = [i + (k - (len(metrics) - 1) / 2) * width for i in range(len(names))]
        bars = ax.bar(xs, row, width=width, color=colors[k % len(colors)], label=metric)
        bars[0].set_hatch("//")  # seen in training
        for x, value in zip(xs, row):
            ax.text(x, value, f"{value:.3f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(
        range(len(names)), labels=[n.removeprefix("len_").replace("_", "–") for n in names]
    )
    ax.set_xlabel("length (hatched: seen in training)")
    ax.set_ylabel(metrics[0] if len(metrics) == 1 else "score")
    ax.set_ylim(0, 1.05 if all(0 <= v <= 1 for v in values if v == v) else None)
    if len(metrics) > 1:  # plain patches: the hatch marks the bucket, not the metric
        handles = [Patch(color=colors[k % len(colors)]) for k in range(len(metrics))]
        ax.legend(handles, metrics, fontsize=8, loc="upper right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
