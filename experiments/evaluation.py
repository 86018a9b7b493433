"""Evaluate a model on a split: task metrics, attention statistics, probes, samples."""

from __future__ import annotations

import numpy as np

from experiments import metrics, modeling
from experiments.config import GenerateConfig
from experiments.tasks.base import PAD


def forward(model, split, batch_size: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """(logits, attention weights) over a whole split, in batches."""
    logits, weights = [], []
    for start in range(0, len(split), batch_size):
        part = split.take(slice(start, start + batch_size))
        lg, w = modeling.attention_weights(model, part.inputs)
        logits.append(lg)
        weights.append(w)
    return np.concatenate(logits), np.concatenate(weights)


def decode_length(task, gen_cfg) -> int:
    """How many tokens to generate: `generate.max_length` or the task's target length."""
    if gen_cfg.max_length:
        return gen_cfg.max_length
    return task.val.y.shape[1] if task.kind == "seq2seq" else 100


def evaluate(model, task, split, gen_cfg: GenerateConfig | None = None) -> dict[str, float]:
    """Task metrics plus `alignment_accuracy` (when known) and `attention_entropy`.

    Classification: accuracy, macro_f1. Seq2seq: token_accuracy (teacher
    forced) and exact_match (greedy decoding). LM: perplexity, bits_per_char.
    """
    logits, weights = forward(model, split)
    out: dict[str, float] = {}
    valid = None
    if task.kind == "classification":
        predictions = np.argmax(logits, -1)
        out["accuracy"] = metrics.accuracy(split.y, predictions)
        out["macro_f1"] = metrics.macro_f1(split.y, predictions, len(task.class_names))
    elif task.kind == "seq2seq":
        valid = split.y != PAD
        out["token_accuracy"] = metrics.token_accuracy(split.y, logits)
        greedy = GenerateConfig(strategy="greedy")
        decoded = modeling.decode(model, task, greedy, split.x, decode_length(task, greedy))
        out["exact_match"] = metrics.exact_match(split.y, decoded)
    else:
        valid = split.y != PAD
        out.update(metrics.language_model_metrics(split.y, logits))
    if split.alignment is not None:
        out["alignment_accuracy"] = metrics.alignment_accuracy(weights, split.alignment)
    out["attention_entropy"] = metrics.attention_entropy(weights, valid)
    return out


def probe_heatmaps(model, task, epoch: int | None = None) -> list[tuple[str, dict]]:
    """Each probe's attention as `(name, plot_attention kwargs)`: the model part of a heatmap."""
    logits, weights = modeling.attention_weights(model, task.probes.inputs)
    heatmaps = []
    for i in range(len(task.probes)):
        source = task.vocab.labels(task.probes.x[i])
        suffix = "" if epoch is None else f" (epoch {epoch})"
        if task.kind == "classification":
            predicted = task.class_names[int(np.argmax(logits[i]))]
            truth = task.class_names[int(task.probes.y[i])]
            rows = weights[i][None, : len(source)]
            labels = [f"pred {predicted}"]
            title = f"probe {i}: label {truth}{suffix}"
        elif task.kind == "seq2seq":
            labels = task.output_vocab.labels(task.probes.y[i])
            rows = weights[i][: len(labels), : len(source)]
            title = f"probe {i}{suffix}"
        else:
            n = min(32, len(source))
            source = labels = source[:n]
            rows = weights[i][:n, :n]
            title = f"probe {i}: causal self-attention{suffix}"
        kwargs = dict(weights=rows, source_tokens=source, target_tokens=labels, title=title)
        heatmaps.append((f"probe_{i}", kwargs))
    return heatmaps


def confusion_figure(matrix: np.ndarray, class_names: list[str]):
    """A labelled confusion-matrix figure (rows: true class, columns: predicted)."""
    from matplotlib.figure import Figure

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


def sample_rows(model, task, gen_cfg: GenerateConfig, count: int) -> list[dict]:
    """A table of generations: source/target/prediction (seq2seq) or prompt/continuation (LM)."""
    if count == 0 or task.kind == "classification":
        return []
    length = decode_length(task, gen_cfg)
    if task.kind == "seq2seq":
        split = task.test.take(slice(0, count))
        decoded = modeling.decode(model, task, gen_cfg, split.x, length)
        return [
            {
                "source": task.vocab.decode(split.x[i]),
                "target": task.output_vocab.decode(split.y[i]),
                "prediction": task.output_vocab.decode(decoded[i]),
                "correct": task.output_vocab.decode(split.y[i])
                == task.output_vocab.decode(decoded[i]),
            }
            for i in range(len(split))
        ]
    prompts = (gen_cfg.prompts or task.prompts)[:count]
    decoded = modeling.decode(model, task, gen_cfg, [task.vocab.encode(p) for p in prompts], length)
    return [
        {"prompt": p, "continuation": task.vocab.decode(row)} for p, row in zip(prompts, decoded)
    ]
