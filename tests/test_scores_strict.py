"""Strict checks of the score layers' initial weights: what a freshly built score computes.

A score's documented initial values (`scale` of one, a zero `bias`) make its first
output the plain formula; Keras' default initializer (`glorot_uniform`) would not.
"""

import keras
import numpy as np
import pytest
from helpers import to_numpy

from keras_attn_rnn import scores

pytestmark = pytest.mark.layers

RNG = np.random.default_rng(0)
QUERY = RNG.normal(size=(2, 3, 4)).astype("float32")
KEYS = RNG.normal(size=(2, 5, 4)).astype("float32")


def test_scaled_dot_scale_starts_at_one():
    layer = scores.ScaledDot(use_scale=True)
    got = to_numpy(layer(QUERY, KEYS))
    np.testing.assert_allclose(to_numpy(layer.scale), 1.0)
    expected = np.einsum("bqd,bkd->bqk", QUERY, KEYS) / np.sqrt(4.0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_tanh_dot_bias_starts_at_zero():
    layer = scores.TanhDot()
    got = to_numpy(layer(QUERY, KEYS))
    np.testing.assert_allclose(to_numpy(layer.bias), np.zeros(4))
    hidden = np.tanh(KEYS @ to_numpy(layer.kernel))
    expected = np.einsum("bqd,bkd->bqk", QUERY, hidden)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


class _Unregistered(scores.Dot):
    """A score no registry knows: `name_of` calls it by its class name."""


def test_name_of_an_unregistered_score_is_its_class_name():
    assert scores.name_of(_Unregistered()) == "_Unregistered"
    assert scores.name_of({"class_name": "_Unregistered", "config": {}}) == "_Unregistered"
    assert scores.name_of({"class_name": "Additive", "config": {}}) == "additive"
    assert scores.name_of(scores.Additive()) == "additive"


def test_an_unregistered_score_is_named_in_its_query_size_error():
    with pytest.raises(ValueError, match="score='_Unregistered' needs the query size"):
        _Unregistered().build((2, 3, 4), (2, 5, 6))


@pytest.mark.parametrize("dtype", ["mixed_float16", "float64"])
def test_role_named_gives_the_owner_dtype_policy(dtype):
    from keras_attn_rnn.mechanisms import ContentAttention

    layer = scores.role_named("additive", units=3, dtype=dtype)
    assert (layer.name, layer.units, layer.dtype_policy.name) == ("score", 3, dtype)
    template = scores.role_named(scores.General(use_scale=True, name="mine"), dtype=dtype)
    assert (template.name, template.use_scale, template.dtype_policy.name) == (
        "score",
        True,
        dtype,
    )
    owned = ContentAttention("tanh_dot", dtype=dtype).score_layer
    assert owned.dtype_policy.name == dtype


@pytest.mark.parametrize("name", ["scaled_dot", "general", "tanh_dot", "additive"])
def test_a_mixed_precision_score_computes_in_its_compute_dtype(name):
    kwargs = {"use_scale": True} if name in ("scaled_dot", "general") else {}
    layer = scores.get(name, dtype="mixed_float16", **kwargs)
    got = layer(QUERY, KEYS)
    assert layer.variable_dtype == "float32"
    assert keras.backend.standardize_dtype(got.dtype) == "float16"


@pytest.mark.parametrize("name", ["dot", "scaled_dot"])
def test_a_built_score_shared_again_checks_the_query_size(name):
    layer = scores.get(name)
    layer.build((2, 3, 4), (2, 5, 4))
    layer.build_for((None, 1, 4), (2, 7, 4))  # same sizes: shared as is
    with pytest.raises(ValueError, match=f"score='{name}' needs the query size to equal 4"):
        layer.build_for((None, 1, 3), (2, 7, 4))


@pytest.mark.parametrize(
    ("query_size", "key_size", "kernel"), [(3, 6, "query_kernel"), (4, 5, "key_kernel")]
)
def test_a_built_additive_score_shared_again_checks_its_kernels(query_size, key_size, kernel):
    layer = scores.Additive(units=2)
    layer.build((2, 3, 4), (2, 5, 6))
    layer.build_for((None, 1, 4), (2, 7, 6))  # same sizes: shared as is
    with pytest.raises(ValueError, match=f"was built for other shapes: its {kernel}"):
        layer.build_for((None, 1, query_size), (2, 7, key_size))
