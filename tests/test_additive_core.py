"""The additive (Bahdanau) core `v . tanh(q W_q + k W_k [+ b] [+ feature])` is written once,
in `scores`: the mechanisms that add a feature inside its tanh are `Additive` when that
feature is zero, and every layer with the core goes through `scores.additive_energy`."""

import numpy as np
import pytest
from helpers import to_numpy
from keras import ops

from keras_attn_rnn import scores
from keras_attn_rnn.mechanisms import (
    ContentAttention,
    CoverageAttention,
    LocalPredictiveAttention,
    LocationSensitiveAttention,
)

pytestmark = pytest.mark.layers

B, S, D_Q, D_M, UNITS = 3, 6, 4, 5, 7
MASK = np.arange(S)[None, :] < np.array([[6], [1], [4]])


def first_step(mechanism, seed=0):
    """The alignments `(B, S)` of a built mechanism's first step."""
    rng = np.random.default_rng(seed)
    query = ops.convert_to_tensor(rng.normal(size=(B, D_Q)).astype("float32"))
    memory = ops.convert_to_tensor(rng.normal(size=(B, S, D_M)).astype("float32"))
    mask = ops.convert_to_tensor(MASK)
    keys = mechanism.prepare_keys(memory)
    state = mechanism.initial_state(keys, mask)
    alignments, _ = mechanism.call(query, keys, memory, mask, state)
    return to_numpy(alignments)


def built(mechanism, seed=1):
    mechanism.build((None, D_Q), (None, S, D_M))
    rng = np.random.default_rng(seed)
    for w in mechanism.weights:
        w.assign(rng.normal(0.0, 0.6, w.shape).astype("float32"))
    return mechanism


def additive_with_the_weights_of(mechanism):
    """`ContentAttention` whose `Additive` score has `mechanism`'s `query_kernel`,
    `key_kernel`, `v` and (with a bias: normalized, `g = ||v||`, so `g v / ||v|| = v`) `b`."""
    use_bias = mechanism.use_bias
    content = ContentAttention(scores.Additive(UNITS, normalize=use_bias))
    content.build((None, D_Q), (None, S, D_M))
    score = content.score_layer
    for name in ("query_kernel", "key_kernel", "v") + (("b",) if use_bias else ()):
        getattr(score, name).assign(getattr(mechanism, name))
    if use_bias:
        score.g.assign(np.sqrt(np.sum(np.square(to_numpy(mechanism.v)))))
    return content


@pytest.mark.parametrize("use_bias", [False, True])
def test_coverage_with_no_coverage_yet_is_additive_attention(use_bias):
    coverage = built(CoverageAttention(UNITS, use_bias=use_bias))
    expected = first_step(additive_with_the_weights_of(coverage))
    np.testing.assert_allclose(first_step(coverage), expected, atol=1e-6)
    # the coverage term counts: with coverage, the same weights attend otherwise
    rng = np.random.default_rng(2)
    keys = coverage.prepare_keys(ops.convert_to_tensor(rng.normal(size=(B, S, D_M)), "float32"))
    state = {"coverage": ops.convert_to_tensor(rng.uniform(size=(B, S)), "float32")}
    query = ops.convert_to_tensor(rng.normal(size=(B, D_Q)), "float32")
    covered, _ = coverage.call(query, keys, None, None, state)
    plain, _ = coverage.call(query, keys, None, None, coverage.initial_state(keys, None))
    assert np.abs(to_numpy(covered) - to_numpy(plain)).max() > 1e-3


@pytest.mark.parametrize("use_bias", [False, True])
def test_location_with_a_zero_projection_is_additive_attention(use_bias):
    location = built(LocationSensitiveAttention(UNITS, filters=3, kernel_size=3, use_bias=use_bias))
    expected = first_step(additive_with_the_weights_of(location))
    location.location_projection.assign(np.zeros(location.location_projection.shape))
    # zero initial alignments and a zero projection: no location term either way
    np.testing.assert_allclose(first_step(location), expected, atol=1e-6)


def test_every_layer_with_the_core_computes_it_in_scores(monkeypatch):
    """A layer that writes its own `tanh` core instead of calling `scores`' fails here
    (`additive_energy`, or `step_energy`: the decoder step's, its gradient written out)."""
    calls = []

    def spy(core, leading):
        def call(v, *terms):
            calls.append(len(terms) - leading)  # the terms besides a step's query
            return core(v, *terms)

        return call

    monkeypatch.setattr(scores, "additive_energy", spy(scores.additive_energy, 0))
    monkeypatch.setattr(scores, "step_energy", spy(scores.step_energy, 1))
    layers = {
        "additive": ContentAttention(scores.Additive(UNITS)),
        "coverage": CoverageAttention(UNITS),
        "location": LocationSensitiveAttention(UNITS, filters=3, kernel_size=3),
        "local_p": LocalPredictiveAttention("general", window=2),  # its position predictor
    }
    for name, layer in layers.items():
        calls.clear()
        first_step(built(layer))
        assert calls, f"{name} did not compute the additive core with scores.additive_energy"
    assert calls == [1]  # local-p's predictor: `v_p . tanh(W_p q)`, one term
