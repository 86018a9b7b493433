"""`classification`: one label per sequence, from `AttentiveClassifier`."""

from __future__ import annotations

import html

import numpy as np

from experiments.data import baseline, confusion, metrics, modeling
from experiments.kinds import register
from experiments.kinds.base import Artifacts, TaskKind
from keras_attn_rnn import models


@register
class Classification(TaskKind):
    """Embedding -> (bi)RNN -> AttentionPooling -> softmax over `task.class_names`."""

    name = "classification"
    model_type = "AttentiveClassifier"
    default_score = "tanh_dot"
    default_bidirectional = True
    metric_names = ("accuracy", "macro_f1")
    fit_metrics = ("accuracy",)
    heatmap_rows = "pooling query (the prediction)"  # the y-axis of its heatmaps
    primary_metric = "test_accuracy"
    # the pooling query is the classifier's own; no decoder, no copying
    unused_keys = ("model.decoder", "model.attention_layer_size", "model.copy", "model.max_oov")

    def build_model(self, cfg, task):
        m = cfg.model
        attention = {**self.attention(cfg), "query": m.attention.query}
        if m.attention.query_value is not None:
            attention["query_value"] = m.attention.query_value
        return models.AttentiveClassifier(
            vocabulary_size=len(task.vocab),
            num_classes=len(task.class_names),
            bidirectional=self.bidirectional(cfg),
            num_layers=m.num_layers,
            attention=attention,
            embedding_dim=m.embedding_dim,
            units=m.units,
            rnn=m.rnn,
            dropout=m.dropout,
        )

    def task_metrics(self, model, task, split, predictions):
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
            f"probe {i}: label {truth}, predicted {predicted}",
        )

    def final_artifacts(self, model, task, split):
        """The confusion matrix of `split` (JSON and figure, bounded: `confusion`),
        the probes' tokens highlighted by their attention weight (`probes.html`), and a linear
        baseline's accuracy and macro-F1 on `split`, trained on the run's training split
        (`baseline_test_*`)."""
        predictions = np.argmax(modeling.predict_logits(model, split.inputs), -1)
        cells = metrics.confusion_cells(split.y, predictions)
        scores = baseline.linear_baseline(task.train, split, len(task.class_names))
        matrix = confusion.confusion_json(split.y, predictions, task.class_names)
        return Artifacts(
            metrics={f"baseline_test_{name}": value for name, value in scores.items()},
            dicts={"confusion_matrix.json": matrix},
            figures={"confusion_matrix.png": confusion.figure(cells, task.class_names)},
            texts={"probes.html": probes_html(model, task)},
        )


def probes_html(model, task) -> str:
    """Each probe's tokens shaded by the attention they got, with the true and predicted label
    (as hierarchical attention papers show it). A self-contained page: MLflow's artifact view
    renders it."""
    logits, weights = modeling.attention_weights(model, task.probes.inputs)
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    rows = []
    for i in range(len(task.probes)):
        tokens = task.vocab.labels(task.probes.x[i])
        w = weights[i][: len(tokens)]
        top = max(float(w.max()), 1e-9) if len(w) else 1.0
        spans = " ".join(
            f'<span title="{a:.3f}" style="background: rgba(230, 80, 30, {a / top:.3f})">'
            f"{html.escape(token)}</span>"
            for token, a in zip(tokens, w.tolist())
        )
        truth = task.class_names[int(task.probes.y[i])]
        predicted = int(np.argmax(logits[i]))
        verdict = "correct" if task.class_names[predicted] == truth else "wrong"
        rows.append(
            f"<div class='probe'><p><b>probe {i}</b>: label <b>{html.escape(truth)}</b>, "
            f"predicted <b>{html.escape(task.class_names[predicted])}</b> "
            f"(p = {probabilities[i, predicted]:.3f}, {verdict})</p><p>{spans}</p></div>"
        )
    style = (
        "body{font-family:sans-serif;max-width:60em;margin:1em auto}"
        ".probe{border-bottom:1px solid #ddd;padding:.3em 0}span{padding:0 .1em;line-height:1.8}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{task.name} probes</title>"
        f"<style>{style}</style></head><body><h2>{html.escape(task.name)}: attention over the "
        f"probe texts</h2><p>Darker: more attention (hover for the weight).</p>"
        f"{''.join(rows)}</body></html>"
    )
