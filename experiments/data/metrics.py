"""Task metrics as small NumPy functions (no Keras, no MLflow)."""

from __future__ import annotations

import numpy as np

from experiments.data.vocab import END, PAD


def accuracy(labels: np.ndarray, predictions: np.ndarray) -> float:
    """Fraction of exact label matches."""
    return float(np.mean(labels == predictions))


def confusion_matrix(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> np.ndarray:
    """`m[i, j]` = number of examples of class i predicted as j (`num_classes`² numbers: see
    `confusion_cells` for many classes)."""
    matrix = np.zeros((num_classes, num_classes), dtype="int64")
    np.add.at(matrix, (labels, predictions), 1)
    return matrix


def confusion_cells(labels: np.ndarray, predictions: np.ndarray) -> np.ndarray:
    """The non-zero cells of the confusion matrix, `(K, 3)` rows of (true class, predicted
    class, count) in that order: at most one per example, however many classes there are."""
    pairs = np.stack([np.asarray(labels), np.asarray(predictions)], -1).astype("int64")
    cells, counts = np.unique(pairs.reshape(-1, 2), axis=0, return_counts=True)
    return np.concatenate([cells, counts[:, None]], -1)


def macro_f1(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> float:
    """Unweighted mean of per-class F1 over the classes present in labels or predictions
    (counted per class: time and memory grow with the examples and `num_classes`, not its
    square)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    tp = np.bincount(labels[labels == predictions], minlength=num_classes).astype("float64")
    support = np.bincount(labels, minlength=num_classes) + np.bincount(
        predictions, minlength=num_classes
    )
    present = support > 0
    f1 = np.divide(2 * tp, support, out=np.zeros_like(tp), where=present)
    return float(f1[present].mean()) if present.any() else 0.0


def token_accuracy(targets: np.ndarray, predictions: np.ndarray) -> float:
    """Teacher-forced next-token accuracy over non-padding target positions; `predictions`
    the predicted ids (B, T) or the logits (B, T, V)."""
    if predictions.ndim > targets.ndim:
        predictions = np.argmax(predictions, -1)
    valid = targets != PAD
    return float(np.mean((predictions == targets)[valid]))


def exact_match(targets: np.ndarray, decoded: np.ndarray) -> float:
    """Fraction of sequences whose decoded tokens equal the target up to `</s>`."""
    return float(np.mean([_strip(t) == _strip(d) for t, d in zip(targets, decoded)]))


def target_lengths(targets: np.ndarray) -> np.ndarray:
    """Each target's length (B,): its tokens before `</s>` (or padding)."""
    ends = np.isin(targets, (END, PAD))
    return np.where(ends.any(-1), ends.argmax(-1), targets.shape[-1]).astype("int32")


def cut_to_lengths(decoded: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """`decoded` (B, T) ended at each row's length (B,): its first `lengths[b]` tokens, then
    `</s>` and padding (the oracle-length output: its length is the target's)."""
    out = np.zeros((len(decoded), max(decoded.shape[1], int(lengths.max(initial=0)) + 1)), "int32")
    for b, n in enumerate(lengths):
        out[b, :n] = decoded[b, :n]
        out[b, n] = END
    return out


def _strip(ids) -> list[int]:
    out = []
    for i in ids:
        if int(i) in (END, PAD):
            break
        out.append(int(i))
    return out


def target_log_probs(targets: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """The log-probability (B, T) each row's logits (B, T, V) give its target."""
    logits = logits.astype("float64")
    logits = logits - logits.max(-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]


def cross_entropy(targets: np.ndarray, logits: np.ndarray) -> float:
    """Mean negative log-likelihood in nats over non-padding targets; `logits` (B, T, V), or
    the targets' log-probabilities (B, T) (`target_log_probs`)."""
    if logits.ndim > targets.ndim:
        logits = target_log_probs(targets, logits)
    return float(-logits[targets != PAD].mean())


def language_model_metrics(targets: np.ndarray, logits: np.ndarray) -> dict[str, float]:
    """Perplexity and bits per character; `logits` as `cross_entropy` takes them."""
    nll = cross_entropy(targets, logits)
    return {"perplexity": float(np.exp(nll)), "bits_per_char": nll / np.log(2.0)}


def alignment_accuracy(weights: np.ndarray, alignment: np.ndarray) -> float:
    """How often the most attended position is the ground-truth one.

    `weights` is (B, S) with `alignment` (B,), or (B, T, S) with `alignment`
    (B, T); positions with alignment -1 are ignored.
    """
    return mean_of(*alignment_terms(weights, alignment))


def mean_of(total: float, count: int) -> float:
    """`total / count` from the terms of `alignment_terms` or `entropy_terms` (summed over
    batches, or of one), NaN when nothing counted."""
    return total / count if count else float("nan")


def alignment_terms(weights: np.ndarray, alignment: np.ndarray) -> tuple[int, int]:
    """`alignment_accuracy`'s hits and counted positions, so that batches can be added up."""
    valid = alignment >= 0
    return int((np.argmax(weights, -1) == alignment)[valid].sum()), int(valid.sum())


def attention_entropy(weights: np.ndarray, valid: np.ndarray | None = None) -> float:
    """Mean entropy (nats) of the attention rows; rows with no weight are skipped."""
    return mean_of(*entropy_terms(weights, valid))


def entropy_terms(weights: np.ndarray, valid: np.ndarray | None = None) -> tuple[float, int]:
    """`attention_entropy`'s sum of the kept rows' entropies and their count, so that batches
    can be added up."""
    w = weights.reshape(-1, weights.shape[-1]).astype("float64")
    keep = w.sum(-1) > 0.5
    if valid is not None:
        keep &= valid.reshape(-1)
    w = w[keep]
    return float(-(w * np.log(np.where(w > 0, w, 1.0))).sum()), int(keep.sum())
