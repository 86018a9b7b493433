"""Invariants of the attention layers over random shapes and masks (hypothesis)."""

import numpy as np
import pytest
from helpers import to_numpy
from hypothesis import given
from hypothesis import strategies as st

from keras_attn_rnn import AttentionPooling, SequenceAttention

pytestmark = pytest.mark.layers

SCORE_NAMES = ["dot", "scaled_dot", "general", "additive", "tanh_dot"]


@st.composite
def batches(draw, max_time=7, dim=4):
    # Few distinct shapes (JAX compiles per shape); masks and values vary freely.
    b = draw(st.sampled_from([1, 3]))
    t = draw(st.sampled_from([t for t in (1, 4, 7, 9) if t <= max_time]))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(b, t, dim)).astype("float32")
    mask = rng.random((b, t)) < draw(st.floats(0.2, 1.0))
    return x, mask


@given(batches(), st.sampled_from(SCORE_NAMES))
def test_weights_are_a_distribution_over_unmasked_keys(data, score):
    x, mask = data
    _, a = SequenceAttention(score=score)([x, x], mask=[None, mask], return_attention_scores=True)
    a = to_numpy(a)
    assert np.all(a >= 0)
    assert np.all(a[np.broadcast_to(~mask[:, None, :], a.shape)] == 0.0)
    has_key = mask.any(-1)
    np.testing.assert_allclose(a.sum(-1)[has_key], 1.0, atol=1e-5)
    assert np.all(a.sum(-1)[~has_key] == 0.0)


@given(batches(), st.sampled_from(SCORE_NAMES))
def test_pooling_weights_are_a_distribution(data, score):
    x, mask = data
    _, a = AttentionPooling(score=score)(x, mask=mask, return_attention_scores=True)
    a = to_numpy(a)
    assert np.all(a >= 0) and np.all(a[~mask] == 0.0)
    rows = mask.any(-1)
    np.testing.assert_allclose(a.sum(-1)[rows], 1.0, atol=1e-5)
    assert np.all(a[~rows] == 0.0)


@given(batches(), st.sampled_from([1, 3]), st.sampled_from(SCORE_NAMES), st.booleans())
def test_padding_does_not_change_unpadded_outputs(data, extra, score, causal):
    x, mask = data
    layer = SequenceAttention(score=score)
    pooling = AttentionPooling(score=score)
    padded_x = np.concatenate([x, np.random.normal(size=(x.shape[0], extra, x.shape[2]))], 1)
    padded_x = padded_x.astype("float32")
    padded_mask = np.concatenate([mask, np.zeros((x.shape[0], extra), bool)], 1)
    out = to_numpy(layer([x, x], mask=[mask, mask], use_causal_mask=causal))
    padded_out = to_numpy(
        layer([padded_x, padded_x], mask=[padded_mask, padded_mask], use_causal_mask=causal)
    )
    np.testing.assert_allclose(padded_out[:, : x.shape[1]], out, atol=1e-5)
    np.testing.assert_array_equal(padded_out[:, x.shape[1] :], 0.0)
    np.testing.assert_allclose(
        to_numpy(pooling(padded_x, mask=padded_mask)), to_numpy(pooling(x, mask=mask)), atol=1e-5
    )


@given(batches(max_time=8), st.sampled_from(SCORE_NAMES), st.data())
def test_causal_outputs_ignore_the_future(data, score, draw):
    x, _ = data
    t = x.shape[1]
    cut = draw.draw(st.integers(0, t - 1))
    layer = SequenceAttention(score=score)
    changed = x.copy()
    changed[:, cut + 1 :] = np.random.default_rng(cut).normal(size=changed[:, cut + 1 :].shape)
    before = to_numpy(layer([x, x], use_causal_mask=True))
    after = to_numpy(layer([changed, changed], use_causal_mask=True))
    np.testing.assert_allclose(after[:, : cut + 1], before[:, : cut + 1], atol=1e-6)


@given(batches(max_time=9), st.integers(1, 3), st.sampled_from(SCORE_NAMES), st.data())
def test_window_outputs_ignore_keys_outside_the_window(data, window, score, draw):
    x, mask = data
    t = x.shape[1]
    i = draw.draw(st.integers(0, t - 1))
    outside = np.abs(np.arange(t) - i) > window
    layer = SequenceAttention(score=score, window=window)
    value = x.copy()
    value[:, outside] = 100.0 * np.random.default_rng(i).normal(size=value[:, outside].shape)
    before = to_numpy(layer([x, x], mask=[None, mask]))
    after = to_numpy(layer([x, value], mask=[None, mask]))
    np.testing.assert_allclose(after[:, i], before[:, i], atol=1e-5)
