"""The attention losses against NumPy references: supervised attention and coverage."""

import keras
import numpy as np
import pytest
from helpers import to_numpy

from keras_attn_rnn import losses

pytestmark = pytest.mark.layers


def alignment_reference(positions, alignments, epsilon=1e-7):
    """Per row: the mean of -log(a[t, p_t] + epsilon) over the steps with p_t >= 0, else 0."""
    out = []
    for row_positions, row in zip(positions, alignments):
        nll = [-np.log(row[t, p] + epsilon) for t, p in enumerate(row_positions) if p >= 0]
        out.append(np.mean(nll) if nll else 0.0)
    return np.asarray(out)


def coverage_reference(alignments):
    """Per row: the mean over attending steps of sum_i min(a_t,i, sum_{tau<t} a_tau,i)."""
    out = []
    for row in alignments.astype("float64"):
        steps = [
            np.minimum(row[t], row[:t].sum(axis=0)).sum() for t in range(len(row)) if row[t].sum()
        ]
        out.append(np.mean(steps) if steps else 0.0)
    return np.asarray(out)


def random_alignments(shape, seed):
    rng = np.random.default_rng(seed)
    weights = rng.random(shape) ** 3  # skewed, some near zero
    return (weights / weights.sum(-1, keepdims=True)).astype("float32")


def test_alignment_loss_equals_the_reference_over_steps_with_a_position():
    alignments = random_alignments((4, 5, 7), seed=0)
    positions = np.random.default_rng(1).integers(0, 7, (4, 5))
    positions[0, 2:] = -1  # steps without a position do not count
    positions[1] = -1  # a row with none scores 0
    positions[2, 0] = 6
    alignments[2, 0, 6] = 0.0  # an exact zero: -log(epsilon), finite
    got = to_numpy(losses.alignment_loss(positions, alignments))
    np.testing.assert_allclose(got, alignment_reference(positions, alignments), rtol=1e-5)
    assert got[1] == 0.0 and got[2] > -np.log(1e-7) / 5
    wider = to_numpy(losses.alignment_loss(positions, alignments, epsilon=1e-2))
    np.testing.assert_allclose(wider, alignment_reference(positions, alignments, 1e-2), rtol=1e-5)


def test_alignment_loss_of_one_step_and_the_keras_loss():
    alignments = random_alignments((3, 4), seed=2)
    positions = np.array([3, -1, 0])
    got = to_numpy(losses.alignment_loss(positions, alignments))
    expected = alignment_reference(positions[:, None], alignments[:, None])
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    loss = losses.AlignmentLoss(epsilon=1e-3)
    batch = random_alignments((2, 3, 4), seed=3)
    targets = np.array([[0, 1, -1], [2, 2, 3]])
    np.testing.assert_allclose(
        float(loss(targets, batch)), alignment_reference(targets, batch, 1e-3).mean(), rtol=1e-5
    )
    clone = losses.AlignmentLoss.from_config(loss.get_config())
    assert clone.epsilon == 1e-3 and clone.name == "alignment_loss"
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    assert isinstance(restored, losses.AlignmentLoss) and restored.epsilon == 1e-3


def test_coverage_loss_equals_the_reference_and_ignores_padded_steps():
    alignments = random_alignments((3, 6, 5), seed=4)
    alignments[0, 4:] = 0.0  # padded target steps
    alignments[2] = 0.0  # a row of padding only
    got = to_numpy(losses.coverage_loss(alignments))
    np.testing.assert_allclose(got, coverage_reference(alignments), rtol=1e-5, atol=1e-7)
    assert got[2] == 0.0
    loss = losses.CoverageLoss()
    np.testing.assert_allclose(
        float(loss(np.zeros((3,)), alignments)), coverage_reference(alignments).mean(), rtol=1e-5
    )
    assert losses.CoverageLoss.from_config(loss.get_config()).name == "coverage_loss"


def test_defaults_keyword_arguments_and_float32_under_another_floatx():
    alignments = np.zeros((1, 1, 4100), "float32")
    alignments[0, 0, 4097] = 1.0  # a position float16 cannot hold (it rounds to 4096)
    positions = np.array([[4097]])
    assert to_numpy(losses.AlignmentLoss()(positions, alignments)) < 1e-6  # -log(1 + 1e-7)
    nothing = alignments.copy()
    nothing[0, 0, 4097] = 0.0
    np.testing.assert_allclose(
        to_numpy(losses.AlignmentLoss()(positions, nothing)), -np.log(1e-7), rtol=1e-5
    )
    summed = losses.AlignmentLoss(reduction="sum", epsilon=1e-3)
    pair = random_alignments((2, 3, 4), seed=5)
    targets = np.array([[0, 1, 2], [3, -1, 0]])
    np.testing.assert_allclose(
        float(summed(targets, pair)), alignment_reference(targets, pair, 1e-3).sum(), rtol=1e-5
    )
    assert losses.CoverageLoss(reduction="sum").reduction == "sum"
    floatx = keras.config.floatx()
    keras.config.set_floatx("float16")
    try:
        lost = losses.alignment_loss(positions, alignments)
        covered = losses.coverage_loss(random_alignments((1, 3, 4), seed=6).astype("float16"))
    finally:
        keras.config.set_floatx(floatx)
    assert keras.backend.standardize_dtype(lost.dtype) == "float32"
    assert keras.backend.standardize_dtype(covered.dtype) == "float32"
    assert to_numpy(lost) < 1e-6
