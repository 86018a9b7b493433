"""Dynamic convolution attention: its beta-binomial prior against a hand computation, a
NumPy reference from the layer's own weights (several steps, a padded mask, two priors),
its properties (a distribution with exact zeros on padding; with the learned weights
zeroed only the causal prior acts, so the alignments only move forward) and its argument
errors."""

import keras
import numpy as np
import pytest
from helpers import assert_config_round_trip, to_numpy
from hypothesis import given
from hypothesis import strategies as st
from keras import ops

from keras_attn_rnn import mechanisms
from keras_attn_rnn.mechanisms import dynamic_convolution_attention as dca

pytestmark = pytest.mark.layers

B, T, S, D_Q, D_M, UNITS = 3, 4, 12, 5, 3, 6
ATOL = 1e-5
MASK = np.arange(S)[None, :] < np.array([[12], [3], [8]])
SIZES = {
    "static_filters": 3,
    "static_kernel_size": 5,
    "dynamic_filters": 2,
    "dynamic_kernel_size": 3,
}


def built(seed=1, scale=0.6, length=S, **arguments):
    layer = mechanisms.DynamicConvolutionAttention(UNITS, **{**SIZES, **arguments})
    layer.build((None, D_Q), (None, length, D_M))
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0.0, scale, w.shape).astype("float32"))
    return layer


def zeroed(length, **arguments):
    layer = built(length=length, **arguments)
    for w in layer.weights:
        w.assign(np.zeros(w.shape, "float32"))
    return layer


def queries(seed=0, steps=T, batch=B):
    return np.random.default_rng(seed).normal(size=(batch, steps, D_Q)).astype("float32")


def run(layer, queries, length=S, mask=MASK, previous=None):
    """Alignments `(B, T, S)` after each step, from the initial state or `previous`."""
    memory = ops.zeros((queries.shape[0], length, D_M))
    keys = layer.prepare_keys(memory)
    mask = None if mask is None else ops.convert_to_tensor(mask)
    state = layer.initial_state(keys, mask)
    if previous is not None:
        state = {"alignments": ops.convert_to_tensor(previous, "float32")}
    out = []
    for t in range(queries.shape[1]):
        query = ops.convert_to_tensor(queries[:, t], layer.compute_dtype)
        weights, state = layer.call(query, keys, memory, mask, state)
        out.append(to_numpy(weights))
    return np.stack(out, 1)


def beta_binomial(length, alpha, beta):
    """The pmf by rising factorials, no gamma function: `P(0) = prod_{i<n} (beta + i) /
    (alpha + beta + i)` and `P(k+1) / P(k) = (n - k) (k + alpha) / ((k + 1) (n - k - 1 +
    beta))`."""
    n = length - 1
    pmf = [np.prod([(beta + i) / (alpha + beta + i) for i in range(n)])]
    for k in range(n):
        pmf.append(pmf[-1] * (n - k) * (k + alpha) / ((k + 1) * (n - k - 1 + beta)))
    return np.array(pmf)


def reference(layer, queries, mask, prior):
    """float64 loops over the steps, rows and filters, from the layer's weights."""
    w = {v.path.split("/")[-1]: to_numpy(v).astype("float64") for v in layer.weights}
    sk, dk = layer.static_kernel_size, layer.dynamic_kernel_size
    previous = np.zeros((B, S))
    previous[:, 0] = 1.0
    out = []
    for t in range(queries.shape[1]):
        hidden = np.tanh(queries[:, t] @ w["query_kernel"] + w["query_bias"])
        filters = (hidden @ w["filter_kernel"]).reshape(B, layer.dynamic_filters, dk)
        alignments = np.zeros((B, S))
        for b in range(B):
            a = previous[b]
            static = np.stack(
                [np.correlate(np.pad(a, sk // 2), f, "valid") for f in w["static_kernel"].T], -1
            )
            dynamic = np.stack(
                [np.correlate(np.pad(a, dk // 2), f, "valid") for f in filters[b]], -1
            )
            hidden_j = static @ w["static_projection"] + dynamic @ w["dynamic_projection"]
            energies = np.tanh(hidden_j + w["b"]) @ w["v"]
            energies += np.log(np.maximum(np.convolve(a, prior)[:S], 1e-6))  # causal
            e = np.where(mask[b], np.exp(energies - energies[mask[b]].max()), 0.0)
            alignments[b] = e / e.sum()
        out.append(alignments)
        previous = alignments
    return np.stack(out, 1)


def test_the_prior_is_the_beta_binomial_pmf():
    expected = beta_binomial(11, 0.1, 0.9)
    # the paper's prior, by hand: P(0) = prod_{i<10} (0.9 + i) / (1 + i)
    assert expected[0] == pytest.approx(0.7400228969, abs=1e-10)
    assert expected[10] == pytest.approx(0.0131728355, abs=1e-10)
    np.testing.assert_allclose(expected.sum(), 1.0, atol=1e-12)
    np.testing.assert_allclose(dca.beta_binomial_pmf(11, 0.1, 0.9), expected, rtol=1e-12)
    np.testing.assert_allclose(
        mechanisms.DynamicConvolutionAttention(4).prior, expected, rtol=1e-12
    )
    np.testing.assert_allclose(dca.beta_binomial_pmf(5, 2.0, 3.5), beta_binomial(5, 2.0, 3.5))
    assert dca.beta_binomial_pmf(1, 0.1, 0.9) == pytest.approx((1.0,))


@pytest.mark.parametrize(
    "prior",
    [
        {},
        {"prior_length": 4, "prior_alpha": 1.5, "prior_beta": 0.5},
        {"dynamic_kernel_size": 5},  # the widths agree: one gather serves both filter banks
    ],
    ids=["paper", "short", "equal_widths"],
)
def test_matches_numpy_over_several_steps_with_padding(prior):
    layer = built(**prior)
    q = queries()
    got = run(layer, q)
    pmf = beta_binomial(layer.prior_length, layer.prior_alpha, layer.prior_beta)
    expected = reference(layer, q, MASK, pmf)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)
    assert got.dtype == np.float32
    assert np.all(got[~np.broadcast_to(MASK[:, None], got.shape)] == 0.0)
    assert np.abs(expected).max() > 0.1  # the comparison is not of zeros
    # the state matters: the last step from a fresh state differs
    fresh = run(layer, q[:, -1:])
    assert not np.allclose(fresh[:, 0], got[:, -1], atol=1e-3)
    # the query matters (the dynamic filters): other queries, other alignments
    assert not np.allclose(run(layer, queries(seed=9)), got, atol=1e-3)


def test_the_initial_state_puts_all_mass_on_the_first_position():
    layer = built()
    state = layer.initial_state(ops.zeros((B, S, D_M)), ops.convert_to_tensor(MASK))
    expected = np.zeros((B, S), "float32")
    expected[:, 0] = 1.0
    np.testing.assert_array_equal(to_numpy(state["alignments"]), expected)


def test_with_zeroed_weights_the_first_step_is_the_prior():
    """Zero weights leave `log max(P * a, 1e-6)`: from all mass on position 0 the first
    alignments are the pmf itself, then the floor's share beyond its reach."""
    length = 16
    got = run(zeroed(length), queries(steps=1), length=length, mask=None)[:, 0]
    prior = np.concatenate([beta_binomial(11, 0.1, 0.9), np.full(length - 11, 1e-6)])
    np.testing.assert_allclose(got, np.broadcast_to(prior / prior.sum(), got.shape), atol=1e-7)


@given(st.integers(0, 2**16))
def test_properties(seed):
    layer = built(seed=seed, scale=1.5)
    got = run(layer, queries(seed, steps=5))
    assert np.all(np.isfinite(got)) and np.all(got >= 0.0)
    assert np.all(got[~np.broadcast_to(MASK[:, None], got.shape)] == 0.0)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)


@given(st.integers(0, 2**16))
def test_with_zeroed_weights_the_alignments_only_move_forward(seed):
    """The prior is causal: only it acts when the learned weights are zero, so no mass moves
    back. The cumulative alignments never grow (first-order stochastic dominance) but for
    the floor's share (1e-6 a position), from any previous alignments whose mass the prior
    cannot push past the memory's end."""
    length, reach = 48, 24
    rng = np.random.default_rng(seed)
    previous = rng.random((2, length)) * (rng.random((2, length)) < 0.3)
    previous[:, reach:] = 0.0
    previous[:, rng.integers(0, reach)] += 0.1  # never all zero
    previous /= previous.sum(-1, keepdims=True)
    layer = zeroed(length)
    got = run(layer, queries(seed, steps=2, batch=2), length=length, mask=None, previous=previous)
    for before, after in ((previous, got[:, 0]), (got[:, 0], got[:, 1])):
        assert np.all(np.cumsum(after, -1) <= np.cumsum(before, -1) + 1e-4)
        positions = np.arange(length)
        assert np.all(after @ positions > before @ positions)  # and it does move


def test_mixed_precision_keeps_float32_alignments_close_to_float32():
    expected = run(built(), queries())
    keras.config.set_dtype_policy("mixed_float16")
    got = run(built(), queries())
    assert got.dtype == np.float32
    assert np.all(got[~np.broadcast_to(MASK[:, None], got.shape)] == 0.0)
    np.testing.assert_allclose(got, expected, atol=2e-2)


def test_config_round_trip_and_get_by_name():
    layer = mechanisms.get("dca", units=4, static_filters=2, dynamic_kernel_size=5, prior_beta=2)
    assert isinstance(layer, mechanisms.DynamicConvolutionAttention)
    clone = assert_config_round_trip(layer)
    assert (clone.units, clone.static_filters, clone.dynamic_kernel_size, clone.prior_beta) == (
        4,
        2,
        5,
        2.0,
    )
    default = mechanisms.DynamicConvolutionAttention(4)
    assert (
        default.static_filters,
        default.static_kernel_size,
        default.dynamic_filters,
        default.dynamic_kernel_size,
        default.prior_length,
        default.prior_alpha,
        default.prior_beta,
    ) == (8, 21, 8, 21, 11, 0.1, 0.9)


@pytest.mark.parametrize(
    "arguments, match",
    [
        ({"units": 0}, r"units must be a positive integer. Received: units=0"),
        ({"static_filters": 0}, r"static_filters must be a positive integer. Received: "),
        ({"dynamic_filters": 1.0}, r"dynamic_filters must be .*Received: dynamic_filters=1.0"),
        (
            {"static_kernel_size": 4},
            r"static_kernel_size must be odd .*Received: static_kernel_size=4",
        ),
        ({"dynamic_kernel_size": 0}, r"dynamic_kernel_size must .*Received: dynamic_kernel_size=0"),
        (
            {"dynamic_kernel_size": True},
            r"dynamic_kernel_size .*Received: dynamic_kernel_size=True",
        ),
        ({"prior_length": 0}, r"prior_length must be a positive integer. Received: prior_length=0"),
        (
            {"prior_alpha": 0.0},
            r"prior_alpha must be a finite number > 0. Received: prior_alpha=0.0",
        ),
        ({"prior_alpha": float("nan")}, r"prior_alpha must .*Received: prior_alpha=nan"),
        ({"prior_beta": -1}, r"prior_beta must be .*Received: prior_beta=-1"),
        ({"prior_beta": "0.9"}, r"prior_beta must be .*Received: prior_beta='0.9'"),
        ({"normalizer": "sparsemax"}, r"no normalizer.*Received: normalizer='sparsemax'"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(arguments, match):
    with pytest.raises(ValueError, match=match):
        mechanisms.DynamicConvolutionAttention(**{"units": 4, **arguments})
