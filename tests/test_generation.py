"""Decoding strategies, tested with fake next-token models (no weights, keras.ops only).

A fake model's logits depend only on the last token it was fed (a `(V, V)`
table), so every expected sequence can be worked out by hand. One-hot x 1e9
tables make every strategy deterministic.
"""

import keras
import numpy as np
import pytest
from fake_models import PROMPTS, S, TableModel, V, cycle_table, log_softmax_rows, random_table

from keras_attn_rnn import models, samplers
from keras_attn_rnn.generation import generate

pytestmark = pytest.mark.layers


def greedy_reference(table, prompt_last, steps, eos_id=None):
    log_probs = log_softmax_rows(table)
    out, token, done = [], prompt_last, False
    for _ in range(steps):
        if done:
            out.append(0)
            continue
        token = int(np.argmax(log_probs[token]))
        out.append(token)
        done = token == eos_id
    return out


def test_greedy_follows_one_hot_logits_and_reports_attention():
    result = generate(TableModel(cycle_table()), PROMPTS, max_length=5)
    np.testing.assert_array_equal(
        result.tokens, [[4, 5, 6, 7, 1], [7, 1, 2, 3, 4], [1, 2, 3, 4, 5]]
    )
    assert result.tokens.dtype == np.int32
    np.testing.assert_allclose(result.scores, np.zeros(3), atol=1e-6)
    assert result.attention.shape == (3, 5, S)
    np.testing.assert_array_equal(result.attention[0].argmax(-1), [0, 1, 2, 0, 1])


def test_eos_stops_a_sequence_and_pads_the_rest():
    result = generate(TableModel(cycle_table()), PROMPTS, max_length=6, eos_id=6)
    np.testing.assert_array_equal(
        result.tokens, [[4, 5, 6, 0, 0, 0], [7, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6]]
    )
    assert np.all(result.attention[0, 3:] == 0) and np.all(result.attention[0, :3].sum(-1) == 1)


@pytest.mark.parametrize(
    "strategy, kwargs",
    [
        ("sample", {}),
        ("sample", {"temperature": 0.5}),
        ("top_k", {"k": 2}),
        ("top_p", {"p": 0.9}),
        ("beam", {"num_beams": 3}),
    ],
)
def test_every_strategy_is_deterministic_on_one_hot_logits(strategy, kwargs):
    greedy = generate(TableModel(cycle_table()), PROMPTS, max_length=5)
    result = generate(
        TableModel(cycle_table()), PROMPTS, 5, seed=7, sampler=samplers.get(strategy, **kwargs)
    )
    np.testing.assert_array_equal(result.tokens, greedy.tokens)
    np.testing.assert_array_equal(result.attention, greedy.attention)


def _transitions(tokens, prompt_last):
    """(previous token, generated token) pairs of a `(B, L)` result."""
    previous = np.concatenate([np.full((len(tokens), 1), prompt_last), tokens[:, :-1]], axis=1)
    return previous.reshape(-1), tokens.reshape(-1)


def test_top_k_never_leaves_the_top_k():
    table, k = random_table(1), 3
    result = generate(TableModel(table), [[2]] * 64, 6, seed=3, sampler=samplers.get("top_k", k=k))
    previous, chosen = _transitions(result.tokens, 2)
    allowed = np.argsort(-np.where(np.arange(V) == 0, -np.inf, table), axis=1)[:, :k]
    assert all(c in allowed[p] for p, c in zip(previous, chosen))
    assert len(set(chosen.tolist())) > k  # it did sample (several rows of the table)
    assert any(len({c for p, c in zip(previous, chosen) if p == q}) > 1 for q in range(V))


def test_top_p_never_leaves_the_nucleus():
    table, p = random_table(2), 0.6
    result = generate(TableModel(table), [[2]] * 64, 6, seed=5, sampler=samplers.get("top_p", p=p))
    previous, chosen = _transitions(result.tokens, 2)
    probs = np.exp(log_softmax_rows(table))
    for prev, token in zip(previous, chosen):
        order = np.argsort(-probs[prev])
        before = np.cumsum(probs[prev][order]) - probs[prev][order]
        assert token in order[before < p]
    assert any(len({c for q, c in zip(previous, chosen) if q == r}) > 1 for r in range(V))


def test_sampling_follows_the_model_distribution():
    table = random_table(3, scale=0.8)
    result = generate(TableModel(table), [[4]] * 512, 1, seed=11, sampler=samplers.get("sample"))
    counts = np.bincount(result.tokens[:, 0], minlength=V) / 512
    np.testing.assert_allclose(counts, np.exp(log_softmax_rows(table))[4], atol=0.07)
    # The score is the model's log-probability of the sampled token.
    np.testing.assert_allclose(
        result.scores, log_softmax_rows(table)[4][result.tokens[:, 0]], atol=1e-5
    )


@pytest.mark.parametrize("temperature", [0.0, 1e-4])
def test_temperature_to_zero_is_greedy(temperature):
    table = random_table(4)
    greedy = generate(TableModel(table), PROMPTS, 6)
    cold = generate(
        TableModel(table), PROMPTS, 6, sampler=samplers.get("sample", temperature=temperature)
    )
    np.testing.assert_array_equal(cold.tokens, greedy.tokens)
    np.testing.assert_array_equal(greedy.tokens[0], greedy_reference(table, PROMPTS[0][-1], 6))


@pytest.mark.parametrize(
    "strategy, kwargs", [("sample", {}), ("top_k", {"k": 4}), ("top_p", {"p": 0.8})]
)
def test_fixed_seed_reproduces_and_other_seeds_differ(strategy, kwargs):
    model = TableModel(random_table(5, scale=0.5))
    runs = [
        generate(model, [[1]] * 8, 8, seed=s, sampler=samplers.get(strategy, **kwargs))
        for s in (1, 1, 2)
    ]
    np.testing.assert_array_equal(runs[0].tokens, runs[1].tokens)
    assert not np.array_equal(runs[0].tokens, runs[2].tokens)


def test_num_beams_one_is_greedy():
    table = random_table(6)
    greedy = generate(TableModel(table), PROMPTS, 6, eos_id=3)
    beam = generate(
        TableModel(table),
        PROMPTS,
        6,
        eos_id=3,
        sampler=samplers.get("beam", num_beams=1, length_penalty=0),
    )
    np.testing.assert_array_equal(beam.tokens, greedy.tokens)
    np.testing.assert_allclose(beam.scores, greedy.scores, atol=1e-5)
    np.testing.assert_array_equal(beam.attention, greedy.attention)


def _table_from_probs(rows):
    table = np.full((V, V), -30.0, "float32")
    for token, probs in rows.items():
        for nxt, prob in probs.items():
            table[token, nxt] = np.log(prob)
    return table


def test_beam_finds_the_better_sequence_greedy_misses():
    # After 1: 2 (0.6) or 3 (0.4). After 2 the next token is a coin toss over
    # 4..7; after 3 it is almost surely 4. Best pair: 3 4 (0.4 > 0.6 * 0.25).
    table = _table_from_probs(
        {
            1: {2: 0.6, 3: 0.4},
            2: {4: 0.25, 5: 0.25, 6: 0.25, 7: 0.25},
            3: {4: 0.999},
            4: {1: 1.0},
            5: {1: 1.0},
            6: {1: 1.0},
            7: {1: 1.0},
        }
    )
    greedy = generate(TableModel(table), [[1]], 2)
    beam = generate(
        TableModel(table), [[1]], 2, sampler=samplers.get("beam", num_beams=2, length_penalty=0)
    )
    assert greedy.tokens[0, 0] == 2
    np.testing.assert_array_equal(beam.tokens, [[3, 4]])
    reference = log_softmax_rows(table)
    np.testing.assert_allclose(beam.scores, [reference[1, 3] + reference[3, 4]], atol=1e-5)
    assert beam.scores[0] > greedy.scores[0]

    two = generate(
        TableModel(table),
        [[1]],
        2,
        sampler=samplers.get("beam", num_beams=3, length_penalty=0, num_beams_returned=2),
    )
    assert two.tokens.shape == (1, 2, 2) and two.attention.shape == (1, 2, 2, S)
    np.testing.assert_array_equal(two.tokens[0, 0], [3, 4])
    assert two.tokens[0, 1, 0] == 2 and two.scores[0, 0] >= two.scores[0, 1]


def test_beam_length_penalty_and_early_stop_at_eos():
    # From 1: EOS (6) at once (0.5) or 2 (0.45) then 3 then EOS, almost surely.
    table = _table_from_probs(
        {1: {6: 0.5, 2: 0.45, 7: 0.05}, 2: {3: 0.999}, 3: {6: 0.999}, 6: {1: 1.0}, 7: {1: 1.0}}
    )
    short = generate(
        TableModel(table),
        [[1]],
        5,
        eos_id=6,
        sampler=samplers.get("beam", num_beams=3, length_penalty=0),
    )
    np.testing.assert_array_equal(short.tokens, [[6, 0, 0, 0, 0]])
    np.testing.assert_allclose(short.scores, [log_softmax_rows(table)[1, 6]], atol=1e-5)
    long = generate(
        TableModel(table),
        [[1]],
        5,
        eos_id=6,
        sampler=samplers.get("beam", num_beams=3, length_penalty=1.0),
    )
    np.testing.assert_array_equal(long.tokens, [[2, 3, 6, 0, 0]])
    reference = log_softmax_rows(table)
    expected = (reference[1, 2] + reference[2, 3] + reference[3, 6]) / ((5 + 3) / 6)
    np.testing.assert_allclose(long.scores, [expected], atol=1e-5)
    assert np.all(long.attention[0, 3:] == 0)


def _ends_at_once(eos_id):
    """A random table whose every row prefers `eos_id` by 1e9: the model always wants to stop."""
    table = random_table(5)
    table[:, eos_id] = 1e9
    return table


@pytest.mark.parametrize(
    "strategy, kwargs",
    [("greedy", {}), ("sample", {}), ("top_k", {"k": 3}), ("beam", {"num_beams": 3})],
)
def test_min_length_forbids_eos_before_each_rows_length(strategy, kwargs):
    eos = 3
    lengths = np.array([0, 1, 4, 7, 9])  # 9 > max_length: that row never ends
    result = generate(
        TableModel(_ends_at_once(eos)),
        [[2], [5], [1, 4], [6], [7]],
        8,
        sampler=samplers.get(strategy, **kwargs),
        eos_id=eos,
        seed=2,
        min_length=lengths,
    )
    for row, n in zip(result.tokens.tolist(), lengths):
        assert eos not in row[:n] and 0 not in row[:n], (row, n)  # never ends before
        if n < 8:
            assert row[n] == eos and row[n + 1 :] == [0] * (7 - n), (row, n)  # ends at once
    free = generate(TableModel(_ends_at_once(eos)), [[2]], 8, sampler=strategy, eos_id=eos, seed=2)
    np.testing.assert_array_equal(free.tokens, [[eos] + [0] * 7])


def test_min_length_greedy_matches_a_numpy_reference():
    """EOS is impossible until the row's length: the argmax and the scores are of the
    renormalised distribution without it (as padding is never generated)."""
    table, eos = random_table(11), 4
    table[:, eos] += 1.2  # EOS often best
    prompts, lengths = [[1], [2], [5], [7]], np.array([0, 2, 3, 6])
    result = generate(TableModel(table), prompts, 7, eos_id=eos, min_length=lengths)
    for (last,), n, tokens, score in zip(prompts, lengths, result.tokens, result.scores):
        token, expected, total, done = last, [], 0.0, False
        for step in range(7):
            if done:
                expected.append(0)
                continue
            logits = table[token].astype("float64").copy()
            logits[0] = -np.inf
            if step < n:
                logits[eos] = -np.inf
            log_probs = logits - logits.max()
            log_probs -= np.log(np.exp(log_probs).sum())
            token = int(np.argmax(log_probs))
            total += log_probs[token]
            expected.append(token)
            done = token == eos
        np.testing.assert_array_equal(tokens, expected)
        np.testing.assert_allclose(score, total, atol=1e-5)
    free = generate(TableModel(table), prompts, 7, eos_id=eos).tokens.tolist()
    assert any(eos in row[:n] for row, n in zip(free, lengths))  # the constraint did bite


def test_min_length_makes_beam_search_take_the_longer_hypothesis():
    # From 1: EOS (6) at once (0.5) or 2 (0.45) then 3 then EOS; min_length 1 rules out the first.
    table = _table_from_probs(
        {1: {6: 0.5, 2: 0.45, 7: 0.05}, 2: {3: 0.999}, 3: {6: 0.999}, 6: {1: 1.0}, 7: {1: 1.0}}
    )
    beam = samplers.get("beam", num_beams=3, length_penalty=0)
    result = generate(TableModel(table), [[1]], 5, eos_id=6, sampler=beam, min_length=1)
    np.testing.assert_array_equal(result.tokens, [[2, 3, 6, 0, 0]])
    reference = log_softmax_rows(table)
    first = np.log(np.exp(reference[1, 2]) / (1 - np.exp(reference[1, 6])))  # renormalised
    np.testing.assert_allclose(
        result.scores, [first + reference[2, 3] + reference[3, 6]], atol=1e-4
    )
    as_int = generate(TableModel(table), [[1], [1]], 5, eos_id=6, sampler=beam, min_length=1)
    as_rows = generate(TableModel(table), [[1], [1]], 5, eos_id=6, sampler=beam, min_length=[1, 1])
    np.testing.assert_array_equal(as_int.tokens, as_rows.tokens)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"min_length": 2}, r"min_length needs eos_id.*Received: min_length=2 and eos_id=None"),
        ({"min_length": -1, "eos_id": 2}, r"min_length must be .* Received: min_length=-1"),
        ({"min_length": True, "eos_id": 2}, r"min_length must be .* Received: min_length=True"),
        ({"min_length": [1, 2], "eos_id": 2}, r"one per prompt .*\(1,\).*Received: min_length"),
        ({"min_length": [1.5], "eos_id": 2}, r"min_length must be .* Received: min_length"),
    ],
)
def test_min_length_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        generate(TableModel(cycle_table()), [[1]], 3, **kwargs)


def test_padded_array_prompts_equal_lists():
    model = TableModel(random_table(7))
    padded = np.array([[3, 0, 0], [5, 6, 0], [0, 1, 2]])  # left padding is compacted too
    a = generate(model, padded, 4, sampler=samplers.get("beam", num_beams=2))
    b = generate(model, [[3], [5, 6], [1, 2]], 4, sampler=samplers.get("beam", num_beams=2))
    np.testing.assert_array_equal(a.tokens, b.tokens)


def test_model_cache_is_built_once():
    model = TableModel(cycle_table())
    generate(model, PROMPTS, 5)
    assert model.calls == 1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"sampler": "beams"}, r"sampler must be one of .* Received: sampler='beams'"),
        ({"sampler": samplers.TopKSampler(9)}, r"k, an integer in \[1, 8\].*Received: k=9"),
        ({"max_length": 0}, r"max_length must be an integer >= 1. Received: max_length=0"),
        ({"eos_id": 8}, r"eos_id must be a token id in \[0, 8\). Received: eos_id=8"),
        ({"prompts": [[1, 8]]}, r"prompts must hold token ids in \[0, 8\).*Received: prompts"),
        ({"prompts": [[1], []]}, r"at least one token.*Received: empty prompts at rows \[1\]"),
        ({"prompts": np.ones((2, 2, 2), "int32")}, r"prompts must be .* Received: prompts="),
    ],
)
def test_clear_errors(kwargs, match):
    kwargs = {"prompts": [[1]], "max_length": 3, **kwargs}
    with pytest.raises(ValueError, match=match):
        generate(TableModel(cycle_table()), **kwargs)


@pytest.mark.parametrize(
    "name, arguments, match",
    [
        ("top_k", {"k": 0}, r"k, an integer in \[1, V\].*Received: k=0"),
        ("top_p", {"p": 0.0}, r"p, a float in \(0, 1\]. Received: p=0.0"),
        ("top_p", {"p": 1.5}, r"p, a float in \(0, 1\]. Received: p=1.5"),
        ("beam", {"num_beams": 0}, r"num_beams must be .* Received: num_beams=0"),
        (
            "beam",
            {"num_beams": 2, "num_beams_returned": 3},
            r"num_beams_returned .* Received: num_beams_returned=3",
        ),
        (
            "sample",
            {"temperature": -1.0},
            r"temperature must be >= 0 .* Received: temperature=-1.0",
        ),
    ],
)
def test_clear_sampler_errors(name, arguments, match):
    with pytest.raises(ValueError, match=match):
        samplers.get(name, **arguments)


def test_errors_name_the_model_and_start_id():
    with pytest.raises(ValueError, match="step API .*Received: model="):
        generate(object(), [[1]], 3)

    class FakeSeq2Seq(TableModel):
        is_seq2seq = True

    with pytest.raises(ValueError, match="start_id is required.*Received: start_id=None"):
        generate(FakeSeq2Seq(cycle_table()), [[1]], 3)


# On torch this compiles the step (~25 s the first time on 2 CPU cores): the greedy case is
# the torch suite's one check of that path, beam runs there with the slow tests.
_SLOW_ON_TORCH = [pytest.mark.slow] if keras.backend.backend() == "torch" else []


@pytest.mark.parametrize("sampler", ["greedy", pytest.param("beam", marks=_SLOW_ON_TORCH)])
def test_jit_compile_decodes_as_without(sampler):
    """`jit_compile=True` (XLA on TensorFlow, a torch.compile'd step on torch) changes nothing."""
    keras.utils.set_random_seed(3)
    lm = models.AttentiveLanguageModel(17, embedding_dim=6, units=8)
    prompts = [[3, 4, 5], [6]]
    plain = generate(lm, prompts, 6, sampler=sampler, eos_id=2)
    compiled = generate(lm, prompts, 6, sampler=sampler, eos_id=2, jit_compile=True)
    np.testing.assert_array_equal(compiled.tokens, plain.tokens)
    np.testing.assert_allclose(compiled.scores, plain.scores, atol=1e-5)
    np.testing.assert_allclose(compiled.attention, plain.attention, atol=1e-5)
