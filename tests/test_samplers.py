"""`keras_attn_rnn.samplers`: names, configs, and a strategy added from outside the package."""

import json

import keras
import numpy as np
import pytest
from fake_models import PROMPTS, TableModel, V, log_softmax_rows, random_table
from helpers import to_numpy
from keras import ops

from keras_attn_rnn import generation, samplers
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
    assert samplers.names() == ("greedy", "sample", "top_k", "top_p", "beam")
    assert samplers.names() == generation.STRATEGIES
    with pytest.raises(ValueError, match=r"sampler must be one of 'greedy', .*Received: sampler="):
        samplers.get("nucleus")


@pytest.mark.parametrize(
    "name, kwargs",
    [("sample", {"temperature": 0.7}), ("top_k", {"k": 3}), ("top_p", {"p": 0.7})],
)
def test_an_instance_decodes_as_its_name(name, kwargs):
    """`sampler=Instance(...)` and `sampler="name", **kwargs` give the same tokens."""
    model = TableModel(random_table(9, scale=0.5))
    by_name = generate(model, [[1]] * 8, 6, sampler=name, seed=3, **kwargs)
    by_instance = generate(model, [[1]] * 8, 6, sampler=samplers.get(name, **kwargs), seed=3)
    legacy = generate(model, [[1]] * 8, 6, strategy=name, seed=3, **kwargs)
    np.testing.assert_array_equal(by_instance.tokens, by_name.tokens)
    np.testing.assert_array_equal(legacy.tokens, by_name.tokens)


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
            lambda: generate(
                TableModel(random_table(1)), [[1]], 2, sampler=samplers.GreedySampler(), k=3
            ),
            r"k only build a sampler given by name.*Received: sampler=",
        ),
    ],
)
def test_sampler_arguments_are_checked_before_decoding(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def coverage_reference(accumulated):
    """GNMT's coverage penalty, as tfa computes it: sum_i log(min(acc_i, 1)), acc_i = 0 ignored."""
    accumulated = np.where(accumulated == 0, 1.0, accumulated)
    return np.log(np.minimum(accumulated, 1.0)).sum(-1)


def test_coverage_penalty_matches_its_formula_and_picks_the_covering_beam():
    from keras_attn_rnn.samplers.beam_sampler import coverage_penalty

    acc = np.array([[0.6, 0.6, 0.2, 0.0], [1.0, 1.5, 0.0, 0.0], [0.3, 0.0, 0.0, 2.0]], "float32")
    np.testing.assert_allclose(to_numpy(coverage_penalty(acc)), coverage_reference(acc), atol=1e-6)

    # From 1: token 2 (p 0.55) or 3 (p 0.45), then EOS (6). The path through 2 leaves the
    # source under-attended (weights 0.1, 0.1, 0.2), the path through 3 covers it (0.5, 0.5).
    table = np.full((V, V), -30.0, "float32")
    table[1, 2], table[1, 3] = np.log(0.55), np.log(0.45)
    table[2, 6] = table[3, 6] = 0.0
    table[6, 1] = 0.0
    attention = np.zeros((V, 3), "float32")
    attention[1] = [0.5, 0.5, 0.0]  # behind the first token
    attention[2] = [0.1, 0.1, 0.2]
    attention[3] = [0.5, 0.5, 0.0]
    model = TableModel(table, attention_table=attention)
    log_probs = log_softmax_rows(table)
    paths = {2: log_probs[1, 2] + log_probs[2, 6], 3: log_probs[1, 3] + log_probs[3, 6]}
    covered = {2: attention[1] + attention[2], 3: attention[1] + attention[3]}

    plain = generate(model, [[1]], 4, sampler=samplers.BeamSampler(2), eos_id=6)
    np.testing.assert_array_equal(plain.tokens, [[2, 6, 0, 0]])
    np.testing.assert_allclose(plain.scores, [paths[2]], atol=1e-5)
    weighted = generate(
        model, [[1]], 4, sampler=samplers.BeamSampler(2, coverage_penalty_weight=1.0), eos_id=6
    )
    np.testing.assert_array_equal(weighted.tokens, [[3, 6, 0, 0]])
    expected = {t: paths[t] + coverage_reference(covered[t]) for t in (2, 3)}
    assert expected[3] > expected[2]
    np.testing.assert_allclose(weighted.scores, [expected[3]], atol=1e-5)
    both = generate(
        model,
        [[1]],
        4,
        sampler=samplers.BeamSampler(2, num_beams_returned=2, coverage_penalty_weight=1.0),
        eos_id=6,
    )
    np.testing.assert_allclose(both.scores, [[expected[3], expected[2]]], atol=1e-5)
    with pytest.raises(ValueError, match=r"coverage_penalty_weight must be >= 0.*Received"):
        samplers.BeamSampler(coverage_penalty_weight=-1.0)
