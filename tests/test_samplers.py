"""`keras_attn_rnn.samplers`: names, configs, and a strategy added from outside the package."""

import json

import keras
import numpy as np
import pytest
from fake_models import PROMPTS, TableModel, V, log_softmax_rows, random_table
from helpers import exported_subclasses, to_numpy
from keras import ops

from keras_attn_rnn import samplers
from keras_attn_rnn.generation import generate

pytestmark = pytest.mark.layers


@keras.saving.register_keras_serializable(package="tests")
class MarginSampler(samplers.Sampler):
    """Samples among the tokens whose logit is within `margin` of the best (a user's strategy)."""

    def __init__(self, margin=1.0, **kwargs):
        super().__init__(**kwargs)
        self.margin = margin

    def get_next_token(self, logits, seed):
        best = ops.max(logits, axis=-1, keepdims=True)
        kept = ops.where(logits >= best - self.margin, logits, -1e30)
        return ops.argmax(kept + samplers.gumbel_noise(ops.shape(kept), seed), axis=-1)

    def get_config(self):
        return {**super().get_config(), "margin": self.margin}


def test_a_custom_sampler_from_outside_the_package_decodes():
    table = random_table(8)
    margin = 0.3
    result = generate(TableModel(table), [[2]] * 64, 5, sampler=MarginSampler(margin), seed=4)
    previous = np.concatenate([np.full((64, 1), 2), result.tokens[:, :-1]], 1).reshape(-1)
    chosen = result.tokens.reshape(-1)
    logits = np.where(np.arange(V) == 0, -np.inf, table)
    best = logits.max(axis=1)
    assert np.all(logits[previous, chosen] >= best[previous] - margin)  # never outside the margin
    assert any(len(set(chosen[previous == p])) > 1 for p in range(V))  # it does sample
    # The scores are the model's log-probabilities, as for the built-in samplers.
    np.testing.assert_allclose(
        result.scores, log_softmax_rows(table)[previous, chosen].reshape(64, 5).sum(1), atol=1e-4
    )
    again = generate(TableModel(table), [[2]] * 64, 5, sampler=MarginSampler(margin), seed=4)
    np.testing.assert_array_equal(again.tokens, result.tokens)
    config = samplers.serialize(MarginSampler(margin))
    restored = samplers.deserialize(json.loads(json.dumps(config)))
    assert isinstance(restored, MarginSampler) and restored.margin == margin


def test_a_sampler_without_the_hook_says_what_to_override():
    with pytest.raises(NotImplementedError, match=r"must override get_next_token"):
        generate(TableModel(random_table(1)), PROMPTS, 2, sampler=samplers.Sampler())


@pytest.mark.parametrize(
    "name, kwargs, cls",
    [
        ("greedy", {}, samplers.GreedySampler),
        ("sample", {"temperature": 0.5}, samplers.RandomSampler),
        ("top_k", {"k": 5}, samplers.TopKSampler),
        ("top_p", {"p": 0.8, "temperature": 2.0}, samplers.TopPSampler),
        ("beam", {"beam_width": 3, "length_penalty": 0.6}, samplers.BeamSampler),
    ],
)
def test_get_by_name_and_the_config_round_trip(name, kwargs, cls):
    sampler = samplers.get(name, **kwargs)
    assert type(sampler) is cls
    for key, value in kwargs.items():
        assert getattr(sampler, key) == value
    config = json.loads(json.dumps(samplers.serialize(sampler)))
    restored = samplers.get(config)
    assert type(restored) is cls and restored.get_config() == sampler.get_config()
    assert samplers.get(sampler) is sampler


def test_names_come_from_the_registry():
    """Every sampler class the package exports has one registered name; an unknown name is
    refused with them all."""
    exported = exported_subclasses(samplers, samplers.Sampler)
    registered = [samplers.class_for(name) for name in samplers.names()]
    assert exported and exported <= set(registered)
    with pytest.raises(ValueError, match=r"sampler must be one of .*Received: sampler=") as err:
        samplers.get("nucleus")
    assert all(repr(name) in str(err.value) for name in samplers.names())


@pytest.mark.parametrize(
    "name, kwargs",
    [("random", {"temperature": 0.7}), ("top_k", {"k": 3}), ("top_p", {"p": 0.7})],
)
def test_an_instance_decodes_as_its_name_and_its_config(name, kwargs):
    """`sampler=samplers.get(name, ...)`, the class itself and its config give the same tokens."""
    model = TableModel(random_table(9, scale=0.5))
    by_name = generate(model, [[1]] * 8, 6, seed=3, sampler=samplers.get(name, **kwargs))
    instance = samplers.REGISTRY.class_for(name)(**kwargs)
    by_instance = generate(model, [[1]] * 8, 6, sampler=instance, seed=3)
    by_config = generate(model, [[1]] * 8, 6, sampler=samplers.serialize(instance), seed=3)
    np.testing.assert_array_equal(by_instance.tokens, by_name.tokens)
    np.testing.assert_array_equal(by_config.tokens, by_name.tokens)
    other = generate(model, [[1]] * 8, 6, sampler="random", seed=3)  # a name: its defaults
    assert not np.array_equal(other.tokens, by_name.tokens) or name == "random"


def test_generate_takes_no_sampler_arguments_of_its_own():
    """The options belong to the sampler: `generate(..., k=5)` names the argument at once."""
    model = TableModel(random_table(1))
    for option in ("k", "p", "beam_width", "temperature", "length_penalty", "strategy"):
        with pytest.raises(TypeError, match=rf"unexpected keyword argument '{option}'"):
            generate(model, [[1]], 2, **{option: 1})
    # a name builds the sampler with its defaults (k=5, as keras-hub's)
    by_name = generate(model, [[1]] * 4, 3, sampler="top_k", seed=2)
    by_default = generate(model, [[1]] * 4, 3, sampler=samplers.TopKSampler(5), seed=2)
    np.testing.assert_array_equal(by_name.tokens, by_default.tokens)
    assert samplers.REGISTRY.defaults("top_p") == {"p": 0.9, "temperature": 1.0}


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: samplers.TopKSampler(k=0), r"top_k needs k, an integer in \[1, V\].*k=0"),
        (lambda: samplers.TopPSampler(p=2.0), r"p, a float in \(0, 1\]. Received: p=2.0"),
        (lambda: samplers.RandomSampler(temperature=-1), r"temperature must be >= 0"),
        (lambda: samplers.BeamSampler(beam_width=2, num_beams_returned=3), "num_beams_returned"),
        (lambda: samplers.get("top_k", vocabulary_size=8, k=9), r"\[1, 8\].*Received: k=9"),
        (
            lambda: generate(
                TableModel(random_table(1)), [[1]], 2, sampler=samplers.TopKSampler(9)
            ),
            r"\[1, 8\].*Received: k=9",
        ),
        (
            lambda: samplers.get(samplers.GreedySampler(), k=3),
            r"arguments go to the constructor of a sampler given by name.*Received: arguments",
        ),
    ],
)
def test_sampler_arguments_are_checked_before_decoding(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def coverage_reference(accumulated, mask=None):
    """GNMT's coverage penalty, the project's rule: sum_i log(max(min(acc_i, 1), 1e-10)) over
    the real positions (tfa instead maps acc_i = 0 to 1, so an ignored real word is free)."""
    covered = np.log(np.maximum(np.minimum(accumulated, 1.0), 1e-10))
    return np.where(True if mask is None else mask, covered, 0.0).sum(-1)


def test_coverage_penalty_charges_exact_zeros_and_skips_padding():
    from keras_attn_rnn.samplers.beam_sampler import coverage_penalty

    acc = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.1]], "float32")
    penalty = to_numpy(coverage_penalty(acc))
    np.testing.assert_allclose(penalty, [np.log(1e-10), np.log(0.1)], rtol=1e-6)
    assert penalty[1] > penalty[0]  # ignoring a real word costs more than covering it a bit
    mask = np.array([[True, True, False], [True, True, True]])
    np.testing.assert_allclose(to_numpy(coverage_penalty(acc, mask)), [0.0, np.log(0.1)], atol=1e-6)
    acc = np.array([[0.6, 0.6, 0.2, 0.0], [1.0, 1.5, 0.0, 0.0], [0.3, 0.0, 0.0, 2.0]], "float32")
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1]], bool)
    for m in (None, mask):
        np.testing.assert_allclose(
            to_numpy(coverage_penalty(acc, m)), coverage_reference(acc, m), rtol=1e-6
        )


def _coverage_lattice():
    """From 1: token 2 (p 0.55) or 3 (p 0.45), then EOS (6); the third beam lags far behind.

    The path through 2 leaves the source under-attended (totals 0.6, 0.6), the path through 3
    covers it (1.0, 1.0). Both finish at step 1; the third beam keeps the search running, so
    at step 2 both are ranked as finished beams, with their coverage penalty.
    """
    table = np.full((V, V), -30.0, "float32")
    table[1, 2], table[1, 3] = np.log(0.55), np.log(0.45)
    table[2, 6] = table[3, 6] = 0.0
    table[6, 1] = 0.0
    attention = np.zeros((V, 2), "float32")
    attention[1] = [0.5, 0.5]  # behind the first token
    attention[2] = [0.1, 0.1]
    attention[3] = [0.5, 0.5]
    attention[6] = [1.0, 1.0]  # behind what follows EOS: must never count
    return table, attention


def test_coverage_penalty_picks_the_covering_beam():
    table, attention = _coverage_lattice()
    model = TableModel(table, attention_table=attention)
    log_probs = log_softmax_rows(table)
    paths = {2: log_probs[1, 2] + log_probs[2, 6], 3: log_probs[1, 3] + log_probs[3, 6]}
    covered = {2: attention[1] + attention[2], 3: attention[1] + attention[3]}

    plain = generate(model, [[1]], 4, sampler=samplers.BeamSampler(3, length_penalty=0.0), eos_id=6)
    np.testing.assert_array_equal(plain.tokens, [[2, 6, 0, 0]])
    np.testing.assert_allclose(plain.scores, [paths[2]], atol=1e-5)
    both = generate(
        model,
        [[1]],
        4,
        sampler=samplers.BeamSampler(
            3, length_penalty=0.0, num_beams_returned=2, coverage_penalty_weight=1.0
        ),
        eos_id=6,
    )
    expected = {t: paths[t] + coverage_reference(covered[t]) for t in (2, 3)}
    assert expected[3] > expected[2]
    np.testing.assert_array_equal(both.tokens[0, :, :2], [[3, 6], [2, 6]])
    np.testing.assert_allclose(both.scores, [[expected[3], expected[2]]], atol=1e-5)
    with pytest.raises(ValueError, match=r"coverage_penalty_weight must be >= 0.*Received"):
        samplers.BeamSampler(coverage_penalty_weight=-1.0)


def test_coverage_penalty_waits_until_a_beam_has_finished():
    """tfa: the penalty counts only for beams finished before the step that ranks them."""
    table, attention = _coverage_lattice()
    model = TableModel(table, attention_table=attention)
    log_probs = log_softmax_rows(table)
    sampler = samplers.BeamSampler(2, num_beams_returned=2, coverage_penalty_weight=1.0)
    # One step, no EOS: nothing finished, so the scores are the plain log-probabilities.
    one = generate(model, [[1]], 1, sampler=sampler, eos_id=6)
    np.testing.assert_array_equal(one.tokens, [[[2], [3]]])
    np.testing.assert_allclose(one.scores, [[log_probs[1, 2], log_probs[1, 3]]], atol=1e-5)
    # Width 2: both beams emit EOS at step 1, the last step, ranked without the penalty.
    two = generate(model, [[1]], 4, sampler=sampler, eos_id=6)
    np.testing.assert_array_equal(two.tokens[0, :, :2], [[2, 6], [3, 6]])
    paths = [log_probs[1, 2] + log_probs[2, 6], log_probs[1, 3] + log_probs[3, 6]]
    np.testing.assert_allclose(two.scores, [paths], atol=1e-5)


def test_an_eos_candidate_is_ranked_without_counting_the_eos():
    """tfa ranks `beam + EOS` with the beam's length, and stores it with EOS counted.

    From 1: EOS (6) with p 0.5 or 2 with p 0.45; with length_penalty 1, ranked at step 0:
    EOS log(0.5) / (5 / 6) = -0.832 < 2 log(0.45) / 1 = -0.799 (counting the EOS would give
    EOS -0.693 and put it first).
    """
    table = np.full((V, V), -30.0, "float32")
    table[1, 6], table[1, 2] = np.log(0.5), np.log(0.45)
    table[2, 3] = table[3, 6] = 0.0
    log_probs = log_softmax_rows(table)
    sampler = samplers.BeamSampler(2, length_penalty=1.0, num_beams_returned=2)
    one = generate(TableModel(table), [[1]], 1, sampler=sampler, eos_id=6)
    np.testing.assert_array_equal(one.tokens, [[[2], [6]]])
    np.testing.assert_allclose(
        one.scores, [[log_probs[1, 2], log_probs[1, 6] / (5 / 6)]], atol=1e-5
    )
    # Later the finished beam is ranked with its stored length 1 (EOS counted).
    two = generate(TableModel(table), [[1]], 2, sampler=sampler, eos_id=6)
    expected = [(log_probs[1, 2] + log_probs[2, 3]) / (7 / 6), log_probs[1, 6] / 1.0]
    np.testing.assert_array_equal(two.tokens, [[[2, 3], [6, 0]]])
    np.testing.assert_allclose(two.scores, [expected], atol=1e-5)
