"""`scores.step_energy`, the additive core of a decoder step, and its written-out gradient.

Its value is `additive_energy`'s; its gradient (which recomputes the `tanh` instead of
keeping it) is checked against the NumPy derivative of `v . tanh(q + k + f)` with
respect to each input, on every backend. On TensorFlow `step_energy` leaves the gradient
to autodiff (a graph-mode custom gradient would outlive its graph), so the written one,
`_step_energy`, is checked there on its own as well.
"""

import numpy as np
import pytest
from helpers import gradient, to_numpy
from keras import ops

from keras_attn_rnn import scores

pytestmark = pytest.mark.layers

RNG = np.random.default_rng(0)
B, S, U, D = 2, 5, 4, 3
V = RNG.normal(size=(U,)).astype("float32")
QUERY = RNG.normal(size=(B, U)).astype("float32")
KEYS = RNG.normal(size=(B, S, U)).astype("float32")
FEATURE = RNG.normal(size=(B, S, U)).astype("float32")
RAW_QUERY = RNG.normal(size=(B, D)).astype("float32")
KERNEL = RNG.normal(size=(D, U)).astype("float32")


def _args(position, value):
    args = [V, QUERY, KEYS, FEATURE]
    args[position] = value
    return args


def _reference(w):
    """`t` and `G = d energy / d hidden` for the upstream gradient `w (B, S)`."""
    t = np.tanh(QUERY[:, None] + KEYS + FEATURE)
    return t, w[..., None] * V * (1.0 - t**2)


def _written(*args):
    return scores._step_energy(*(ops.convert_to_tensor(x) for x in args))


FORMS = pytest.mark.parametrize("form", [scores.step_energy, _written], ids=["public", "written"])


@FORMS
def test_its_value_is_the_additive_energy(form):
    got = to_numpy(form(V, QUERY, KEYS, FEATURE))
    expected = np.sum(np.tanh(QUERY[:, None] + KEYS + FEATURE) * V, axis=-1)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    plain = scores.additive_energy(V, QUERY[:, None], KEYS, FEATURE)
    np.testing.assert_allclose(got, to_numpy(plain), rtol=1e-6, atol=1e-6)


@FORMS
@pytest.mark.parametrize("position, name", [(0, "v"), (1, "query"), (2, "keys"), (3, "feature")])
def test_its_gradient_is_the_derivative_of_the_formula(form, position, name):
    inputs = [V, QUERY, KEYS, FEATURE]
    grad, w = gradient(lambda x: form(*_args(position, x)), inputs[position])
    t, g = _reference(w)
    expected = {
        "v": np.sum(w[..., None] * t, axis=(0, 1)),
        "query": g.sum(axis=1),
        "keys": g,
        "feature": g,
    }[name]
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-5)


def test_a_step_projects_the_query_then_scores_it():
    def step(raw_query):
        return scores.additive_step(raw_query, KERNEL, KEYS, V, FEATURE)

    value = to_numpy(step(RAW_QUERY))
    projected = RAW_QUERY @ KERNEL
    t = np.tanh(projected[:, None] + KEYS + FEATURE)
    np.testing.assert_allclose(value, np.sum(t * V, axis=-1), rtol=1e-5, atol=1e-6)
    grad, w = gradient(step, RAW_QUERY)
    expected = (w[..., None] * V * (1.0 - t**2)).sum(axis=1) @ KERNEL.T
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-5)
