"""GMM attention: a NumPy reference from the layer's own weights (both versions, both
directions, several steps, a padded mask), its properties (non-negative, at most 1 for v2b,
means that never move back (forward) or forward (backward), exact zeros on padding), its
initial biases and its argument errors."""

import math

import numpy as np
import pytest
from helpers import assert_config_round_trip, to_numpy
from hypothesis import given
from hypothesis import strategies as st
from keras import ops

from keras_attn_rnn import mechanisms
from keras_attn_rnn.mechanisms import gmm_attention

pytestmark = pytest.mark.layers

B, T, S, D_Q, D_M, UNITS, K = 3, 4, 7, 5, 3, 6, 3
ATOL = 1e-5
MASK = np.arange(S)[None, :] < np.array([[7], [2], [5]])
FLOOR = gmm_attention.WIDTH_FLOOR


def built(seed=1, scale=0.6, **arguments):
    layer = mechanisms.GMMAttention(UNITS, num_mixtures=K, **arguments)
    layer.build((None, D_Q), (None, S, D_M))
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0.0, scale, w.shape).astype("float32"))
    return layer


def queries(seed=0, steps=T):
    return np.random.default_rng(seed).normal(size=(B, steps, D_Q)).astype("float32")


def run(layer, queries, length=S, mask=MASK):
    """Alignments `(B, T, S)` and the means `(B, T, K)` after each step."""
    memory = ops.zeros((queries.shape[0], length, D_M))
    keys = layer.prepare_keys(memory)
    mask = None if mask is None else ops.convert_to_tensor(mask)
    state = layer.initial_state(keys, mask)
    alignments, means = [], []
    for t in range(queries.shape[1]):
        weights, state = layer.call(ops.convert_to_tensor(queries[:, t]), keys, memory, mask, state)
        alignments.append(to_numpy(weights))
        means.append(to_numpy(state["means"]))
    return np.stack(alignments, 1), np.stack(means, 1)


def softplus(x):
    return np.logaddexp(0.0, x)


def phi(x):
    return 0.5 * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2.0)))


def reference(layer, queries, mask, version, direction="forward"):
    """float64 loops over the steps, from the layer's weights."""
    w = {v.path.split("/")[-1]: to_numpy(v).astype("float64") for v in layer.weights}
    positions = np.arange(S, dtype="float64")
    if direction == "forward":
        means = np.zeros((B, K))
    else:  # from each row's last unmasked position, moving back
        last = np.array([np.flatnonzero(row).max() for row in mask], dtype="float64")
        means = np.repeat(last[:, None], K, axis=1)
    sign = 1.0 if direction == "forward" else -1.0
    out = []
    for t in range(queries.shape[1]):
        hidden = np.tanh(queries[:, t] @ w["query_kernel"] + w["query_bias"])
        raw = hidden @ w["mixture_kernel"] + w["mixture_bias"]
        logits, step, width = raw[:, :K], raw[:, K : 2 * K], raw[:, 2 * K :]
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        means = means + sign * softplus(step)
        sigma = softplus(width) + FLOOR
        alignments = np.zeros((B, S))
        for b in range(B):
            for k in range(K):
                mu, s = means[b, k], sigma[b, k]
                if version == "v2":
                    density = np.exp(-((positions - mu) ** 2) / (2 * s**2))
                else:
                    density = phi((positions + 0.5 - mu) / s) - phi((positions - 0.5 - mu) / s)
                alignments[b] += weights[b, k] * density
        out.append(np.where(mask, alignments, 0.0))
    return np.stack(out, 1)


@pytest.mark.parametrize("direction", gmm_attention.DIRECTIONS)
@pytest.mark.parametrize("version", gmm_attention.VERSIONS)
def test_matches_numpy_over_several_steps_with_padding(version, direction):
    # a scale that moves the means by a few positions in T steps and keeps the widths
    # near 1: the alignments are not all close to 0
    layer = built(version=version, scale=0.8, direction=direction)
    q = queries()
    got, _ = run(layer, q)
    expected = reference(layer, q, MASK, version, direction)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)
    assert got.dtype == np.float32
    assert np.all(got[~np.broadcast_to(MASK[:, None], got.shape)] == 0.0)
    assert np.abs(expected).max() > 0.1  # the comparison is not of zeros
    # the state matters: the last step from a fresh state differs
    fresh, _ = run(layer, q[:, -1:])
    assert not np.allclose(fresh[:, 0], got[:, -1], atol=1e-3)


def test_the_versions_differ():
    v2 = built(version="v2")
    v2b = built(version="v2b")
    q = queries(1)
    assert not np.allclose(run(v2, q)[0], run(v2b, q)[0], atol=1e-3)


def test_initial_biases_step_one_position_with_width_one():
    """With zero kernels the MLP's output is its bias: `D = initial_step`, `sigma =
    initial_width`, equal weights, so the means after `t` steps are `t * initial_step`."""
    for initial_step, initial_width in ((1.0, 1.0), (2.5, 0.5)):
        layer = mechanisms.GMMAttention(
            UNITS,
            num_mixtures=K,
            version="v2",
            initial_step=initial_step,
            initial_width=initial_width,
        )
        layer.build((None, D_Q), (None, S, D_M))
        for kernel in (layer.query_kernel, layer.mixture_kernel):
            kernel.assign(np.zeros(kernel.shape, "float32"))
        got, means = run(layer, queries(), mask=None)
        steps = np.arange(1, T + 1)[None, :, None] * initial_step
        np.testing.assert_allclose(means, np.broadcast_to(steps, means.shape), rtol=1e-5)
        positions = np.arange(S)[None, None, :]
        expected = np.exp(-((positions - steps) ** 2) / (2 * initial_width**2))
        np.testing.assert_allclose(got, np.broadcast_to(expected, got.shape), atol=ATOL)
    default = mechanisms.GMMAttention(4)
    default.build((None, D_Q), (None, S, D_M))
    bias = to_numpy(default.mixture_bias).astype("float64")
    np.testing.assert_allclose(bias[:5], 0.0)
    np.testing.assert_allclose(softplus(bias[5:10]), 1.0, rtol=1e-6)
    np.testing.assert_allclose(softplus(bias[10:]) + FLOOR, 1.0, rtol=1e-6)


@given(
    st.sampled_from(gmm_attention.VERSIONS),
    st.sampled_from(gmm_attention.DIRECTIONS),
    st.integers(0, 2**16),
)
def test_properties(version, direction, seed):
    layer = built(seed=seed, version=version, scale=1.0, direction=direction)
    got, means = run(layer, queries(seed, steps=5))
    assert np.all(got >= 0.0)
    assert np.all(got[~np.broadcast_to(MASK[:, None], got.shape)] == 0.0)
    last = (MASK.sum(1) - 1)[:, None, None]  # right padding: the last unmasked position
    if direction == "forward":
        assert np.all(np.diff(means, axis=1) >= 0.0)  # the means never move back
        assert np.all(means > 0.0)
    else:
        assert np.all(np.diff(means, axis=1) <= 0.0)  # nor forward, going backward
        assert np.all(means < last)
    if version == "v2b":
        assert np.all(got.sum(-1) <= 1 + 1e-6), got.sum(-1)


def test_v2b_sums_to_one_when_the_means_are_well_inside_a_long_memory():
    length = 200
    layer = mechanisms.GMMAttention(UNITS, num_mixtures=K, initial_step=12.0, initial_width=2.0)
    layer.build((None, D_Q), (None, length, D_M))
    rng = np.random.default_rng(3)
    for kernel in (layer.query_kernel, layer.mixture_kernel):
        kernel.assign(rng.normal(0.0, 0.1, kernel.shape).astype("float32"))
    got, means = run(layer, queries(4, steps=6), length=length, mask=None)
    assert np.all((means > 10) & (means < length - 20)), means  # 5 widths from either end
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)


def test_v2_omits_battenbergs_normalising_factor_and_says_so():
    """`version="v2"` sums to about `sqrt(2 pi) sigma` for one wide component well inside
    the memory: Battenberg et al.'s GMMv2 divides by `Z = sqrt(2 pi sigma^2)`, this one
    does not, and its docstring must say so (issue 40)."""
    length, width = 200, 4.0
    layer = mechanisms.GMMAttention(
        UNITS, num_mixtures=1, version="v2", initial_step=40.0, initial_width=width
    )
    layer.build((None, D_Q), (None, length, D_M))
    for kernel in (layer.query_kernel, layer.mixture_kernel):
        kernel.assign(np.zeros(kernel.shape, "float32"))  # the biases alone: sigma = width
    got, means = run(layer, queries(5, steps=2), length=length, mask=None)
    assert np.all((means > 30) & (means < 120))
    np.testing.assert_allclose(got.sum(-1), math.sqrt(2 * math.pi) * width, rtol=1e-4)
    doc = " ".join(mechanisms.GMMAttention.__doc__.split())
    assert "divides each Gaussian by `Z = sqrt(2 pi sigma_k^2)`; this version omits" in doc


def test_config_round_trip_and_get_by_name():
    layer = mechanisms.get("gmm", units=4, num_mixtures=2, version="v2", initial_step=0.5)
    assert isinstance(layer, mechanisms.GMMAttention)
    clone = assert_config_round_trip(layer)
    assert (clone.units, clone.num_mixtures, clone.version, clone.initial_step) == (
        4,
        2,
        "v2",
        0.5,
    )
    assert assert_config_round_trip(mechanisms.GMMAttention(4, direction="backward")).direction == (
        "backward"
    )
    assert mechanisms.GMMAttention(4).version == "v2b"
    assert mechanisms.GMMAttention(4).direction == "forward"
    assert mechanisms.GMMAttention(4).num_mixtures == 5


@pytest.mark.parametrize(
    "arguments, match",
    [
        ({"units": 0}, r"units must be a positive integer. Received: units=0"),
        ({"num_mixtures": 0}, r"num_mixtures must be a positive integer. Received: num_mixtures=0"),
        ({"num_mixtures": 2.0}, r"num_mixtures must be .*Received: num_mixtures=2.0"),
        ({"num_mixtures": True}, r"num_mixtures must be .*Received: num_mixtures=True"),
        (
            {"version": "v1"},
            r"version must be one of 'v2', 'v2b'. Received: version='v1'",
        ),
        ({"initial_step": 0.0}, r"initial_step must be a finite number > 0.0. Received: "),
        ({"initial_step": -1}, r"initial_step must be .*Received: initial_step=-1"),
        ({"initial_step": float("nan")}, r"initial_step must be .*Received: initial_step=nan"),
        ({"initial_step": "1"}, r"initial_step must be .*Received: initial_step='1'"),
        ({"initial_width": 0.01}, r"initial_width must be a finite number > 0.01. Received: "),
        ({"initial_width": float("inf")}, r"initial_width must .*Received: initial_width=inf"),
        ({"normalizer": "sparsemax"}, r"no normalizer.*Received: normalizer='sparsemax'"),
        (
            {"direction": "left"},
            r"direction must be one of 'forward', 'backward'. Received: direction='left'",
        ),
    ],
)
def test_bad_arguments_raise_naming_the_argument(arguments, match):
    with pytest.raises(ValueError, match=match):
        mechanisms.GMMAttention(**{"units": 4, **arguments})
