"""Masks and the masked softmax shared by every attention layer.

Softmax always runs in float32, whatever the layer's compute dtype, and masked
positions get weight exactly 0. A row whose every key is masked gets all-zero
weights (and so a zero context), never NaN.
"""

import keras
import numpy as np
from keras import ops

from keras_attn_rnn import normalizers

# Finite stand-in for -inf in float32 softmax: exp(score - max) underflows to
# exactly 0 for any real score, and no NaN can come out of `inf - inf`.
_FLOAT32_PENALTY = -1e30


def _largest(dtype):
    dtype = keras.backend.standardize_dtype(dtype)
    if dtype == "bfloat16":
        return 3.3895313892515355e38
    return float(np.finfo(np.dtype(dtype)).max)


def masked_softmax(scores, mask=None, axis=-1, normalizer=None):
    """Normalises `scores` over `axis` in float32, with exact zeros where `mask` is False.

    Args:
        scores: score tensor of any float dtype.
        mask: boolean tensor broadcastable to `scores`, True where a key may be
            attended. `None` attends everywhere.
        axis: the key axis.
        normalizer: function `(scores, axis) -> weights` (see
            `keras_attn_rnn.normalizers`); softmax by default.

    Returns:
        float32 weights of the shape of `scores`.
    """
    normalizer = normalizer or normalizers.softmax
    scores = ops.cast(scores, "float32")
    if mask is None:
        return normalizer(scores, axis=axis)
    mask = ops.cast(mask, "bool")
    scores = ops.where(mask, scores, _FLOAT32_PENALTY)
    weights = normalizer(scores, axis=axis)
    return ops.where(mask, weights, 0.0)


def clip_to_dtype(scores, dtype):
    """Replaces overflowed (inf) half-precision scores by the dtype's largest finite value."""
    if keras.backend.standardize_dtype(dtype) == "float32":
        return scores
    limit = _largest(dtype)
    return ops.clip(ops.cast(scores, "float32"), -limit, limit)


def _positions(query_length, key_length, offset):
    """Absolute query positions `(Tq, 1)` (or `(B, Tq, 1)` for a per-row `offset`) and key
    positions `(1, Tv)`."""
    rows = ops.arange(query_length, dtype="int32")
    offset = ops.cast(offset, "int32")
    if len(ops.shape(offset)) == 1:
        rows = ops.expand_dims(offset, 1) + ops.expand_dims(rows, 0)
    else:
        rows = rows + offset
    return ops.expand_dims(rows, -1), ops.expand_dims(ops.arange(key_length, dtype="int32"), 0)


def causal_mask(query_length, key_length, offset=0):
    """Boolean mask where query `i` sees keys `j <= i + offset`.

    `offset` is the absolute position of the first query (cached decoding): an
    int (the mask is `(Tq, Tv)`) or a `(B,)` tensor, one per row (`(B, Tq, Tv)`).
    """
    rows, cols = _positions(query_length, key_length, offset)
    return ops.greater_equal(rows, cols)


def window_mask(query_length, key_length, window, offset=0):
    """Boolean mask where query `i` sees keys with `|i + offset - j| <= window` (shapes as
    `causal_mask`)."""
    rows, cols = _positions(query_length, key_length, offset)
    return ops.less_equal(ops.abs(rows - cols), window)


def zero_masked(values, mask):
    """`values` `(B, T, ...)` with every position where `mask` `(B, T)` is False set to 0.

    A padded position then influences nothing: `0 * NaN` would still be NaN in
    a context `weights . values`, even with its weight exactly 0. `None` masks
    nothing.
    """
    if mask is None:
        return values
    mask = ops.cast(mask, "bool")
    mask = ops.reshape(mask, tuple(ops.shape(mask)) + (1,) * (len(ops.shape(values)) - 2))
    return ops.where(mask, values, ops.zeros_like(values))


def combine_masks(*masks):
    """Logical AND of the masks that are not None (broadcasting); None if all are None."""
    result = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        result = mask if result is None else ops.logical_and(result, mask)
    return result
