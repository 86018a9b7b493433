"""Losses on attention: supervised attention, coverage, and the pointer-generator's.

The first two take the alignment history a decoder returns (`(B, T, S)`, zeros at
padded target steps, e.g. `AttentionDecoder(...)(..., return_attention_scores=True)`)
as `y_pred`; the pointer-generator's takes the mixture probabilities of
`Seq2Seq(copy=True)`. Each averages per example over its real target steps.
"""

import keras
from keras import ops

from keras_attn_rnn import _keras_compat, serializable


def _per_example_mean(values, valid):
    """Mean of `values (B, T)` over the steps where `valid`; 0 for a row with none."""
    valid = ops.cast(valid, "float32")
    total = ops.sum(values * valid, axis=-1)
    return total / ops.maximum(ops.sum(valid, axis=-1), 1.0)


def alignment_loss(positions, alignments, epsilon=1e-7):
    """`-log a[t, position_t]` per target step, averaged over the steps with a position.

    Args:
        positions: int `(B, T)` (or `(B,)`): the ground-truth attended memory
            position of each step, `-1` where there is none.
        alignments: float `(B, T, S)` (or `(B, S)`).

    Returns:
        float32 `(B,)`.
    """
    alignments = ops.cast(alignments, "float32")
    positions = ops.cast(positions, "int32")
    if len(alignments.shape) == 2:
        alignments, positions = ops.expand_dims(alignments, 1), ops.expand_dims(positions, 1)
    valid = positions >= 0
    picked = ops.take_along_axis(
        alignments, ops.expand_dims(ops.maximum(positions, 0), -1), axis=-1
    )
    nll = -ops.log(ops.squeeze(picked, -1) + epsilon)
    return _per_example_mean(nll, valid)


def coverage_loss(alignments):
    """`sum_i min(a_t,i, c_t,i)` per step with `c_t = sum_{tau<t} a_tau` (See et al., 2017),
    averaged over the steps that attend (steps whose alignments are all zero are padding).

    Args:
        alignments: float `(B, T, S)`.

    Returns:
        float32 `(B,)`.
    """
    alignments = ops.cast(alignments, "float32")
    coverage = ops.cumsum(alignments, axis=1) - alignments
    per_step = ops.sum(ops.minimum(alignments, coverage), axis=-1)
    return _per_example_mean(per_step, ops.sum(alignments, axis=-1) > 0)


@serializable.register
class AlignmentLoss(keras.losses.Loss):
    """Supervised attention: cross-entropy between the alignments and ground-truth positions.

    `y_true`: int `(B, T)` positions (`-1` where none); `y_pred`: the
    alignments `(B, T, S)`. Per example the mean over steps with a position
    of `-log(a[t, y_true_t] + epsilon)`.

    Examples:
        >>> from keras_attn_rnn.losses import AlignmentLoss
        >>> loss = AlignmentLoss()
        >>> positions = np.array([[1, -1]])  # step 0 attends position 1; step 1 has no position
        >>> alignments = np.array([[[0.2, 0.8], [0.5, 0.5]]])
        >>> float(loss(positions, alignments))  # -log(0.8)
        0.223...

    Reference:
        Liu et al., 2016, "Neural Machine Translation with Supervised
        Attention"; Mi et al., 2016, "Supervised Attentions for Neural
        Machine Translation".
    """

    def __init__(self, epsilon=1e-7, name="alignment_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.epsilon = epsilon

    def call(self, y_true, y_pred):
        return alignment_loss(y_true, y_pred, self.epsilon)

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


@serializable.register
class CoverageLoss(keras.losses.Loss):
    """The coverage loss of See et al. (2017): `sum_t sum_i min(a_t,i, c_t,i)` per example,
    averaged over its attending steps. `y_true` is ignored (pass anything of batch size B).

    Examples:
        >>> from keras_attn_rnn.losses import CoverageLoss
        >>> alignments = np.array([[[1.0, 0.0], [1.0, 0.0]]])  # position 0 twice
        >>> float(CoverageLoss()(np.zeros((1,)), alignments))  # overlap 0 + 1, over 2 steps
        0.5
    """

    def __init__(self, name="coverage_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        return coverage_loss(y_pred)


def pointer_generator_loss(targets, probabilities, epsilon=1e-7):
    """`-log P(target_t)` per target step, averaged over the steps whose target is not 0.

    Args:
        targets: int `(B, T)`: the target in extended ids (`keras_attn_rnn.copying`), 0 at
            padding.
        probabilities: float `(B, T, W)`: the mixture over the extended vocabulary
            (`Seq2Seq(copy=True)`'s output), mixed in probability space; the log is
            taken once, of the probability clipped below at `epsilon`.

    Returns:
        float32 `(B,)`; 0 for a row of padding only.
    """
    return _per_example_mean(
        pointer_generator_nll(targets, probabilities, epsilon), ops.not_equal(targets, 0)
    )


def pointer_generator_nll(targets, probabilities, epsilon=1e-7):
    """`-log(max(P(target_t), epsilon))` per target step: float32 `(B, T)`, 0 at padding
    (`targets == 0`)."""
    probabilities = ops.cast(probabilities, "float32")
    targets = ops.cast(targets, "int32")
    picked = ops.take_along_axis(
        probabilities, ops.expand_dims(ops.maximum(targets, 0), -1), axis=-1
    )
    nll = -ops.log(ops.maximum(ops.squeeze(picked, -1), epsilon))
    return ops.where(ops.not_equal(targets, 0), nll, 0.0)


@serializable.register
class PointerGeneratorLoss(keras.losses.Loss):
    """The pointer-generator's negative log-likelihood over the extended vocabulary.

    `y_true`: int `(B, T)` target ids in the extended vocabulary (0 is padding);
    `y_pred`: the mixture probabilities `(B, T, W)` that `Seq2Seq(copy=True)` returns.
    The mean of `-log(max(P(y_true_t), epsilon))` over the batch's target tokens
    (padding skipped), as Keras' masked losses average, so a copy model's loss reads
    like a plain model's masked cross-entropy; `reduction="sum"` gives their sum.
    (`pointer_generator_loss` gives See et al.'s per-example means instead.)

    Examples:
        >>> from keras_attn_rnn.losses import PointerGeneratorLoss
        >>> targets = np.array([[2, 0]])  # step 1 is padding
        >>> probabilities = np.array([[[0.1, 0.1, 0.8], [1.0, 0.0, 0.0]]])
        >>> float(PointerGeneratorLoss()(targets, probabilities))  # -log(0.8)
        0.223...

    Reference:
        See et al., 2017, "Get To The Point: Summarization with Pointer-Generator
        Networks".
    """

    def __init__(self, epsilon=1e-7, name="pointer_generator_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.epsilon = epsilon

    def call(self, y_true, y_pred):
        nll = pointer_generator_nll(y_true, y_pred, self.epsilon)
        # Keras' loss reduction skips the padded steps (as its own masked losses do)
        return _keras_compat.set_keras_mask(nll, ops.not_equal(ops.cast(y_true, "int32"), 0))

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}
