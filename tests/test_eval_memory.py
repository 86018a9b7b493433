"""A split's evaluation goes batch by batch: the same figures as over the whole split's
logits at once, without ever holding them (they are rows x steps x vocabulary floats)."""

from __future__ import annotations

import tracemalloc

import keras
import numpy as np
import pytest

from experiments.config import validate
from experiments.data import metrics, modeling
from experiments.data.vocab import PAD
from experiments.tasks import build_task

TASKS = {
    "reverse": {"name": "reverse", "num_examples": 120},  # seq2seq, with alignments
    "lm": {"name": "lm", "max_chars": 40000},
    "needle": {"name": "needle", "num_examples": 120},  # classification, with alignments
}


def built(name):
    cfg = validate({"task": TASKS[name], "model": {"units": 8, "embedding_dim": 8}})
    task = build_task(cfg.task)
    keras.utils.set_random_seed(0)
    return task, task.kind.build_model(cfg, task)


def whole_split(task, model, split):
    """The figures from the whole split's logits and attention weights at once."""
    logits, weights = modeling.attention_weights(model, split.inputs)
    kept = task.kind.logit_summary(logits, split.y)
    out = task.kind.task_metrics(model, task, split, kept)
    if split.alignment is not None:
        out["alignment_accuracy"] = metrics.alignment_accuracy(weights, split.alignment)
    attended = task.kind.attended_rows(split)
    out["attention_entropy"] = metrics.attention_entropy(weights, attended)
    return out, logits.nbytes


@pytest.mark.parametrize("name", sorted(TASKS))
def test_batch_by_batch_gives_the_whole_split_s_figures(name, monkeypatch):
    task, model = built(name)
    split = task.test
    expected, _ = whole_split(task, model, split)
    forward = modeling.forward
    rows = len(split) // 3 + 1  # at least 3 batches, the last one short
    assert len(split) % rows and len(split) >= 2 * rows
    monkeypatch.setattr(modeling, "forward", lambda m, s: forward(m, s, batch_size=rows))
    got = task.kind.evaluate(model, task, split)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-5, nan_ok=True), key


def test_the_evaluation_never_holds_the_split_s_logits(monkeypatch):
    task, model = built("lm")
    split = task.test
    _, logits_bytes = whole_split(task, model, split)
    forward = modeling.forward
    monkeypatch.setattr(modeling, "forward", lambda m, s: forward(m, s, batch_size=2))
    task.kind.evaluate(model, task, split)  # traced once outside the measurement
    tracemalloc.start()
    try:
        task.kind.evaluate(model, task, split)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # NumPy's arrays are traced: the batches' logits come and go, the split's never gather
    assert len(split) >= 8
    assert peak < logits_bytes / 2, (peak, logits_bytes)


def test_the_language_model_s_perplexity_is_that_of_its_logits(monkeypatch):
    task, model = built("lm")
    split = task.test
    logits, _ = modeling.attention_weights(model, split.inputs)
    forward = modeling.forward
    monkeypatch.setattr(modeling, "forward", lambda m, s: forward(m, s, batch_size=3))
    got = task.kind.evaluate(model, task, split)
    expected = metrics.language_model_metrics(split.y, logits)  # from the logits themselves
    assert got["perplexity"] == pytest.approx(expected["perplexity"], rel=1e-6)


def test_the_kept_predictions_hold_any_vocabulary_and_padding_is_not_scored():
    task, _ = built("reverse")
    logits = np.eye(40_000, dtype="float32")[None, 39_990:]  # ids past 8 and 16 bits
    np.testing.assert_array_equal(
        task.kind.logit_summary(logits, None), [np.arange(39_990, 40_000)]
    )
    # the cross-entropy of padded positions does not count, from logits or log-probabilities
    targets = np.array([[3, 1, PAD]])
    logits = np.zeros((1, 3, 4), "float32")
    logits[0, 2] = [100.0, -100.0, -100.0, -100.0]  # a padded step, confidently "right"
    nll = np.log(4.0)
    assert metrics.cross_entropy(targets, logits) == pytest.approx(nll)
    assert metrics.cross_entropy(targets, metrics.target_log_probs(targets, logits)) == (
        pytest.approx(nll)
    )


def test_padded_target_steps_do_not_count_in_the_attention_entropy(monkeypatch):
    task, model = built("reverse")
    split = task.test
    real = task.kind.attended_rows(split)
    assert not real.all()  # some targets are padded
    forward = modeling.forward

    def attending_on_padding(m, s):  # uniform rows on real steps, one-hot rows on padded ones
        for rows, logits, weights in forward(m, s, batch_size=5):
            uniform = np.full_like(weights, 1.0 / weights.shape[-1])
            one_hot = np.zeros_like(weights)
            one_hot[..., 0] = 1.0
            yield rows, logits, np.where(real[rows][..., None], uniform, one_hot)

    monkeypatch.setattr(modeling, "forward", attending_on_padding)
    got = task.kind.evaluate(model, task, split)["attention_entropy"]
    _, weights = modeling.attention_weights(model, split.take(slice(0, 1)).inputs)
    assert got == pytest.approx(np.log(weights.shape[-1]))  # the padded steps' 0 left out
