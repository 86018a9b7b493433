"""The confusion matrix of a classifier's predictions as a run logs it: JSON and a figure,
both bounded however many classes the task has."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from experiments.data import metrics

# The confusion matrix's figure shows at most this many classes, each cell with its count
# (past it: the most confused ones), and its JSON holds the full matrix up to
# `DENSE_CLASSES` classes, its non-zero cells past it: both stay small however many classes
# the task has (a 1,000-class matrix drawn whole was a million text labels).
FIGURE_CLASSES = 30
DENSE_CLASSES = 100
TICK_CHARS = 24  # the longest class name written on an axis


def confusion_json(labels: np.ndarray, predictions: np.ndarray, class_names: list[str]) -> dict:
    """The confusion matrix as JSON: `matrix` (rows: true class, columns: predicted) up to
    `DENSE_CLASSES` classes; past it `cells`, its non-zero cells as [true, predicted,
    count] (class indices into `classes`)."""
    if len(class_names) > DENSE_CLASSES:
        return {
            "classes": list(class_names),
            "cells": metrics.confusion_cells(labels, predictions).tolist(),
        }
    matrix = metrics.confusion_matrix(labels, predictions, len(class_names))
    return {"classes": list(class_names), "matrix": matrix.tolist()}


def most_confused(cells: np.ndarray, num_classes: int, k: int) -> np.ndarray:
    """The `k` classes (sorted indices) with the most errors, as true or as predicted class
    (ties: the most examples, then the lowest index); every class when there are at most `k`."""
    if num_classes <= k:
        return np.arange(num_classes)
    true, predicted, count = cells.T
    wrong = np.where(true != predicted, count, 0)
    errors = np.bincount(true, wrong, num_classes) + np.bincount(predicted, wrong, num_classes)
    support = np.bincount(true, count, num_classes)
    order = np.lexsort((np.arange(num_classes), -support, -errors))
    return np.sort(order[:k])


def figure(cells: np.ndarray, class_names: list[str]) -> Figure:
    """A labelled confusion-matrix figure (rows: true class, columns: predicted) of the
    confusion matrix's non-zero `cells` (`metrics.confusion_cells`): every class, or past
    `FIGURE_CLASSES` the most confused ones, so it draws at most `FIGURE_CLASSES`² counts."""
    picked = most_confused(cells, len(class_names), FIGURE_CLASSES)
    position = np.full(len(class_names), -1)
    position[picked] = np.arange(len(picked))
    matrix = np.zeros((len(picked), len(picked)), dtype="int64")
    true, predicted = position[cells[:, 0]], position[cells[:, 1]]
    inside = (true >= 0) & (predicted >= 0)
    matrix[true[inside], predicted[inside]] = cells[inside, 2]
    names = [_tick(class_names[i]) for i in picked]
    size = min(12.0, 2.5 + 0.5 * len(names))
    fig = Figure(figsize=(size, size))
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(matrix, cmap="Blues")
    ticks = range(len(names))
    ax.set_xticks(ticks, labels=names, rotation=90)
    ax.set_yticks(ticks, labels=names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    if len(picked) < len(class_names):
        ax.set_title(
            f"the {len(picked)} most confused of {len(class_names)} classes "
            "(all of them: confusion_matrix.json)"
        )
    for (row, col), value in np.ndenumerate(matrix):
        ax.text(col, row, str(value), ha="center", va="center", fontsize=8)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return fig


def _tick(name: str) -> str:
    return name if len(name) <= TICK_CHARS else name[: TICK_CHARS - 1] + "…"
