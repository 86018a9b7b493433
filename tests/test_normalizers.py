"""The normalizers (softmax, hardmax, sparsemax, entmax-1.5): NumPy references,
distribution properties under masks, and gradients against finite differences."""

import keras
import numpy as np
import pytest
from helpers import gradient, to_numpy
from hypothesis import given
from hypothesis import strategies as st

from keras_attn_rnn import AttentionPooling, SequenceAttention, masking, normalizers

pytestmark = pytest.mark.layers


def sparsemax_reference(z):
    """Martins & Astudillo (2016), Algorithm 1, in float64."""
    z = np.asarray(z, "float64")
    ordered = np.sort(z)[::-1]
    k = np.arange(1, len(z) + 1)
    cumulative = np.cumsum(ordered)
    support = k[1 + k * ordered > cumulative].max()
    return np.maximum(z - (cumulative[support - 1] - 1) / support, 0.0)


def entmax15_reference(z, iterations=100):
    """1.5-entmax by bisection on the threshold: sum max(z/2 - tau, 0)^2 = 1 (float64)."""
    z = np.asarray(z, "float64") / 2
    low, high = z.max() - 1.0, z.max()
    for _ in range(iterations):
        tau = (low + high) / 2
        if (np.maximum(z - tau, 0) ** 2).sum() > 1:
            low = tau
        else:
            high = tau
    return np.maximum(z - (low + high) / 2, 0) ** 2


REFERENCES = {
    "softmax": lambda z: np.exp(z - z.max()) / np.exp(z - z.max()).sum(),
    "hardmax": lambda z: np.eye(len(z))[np.argmax(z)],
    "sparsemax": sparsemax_reference,
    "entmax15": entmax15_reference,
}


def test_names_come_from_the_registry():
    assert set(REFERENCES) <= set(normalizers.names())  # each reference checks a registered one
    with pytest.raises(ValueError, match=r"normalizer must be one of .*") as err:
        normalizers.get("sparse")
    assert all(repr(name) in str(err.value) for name in normalizers.names())


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_matches_the_numpy_reference(name):
    z = np.random.default_rng(3).normal(scale=2.0, size=(6, 9)).astype("float32")
    z[0, 2] = z[0, 5]  # a tie: hardmax takes the first maximum
    got = to_numpy(normalizers.get(name)(keras.ops.convert_to_tensor(z)))
    expected = np.stack([REFERENCES[name](row) for row in z.astype("float64")])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    if name in ("sparsemax", "entmax15"):
        assert np.any(got == 0.0)  # sparse: exact zeros


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_the_normalizer_axis_argument(name):
    z = np.random.default_rng(4).normal(size=(3, 5, 4)).astype("float32")
    fn = normalizers.get(name)
    along_1 = to_numpy(fn(keras.ops.convert_to_tensor(z), axis=1))
    last = to_numpy(fn(keras.ops.convert_to_tensor(np.swapaxes(z, 1, 2))))
    np.testing.assert_allclose(along_1, np.swapaxes(last, 1, 2), atol=1e-6)


@given(
    st.sampled_from(sorted(REFERENCES)),
    st.sampled_from([1, 2, 6]),
    st.integers(0, 2**16),
    st.floats(0.0, 1.0),
    st.sampled_from([1.0, 100.0, 1e4]),
)
def test_masked_weights_are_a_distribution_with_exact_zeros(name, length, seed, keep, scale):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(4, length)) * scale).astype("float32")
    mask = rng.random((4, length)) < keep
    mask[0] = False  # a row with every key masked
    weights = to_numpy(masking.masked_softmax(z, mask, normalizer=normalizers.get(name)))
    assert weights.dtype == np.float32 and np.all(np.isfinite(weights))
    assert np.all(weights >= 0) and np.all(weights[~mask] == 0.0)
    rows = mask.any(-1)
    np.testing.assert_allclose(weights[rows].sum(-1), 1.0, atol=1e-5)
    assert np.all(weights[~rows] == 0.0)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15", "softmax"])
def test_gradients_match_finite_differences(name):
    fn = normalizers.get(name)
    # float32 (JAX computes in float32 by default): central differences with a step of
    # 1e-3 are exact for sparsemax (piecewise linear) and within ~1e-4 for the others.
    z = np.random.default_rng(5).normal(size=(3, 6)).astype("float32")
    analytic, w = gradient(fn, z)
    numeric = np.zeros_like(z)
    eps = 1e-3
    for index in np.ndindex(z.shape):
        up, down = z.copy(), z.copy()
        up[index] += eps
        down[index] -= eps
        numeric[index] = (
            np.sum(to_numpy(fn(keras.ops.convert_to_tensor(up))) * w)
            - np.sum(to_numpy(fn(keras.ops.convert_to_tensor(down))) * w)
        ) / (2 * eps)
    assert np.all(np.isfinite(analytic))
    np.testing.assert_allclose(analytic, numeric, atol=2e-3)
    assert np.any(analytic != 0)


def test_entmax15_gradient_is_finite_where_a_threshold_discriminant_is_zero():
    """z = s / 2 = [1, 1, 0, 0]: for k = 4, 1 - k (mean of squares - mean^2) is exactly 0, where
    sqrt has an infinite derivative; that branch must not reach the gradient (0 * inf = NaN)."""
    analytic, _ = gradient(normalizers.entmax15, np.array([[2.0, 2.0, 0.0, 0.0]], "float32"))
    assert np.all(np.isfinite(analytic))


@pytest.mark.parametrize("name", ["hardmax", "sparsemax", "entmax15"])
def test_every_layer_takes_a_normalizer_by_name(name):
    x = np.random.default_rng(6).normal(size=(2, 5, 4)).astype("float32")
    mask = np.array([[True] * 5, [True, True, False, False, False]])
    _, pooled = AttentionPooling(normalizer=name)(x, mask=mask, return_attention_scores=True)
    _, seq = SequenceAttention(normalizer=name)(
        [x, x], mask=[mask, mask], return_attention_scores=True
    )
    for weights in (to_numpy(pooled), to_numpy(seq)):
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(to_numpy(pooled)[1, 2:] == 0) and np.all(to_numpy(seq)[1, :, 2:] == 0)
    layer = SequenceAttention(normalizer=name)
    assert SequenceAttention.from_config(layer.get_config()).normalizer == name


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_half_precision_scores_give_half_precision_weights(name):
    """Under mixed precision the scores are float16: the weights keep that dtype (no silent
    float32 from an op whose dtype was left to the default) and stay a distribution."""
    z = np.random.default_rng(8).normal(size=(3, 7)).astype("float16")
    weights = normalizers.get(name)(keras.ops.convert_to_tensor(z))
    assert keras.backend.standardize_dtype(weights.dtype) == "float16"
    expected = np.stack([REFERENCES[name](row) for row in z.astype("float64")])
    np.testing.assert_allclose(to_numpy(weights).astype("float64"), expected, atol=3e-3)


@keras.saving.register_keras_serializable(package="test_normalizers")
def halved_softmax(scores, axis=-1):
    return keras.ops.softmax(scores / 2.0, axis=axis)


def test_a_registered_function_is_a_normalizer_that_round_trips():
    assert normalizers.get(halved_softmax) is halved_softmax
    config = normalizers.serialize(halved_softmax)
    assert isinstance(config, dict)
    assert normalizers.get(config) is halved_softmax
    assert normalizers.serialize("sparsemax") == "sparsemax"
    layer = SequenceAttention(normalizer=halved_softmax)
    clone = SequenceAttention.from_config(layer.get_config())
    x = np.random.default_rng(9).normal(size=(2, 3, 4)).astype("float32")
    np.testing.assert_allclose(to_numpy(clone([x, x])), to_numpy(layer([x, x])), atol=1e-6)
