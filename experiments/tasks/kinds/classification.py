"""`classification`: one label per sequence, from `AttentiveClassifier`."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from experiments.tasks import metrics, modeling
from experiments.tasks.kinds.base import Artifacts, TaskKind
from keras_attn_rnn import models


class Classification(TaskKind):
    """Embedding -> (bi)RNN -> AttentionPooling -> softmax over `task.class_names`."""

    name = "classification"
    model_type = "AttentiveClassifier"
    default_score = "tanh_dot"
    default_bidirectional = True
    metric_names = ("accuracy", "macro_f1")
    fit_metrics = ("accuracy",)
    primary_metric = "test_accuracy"
    ignore_padding = False  # labels, not token sequences: class 0 is a class

    def build_model(self, cfg, task):
        m = cfg.model
        attention = {**self.attention(cfg), "query": m.attention.query}
        if m.attention.query_value is not None:
            attention["query_value"] = m.attention.query_value
        return models.AttentiveClassifier(
            vocab_size=len(task.vocab),
            num_classes=len(task.class_names),
            bidirectional=self.bidirectional(cfg),
            num_layers=m.num_layers,
            attention=attention,
            embedding_dim=m.embedding_dim,
            units=m.units,
            rnn=m.rnn,
            dropout=m.dropout,
        )

    def task_metrics(self, model, task, split, logits):
        predictions = np.argmax(logits, -1)
        return {
            "accuracy": metrics.accuracy(split.y, predictions),
            "macro_f1": metrics.macro_f1(split.y, predictions, len(task.class_names)),
        }

    def attended_rows(self, split):
        return None  # one pooling row per example, never padding

    def serving_output(self, model, cfg, tokens):
        return modeling.predict_logits(model, tokens)

    def card_fields(self, task, cfg):
        return {"classes": list(task.class_names)}

    def heatmap(self, task, i, source, logits, weights):
        predicted = task.class_names[int(np.argmax(logits))]
        truth = task.class_names[int(task.probes.y[i])]
        return (
            weights[None, : len(source)],
            source,
            [f"pred {predicted}"],
            f"probe {i}: label {truth}",
        )

    def final_artifacts(self, model, task, split):
        """The confusion matrix of `split`, as JSON and as a figure."""
        predictions = np.argmax(modeling.predict_logits(model, split.inputs), -1)
        matrix = metrics.confusion_matrix(split.y, predictions, len(task.class_names))
        return Artifacts(
            dicts={
                "confusion_matrix.json": {"classes": task.class_names, "matrix": matrix.tolist()}
            },
            figures={"confusion_matrix.png": confusion_figure(matrix, task.class_names)},
        )


def confusion_figure(matrix: np.ndarray, class_names: list[str]) -> Figure:
    """A labelled confusion-matrix figure (rows: true class, columns: predicted)."""
    size = min(12.0, 2.5 + 0.5 * len(class_names))
    fig = Figure(figsize=(size, size))
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(matrix, cmap="Blues")
    ticks = range(len(class_names))
    ax.set_xticks(ticks, labels=class_names, rotation=90)
    ax.set_yticks(ticks, labels=class_names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    for (row, col), value in np.ndenumerate(matrix):
        ax.text(col, row, str(value), ha="center", va="center", fontsize=8)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return fig
