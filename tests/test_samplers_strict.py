"""Strict checks of the samplers: the law of their draws, their shapes, bounds and errors.

The draws are checked on one call over `N` identical rows (N independent draws with
one fixed seed), against the exact probabilities, with a tolerance of about 5 standard
deviations: deterministic for a backend, and far from the laws a wrong sign of the
Gumbel noise gives (`argmax(logits - noise)` is not `softmax(logits)` beyond 2 tokens).
"""

import json

import keras
import numpy as np
import pytest
from fake_models import StepTableModel, TableModel, V, random_table
from helpers import to_numpy
from keras import ops

from keras_attn_rnn import samplers
from keras_attn_rnn.generation import generate
from keras_attn_rnn.samplers.sampler import IMPOSSIBLE

pytestmark = pytest.mark.layers

N = 2000  # draws per check; the standard deviation of a frequency is at most 0.011
TOLERANCE = 0.05

# One token a nat above five tied ones, one far below them, and the padding id 0.
ROW = np.array([IMPOSSIBLE, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, -3.0], "float32")


def _draw(sampler, row=ROW, rows=N, seed=7):
    """`rows` tokens drawn by `sampler` (one call, as in a generation step) from `row`."""
    logits = ops.convert_to_tensor(np.tile(np.asarray(row, "float32"), (rows, 1)))
    seed = ops.convert_to_tensor(seed, "int32")
    token = sampler.next_token(logits, seed, ops.convert_to_tensor(0, "int32"))
    return to_numpy(token)


def _frequencies(tokens):
    assert tokens.shape == (N,)
    return np.bincount(tokens, minlength=V) / tokens.size


def _softmax(values):
    values = np.asarray(values, "float64")
    e = np.exp(values - values.max())
    return e / e.sum()


def test_random_sampler_draws_follow_the_softmax():
    frequencies = _frequencies(_draw(samplers.RandomSampler()))
    expected = _softmax(np.where(np.arange(V) == 0, -np.inf, ROW))
    assert frequencies[0] == 0
    np.testing.assert_allclose(frequencies, expected, atol=TOLERANCE)


def test_random_sampler_temperature_scales_the_logits():
    frequencies = _frequencies(_draw(samplers.RandomSampler(temperature=0.5)))
    expected = _softmax(np.where(np.arange(V) == 0, -np.inf, ROW / 0.5))
    np.testing.assert_allclose(frequencies, expected, atol=TOLERANCE)


@pytest.mark.parametrize(
    "sampler",
    # k=6: token 1 and the five tied tokens. p=0.99: token 7 has p 0.0064 and the mass
    # before it, 0.9936, is not below p, so it is cut. Never 7 (below them) nor 0.
    [samplers.TopKSampler(k=6), samplers.TopPSampler(p=0.99)],
    ids=["top_k", "top_p"],
)
def test_truncated_draws_follow_the_renormalized_head(sampler):
    frequencies = _frequencies(_draw(sampler))
    expected = np.zeros(V)
    expected[1:7] = _softmax(ROW[1:7])
    assert frequencies[0] == 0 and frequencies[7] == 0
    np.testing.assert_allclose(frequencies, expected, atol=TOLERANCE)


def test_top_p_of_one_samples_the_whole_softmax():
    sampler = samplers.get("top_p", vocabulary_size=V, p=1)
    assert sampler.p == 1.0
    frequencies = _frequencies(_draw(samplers.TopPSampler(p=1.0)))
    expected = _softmax(np.where(np.arange(V) == 0, -np.inf, ROW))
    np.testing.assert_allclose(frequencies, expected, atol=TOLERANCE)


@pytest.mark.parametrize("p", [True, "0.5", None, 0, 1.5])
def test_top_p_needs_a_real_number_in_range(p):
    with pytest.raises(ValueError, match=r"top_p needs p, a float in \(0, 1\]"):
        samplers.TopPSampler(p=p)
    with pytest.raises(ValueError, match=r"top_p needs p, a float in \(0, 1\]"):
        samplers.get("top_p", p=p)


def test_gumbel_noise_is_standard_gumbel():
    noise = to_numpy(samplers.gumbel_noise((N, 4), keras.random.SeedGenerator(3))).reshape(-1)
    assert np.all(np.isfinite(noise))
    # Gumbel(0, 1): mean Euler's gamma (sd 1.28 / sqrt(8000) = 0.014), P(G < 0) = 1/e.
    assert abs(noise.mean() - np.euler_gamma) < 0.08
    assert abs(np.mean(noise < 0) - np.exp(-1.0)) < 0.03


@pytest.mark.parametrize(
    "build",
    [
        samplers.GreedySampler,
        samplers.RandomSampler,
        lambda: samplers.TopKSampler(k=3),
        lambda: samplers.TopPSampler(p=0.9),
        lambda: samplers.TopPSampler(p=1.0),
    ],
    ids=["greedy", "random", "top_k", "top_p", "top_p_1"],
)
def test_a_batch_of_one_row_gets_one_token(build):
    """`get_next_token` returns `(B,)` tokens, also for `B = 1` (not a scalar)."""
    sampler = build()
    token = _draw(sampler, rows=1)
    assert token.shape == (1,) and 1 <= token[0] < V
    raw = sampler.get_next_token(ops.convert_to_tensor(ROW[None]), keras.random.SeedGenerator(1))
    assert tuple(ops.shape(raw)) == (1,)


def test_top_k_of_one_is_greedy():
    table = random_table(5)
    prompts = [[p] for p in range(1, V)] * 4
    greedy = generate(TableModel(table), prompts, 4, sampler=samplers.GreedySampler())
    for seed in (0, 1):
        top1 = generate(TableModel(table), prompts, 4, sampler=samplers.TopKSampler(k=1), seed=seed)
        np.testing.assert_array_equal(top1.tokens, greedy.tokens)
    assert samplers.get("top_k", vocabulary_size=V, k=1).k == 1


def test_top_k_may_be_the_whole_vocabulary():
    sampler = samplers.get("top_k", vocabulary_size=V, k=V)
    assert sampler.k == V
    samplers.TopKSampler.check_arguments({"k": V}, V)
    result = generate(TableModel(random_table(6)), [[1]] * 16, 3, sampler=samplers.TopKSampler(V))
    assert result.tokens.shape == (16, 3)
    assert np.all((result.tokens >= 1) & (result.tokens < V))
    with pytest.raises(ValueError, match=r"\[1, 8\].*Received: k=9"):
        samplers.TopKSampler.check_arguments({"k": V + 1}, V)


def test_default_temperatures_are_one():
    for sampler in (
        samplers.TopPSampler(p=0.5),
        samplers.TopKSampler(k=2),
        samplers.RandomSampler(),
        samplers.GreedySampler(),
    ):
        assert sampler.temperature == 1.0
    assert samplers.TopPSampler(p=0.5).get_config() == {"temperature": 1.0, "p": 0.5}
    assert samplers.TopKSampler(k=2).get_config() == {"temperature": 1.0, "k": 2}


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("top_k", {"k": 0, "temperature": -1.0}),
        ("top_p", {"p": 2.0, "temperature": -1.0}),
    ],
)
def test_the_constructor_reports_the_first_bad_argument_as_get_does(name, kwargs):
    """The temperature is checked first, by name (`get`) and by constructor alike."""
    with pytest.raises(ValueError, match=r"temperature must be >= 0"):
        samplers.get(name, **kwargs)
    with pytest.raises(ValueError, match=r"temperature must be >= 0"):
        samplers.class_for(name)(**kwargs)


class _UnregisteredSampler(samplers.RandomSampler):
    """A user's sampler that is not registered with Keras: found through `custom_objects`."""


def test_deserialize_finds_an_unregistered_sampler_in_custom_objects():
    config = json.loads(json.dumps(samplers.serialize(_UnregisteredSampler(temperature=0.5))))
    restored = samplers.deserialize(
        config, custom_objects={"_UnregisteredSampler": _UnregisteredSampler}
    )
    assert type(restored) is _UnregisteredSampler and restored.temperature == 0.5


def test_deserialize_rejects_a_config_that_is_no_sampler():
    config = keras.saving.serialize_keras_object(keras.layers.Dense(2))
    message = r"config must describe a `?keras_attn_rnn\.samplers\.Sampler`?\. Received: config="
    with pytest.raises(ValueError, match=message):
        samplers.deserialize(config)


def test_a_missing_hook_names_the_class():
    logits = ops.convert_to_tensor(ROW[None])
    with pytest.raises(
        NotImplementedError, match=r"^Sampler must override .*Received: a Sampler without it"
    ):
        samplers.Sampler().get_next_token(logits, 0)

    class HookLess(samplers.Sampler):
        pass

    with pytest.raises(NotImplementedError, match=r"^HookLess must override .*a HookLess"):
        HookLess().get_next_token(logits, 0)


def test_the_default_seed_is_zero():
    """Calling a sampler without a seed draws as with seed 0 (not as with another seed)."""
    model = TableModel(random_table(7, scale=0.5))
    prompts = [[1]] * 32
    sampler = samplers.RandomSampler()
    default = to_numpy(sampler(model, prompts, 1)[0])
    np.testing.assert_array_equal(default, to_numpy(sampler(model, prompts, 1, seed=0)[0]))
    assert np.any(default != to_numpy(sampler(model, prompts, 1, seed=1)[0]))


def test_large_seeds_are_not_rounded():
    """Seeds up to 2**31 - 2 are distinct: 2**24 and 2**24 + 1 (equal in float32) draw apart."""
    model = TableModel(random_table(8, scale=0.5))
    prompts = [[1]] * 32
    a = generate(model, prompts, 3, sampler="sample", seed=2**24)
    b = generate(model, prompts, 3, sampler="sample", seed=2**24 + 1)
    again = generate(model, prompts, 3, sampler="sample", seed=2**24 + 1)
    np.testing.assert_array_equal(again.tokens, b.tokens)
    assert np.any(a.tokens != b.tokens)


def test_start_id_is_the_first_decoder_input():
    """A sequence-to-sequence model's first logits follow `start_id`."""
    table = random_table(9)
    attention = np.full((V, 2), 0.5, "float32")
    model = StepTableModel(table[None, None], attention[None, None])
    for start_id in (2, 5):
        result = generate(model, [[3, 4]], 1, sampler="greedy", start_id=start_id)
        assert result.tokens[0, 0] == 1 + np.argmax(table[start_id, 1:])
    assert np.argmax(table[2, 1:]) != np.argmax(table[5, 1:])


def test_beam_defaults_and_bounds():
    assert samplers.get("beam").get_config() == {
        "num_beams": 4,
        "length_penalty": 1.0,
        "num_beams_returned": 1,
        "coverage_penalty_weight": 0.0,
    }
    # num_beams_returned may reach the default width 4, not beyond.
    assert samplers.get("beam", num_beams_returned=4).num_beams_returned == 4
    with pytest.raises(ValueError, match=r"at most num_beams=4\. Received: num_beams_returned=5"):
        samplers.get("beam", num_beams_returned=5)
    with pytest.raises(ValueError, match=r"at most num_beams=4\. Received: num_beams_returned=5"):
        samplers.BeamSampler(num_beams_returned=5)
    # `check_arguments` (a classmethod) fills in the same defaults as the constructor.
    with pytest.raises(ValueError, match=r"at most num_beams=4\. Received: num_beams_returned=5"):
        samplers.BeamSampler.check_arguments({"num_beams_returned": 5})
    samplers.BeamSampler.check_arguments({"num_beams": 1})
    assert samplers.get("beam", num_beams=1).num_beams_returned == 1
    sampler = samplers.BeamSampler(1, length_penalty=-0.5, num_beams_returned=1)
    assert (sampler.num_beams, sampler.length_penalty) == (1, -0.5)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"num_beams": 0}, "num_beams"),
        ({"num_beams": True}, "num_beams"),
        ({"num_beams": 2.0}, "num_beams"),
        ({"num_beams_returned": 0}, "num_beams_returned"),
        ({"length_penalty": float("nan")}, "length_penalty"),
        ({"length_penalty": "1"}, "length_penalty"),
        ({"length_penalty": True}, "length_penalty"),
        ({"coverage_penalty_weight": float("inf")}, "coverage_penalty_weight"),
        ({"coverage_penalty_weight": -1e-3}, "coverage_penalty_weight"),
    ],
)
def test_beam_arguments_are_checked(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name} must be .*Received: {name}="):
        samplers.BeamSampler(**kwargs)
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        samplers.get("beam", **kwargs)


def test_a_beam_of_width_one_is_greedy():
    table = random_table(11)
    prompts = [[p] for p in range(1, V)]
    greedy = generate(TableModel(table), prompts, 4, sampler=samplers.GreedySampler())
    beam = generate(
        TableModel(table), prompts, 4, sampler=samplers.BeamSampler(1, length_penalty=0.0)
    )
    np.testing.assert_array_equal(beam.tokens, greedy.tokens)
    np.testing.assert_allclose(beam.scores, greedy.scores, atol=1e-5)


class _TupleCacheModel(TableModel):
    """`TableModel` whose cache is a tuple, not a dict (a cache may be any structure)."""

    def init_cache(self, prompts, max_length, start_id=None):
        logits, weights, cache = super().init_cache(prompts, max_length, start_id)
        return logits, weights, (cache["last"], cache["step"])

    def next_logits(self, token, cache):
        logits, weights, cache = super().next_logits(token, {"last": cache[0], "step": cache[1]})
        return logits, weights, (cache["last"], cache["step"])


def test_beam_search_takes_a_cache_that_is_not_a_dict():
    table = random_table(12)
    prompts = [[1], [4]]
    sampler = samplers.BeamSampler(3, num_beams_returned=2, coverage_penalty_weight=0.5)
    expected = generate(TableModel(table), prompts, 3, sampler=sampler)
    result = generate(_TupleCacheModel(table), prompts, 3, sampler=sampler)
    np.testing.assert_array_equal(result.tokens, expected.tokens)
    np.testing.assert_allclose(result.scores, expected.scores, atol=1e-6)


def test_beam_coverage_skips_padded_source_positions():
    """A padded source position (never attended) costs nothing: as if it were not there.

    From 1: token 2 (p 0.55) or 3 (p 0.45), then EOS (6); the path through 3 covers the
    source (coverage puts it first), the third beam keeps the search running.
    """
    table = np.full((V, V), -30.0, "float32")
    table[1, 2], table[1, 3] = np.log(0.55), np.log(0.45)
    table[2, 6] = table[3, 6] = table[6, 1] = 0.0
    attention = np.zeros((V, 3), "float32")
    attention[1, :2], attention[2, :2], attention[3, :2], attention[6, :2] = 0.5, 0.1, 0.5, 1.0
    sampler = samplers.BeamSampler(3, num_beams_returned=2, coverage_penalty_weight=1.0)

    def decode(source, width):
        model = StepTableModel(table[None, None], attention[None, None, :, :width])
        return generate(model, source, 4, sampler=sampler, start_id=1, eos_id=6)

    padded, plain = decode([[3, 4, 0]], 3), decode([[3, 4]], 2)
    np.testing.assert_array_equal(plain.tokens[0, :, :2], [[3, 6], [2, 6]])
    np.testing.assert_array_equal(padded.tokens, plain.tokens)
    np.testing.assert_allclose(padded.scores, plain.scores, atol=1e-5)


@pytest.mark.parametrize("temperature", [float("nan"), float("inf"), True, "1"])
@pytest.mark.parametrize("name", ["greedy", "random", "top_k", "top_p"])
def test_a_temperature_that_is_no_finite_number_is_named(name, temperature):
    with pytest.raises(ValueError, match=r"temperature must be a finite number\. Received: temp"):
        samplers.get(name, temperature=temperature)
