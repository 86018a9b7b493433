"""`BeamSampler` against tfa's `BeamSearchDecoder` (0.23) on fixed tables.

`tests/data/tfa_beam_golden.npz` is produced by `tests/data/make_tfa_beam_golden.py` in a
separate TF 2.15 + tensorflow-addons environment (see its docstring for the tables, rows and
configurations). Here the same tables drive `StepTableModel` through `generate(...,
sampler=BeamSampler(...))`. Every returned beam must match tfa's (tokens up to EOS, lengths,
scores within 1e-5), except where the coverage penalty deliberately differs: rows whose
attention gives a real source position exactly 0 (tfa maps an accumulated 0 to "no
penalty", the project charges `log(COVERAGE_EPSILON)`). Those are checked against
`reference_beam_search`, a float64 NumPy transcription of tfa's `_beam_search_step`, which is
itself checked against the golden decodes under tfa's rule.
"""

import itertools
import os

import numpy as np
import pytest
from fake_models import StepTableModel

from keras_attn_rnn.generation import generate
from keras_attn_rnn.samplers import BeamSampler
from keras_attn_rnn.samplers.beam_sampler import COVERAGE_EPSILON

pytestmark = pytest.mark.layers

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "tfa_beam_golden.npz")
CONFIGS = list(itertools.product((1, 3, 5), (0.0, 0.6), (0.0, 0.4)))
VARIANTS = 4  # rows are 4 * base + variant; variant bit 0: exact zeros at a real position


def config_name(width, length_penalty, coverage_penalty):
    return f"w{width}_lp{length_penalty:g}_cp{coverage_penalty:g}"


@pytest.fixture(scope="module")
def golden():
    if not os.path.exists(GOLDEN):
        pytest.fail(f"{GOLDEN} is missing: run tests/data/make_tfa_beam_golden.py with tfa")
    with np.load(GOLDEN) as data:
        return {key: data[key] for key in data.files}


def tfa_coverage(accumulated, mask):
    """tfa's rule: an accumulated 0 counts as 1 (no penalty); the mask is not used."""
    del mask
    return np.log(np.minimum(np.where(accumulated == 0, 1.0, accumulated), 1.0)).sum(-1)


def project_coverage(accumulated, mask):
    """The project's rule: padding skipped by the mask, `min(acc, 1)` floored at epsilon."""
    covered = np.log(np.maximum(np.minimum(accumulated, 1.0), COVERAGE_EPSILON))
    return np.where(mask, covered, 0.0).sum(-1)


def reference_beam_search(golden, width, length_penalty, coverage_penalty, coverage):
    """tfa's beam search in float64 NumPy: `(sequences, scores (B, W), lengths (B, W))`.

    `sequences[b][w]` is the token list of beam `w` up to and including EOS.
    """
    table = golden["log_probs"].astype("float64")
    attention = golden["attention"].astype("float64")
    eos, steps_max = int(golden["eos_id"]), int(golden["max_length"])
    mask = golden["sources"] != 0
    batch, _, vocab, _ = table.shape
    log_probs = np.full((batch, width), -np.inf)
    log_probs[:, 0] = 0.0
    finished = np.ones((batch, width), bool)  # tfa: beams 1.. start finished (and -inf)
    finished[:, 0] = False
    lengths = np.zeros((batch, width), int)
    accumulated = np.repeat(golden["initial_alignments"][:, None].astype("float64"), width, 1)
    inputs = np.full((batch, width), int(golden["start_id"]))
    rows = np.arange(batch)[:, None]
    tokens, parents = [], []
    for step in range(steps_max):
        logits = table[rows, min(step, table.shape[1] - 1), inputs]
        logits = logits - logits.max(-1, keepdims=True)
        step_log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        only_eos = np.where(np.arange(vocab) == eos, 0.0, -np.inf)
        step_log_probs = np.where(finished[..., None], only_eos, step_log_probs)
        total = log_probs[..., None] + step_log_probs
        adds = (~finished)[..., None] * (np.arange(vocab) != eos)
        candidate_lengths = lengths[..., None] + adds
        covered = (
            accumulated
            + attention[rows, min(step, table.shape[1] - 1), inputs] * (~finished)[..., None]
        )
        scores = total / ((5.0 + candidate_lengths) / 6.0) ** length_penalty
        if coverage_penalty:
            penalty = coverage(covered, mask[:, None]) * finished
            scores = scores + coverage_penalty * penalty[..., None]
        flat = scores.reshape(batch, -1)
        best = np.argsort(-flat, axis=1, kind="stable")[:, :width]
        top = np.take_along_axis(flat, best, 1)
        parent, token = best // vocab, best % vocab
        log_probs = np.take_along_axis(total.reshape(batch, -1), best, 1)
        parent_finished = np.take_along_axis(finished, parent, 1)
        finished = parent_finished | (token == eos)
        lengths = np.take_along_axis(lengths, parent, 1) + ~parent_finished
        accumulated = covered[rows, parent]
        tokens.append(token)
        parents.append(parent)
        inputs = token
        if finished.all():
            break
    sequences = backtrack(np.stack(tokens, 1), np.stack(parents, 1), len(tokens), eos)
    return sequences, top, lengths


def until_eos(tokens, eos):
    tokens = [int(t) for t in tokens]
    return tokens[: tokens.index(eos) + 1] if eos in tokens else tokens


def backtrack(step_ids, parent_ids, steps, eos):
    """Beams `[b][w]` of per-step ids and parents `(B, T, W)`, walked back from step `steps - 1`."""
    beams = []
    for b in range(len(step_ids)):
        row = []
        for w in range(step_ids.shape[2]):
            beam, path = w, []
            for t in range(steps - 1, -1, -1):
                path.append(step_ids[b, t, beam])
                beam = parent_ids[b, t, beam]
            row.append(until_eos(path[::-1], eos))
        beams.append(row)
    return beams


def golden_beams(golden, name):
    """tfa's beams, backtracked from its last step (not tfa's `gather_tree`: see below)."""
    return backtrack(
        golden[f"{name}/step_ids"],
        golden[f"{name}/parent_ids"],
        int(golden[f"{name}/steps"]),
        int(golden["eos_id"]),
    )


def project_beams(golden, width, length_penalty, coverage_penalty):
    model = StepTableModel(golden["log_probs"], golden["attention"], golden["initial_alignments"])
    result = generate(
        model,
        golden["sources"],
        int(golden["max_length"]),
        sampler=BeamSampler(
            width,
            length_penalty=length_penalty,
            num_beams_returned=width,
            coverage_penalty_weight=coverage_penalty,
        ),
        eos_id=int(golden["eos_id"]),
        start_id=int(golden["start_id"]),
    )
    tokens, scores = result.tokens, result.scores
    if width == 1:
        tokens, scores = tokens[:, None], scores[:, None]
    eos = int(golden["eos_id"])
    beams = [[until_eos(tokens[b, w], eos) for w in range(width)] for b in range(len(tokens))]
    return beams, scores


def test_golden_file_holds_every_configuration(golden):
    for config in CONFIGS:
        name = config_name(*config)
        assert golden[f"{name}/predicted_ids"].shape == (12, golden["max_length"], config[0])
        assert golden[f"{name}/scores"].shape == (12, config[0])
    assert np.all(golden["attention"][1::2, :, 1::2, 1] == 0)  # the planted exact zeros
    assert (golden["source_lengths"] < golden["sources"].shape[1]).any()  # padded sources
    # The regimes the comparison must keep covering, in every configuration: beams that end
    # early with EOS and beams cut off at the maximum length.
    eos, max_length = int(golden["eos_id"]), int(golden["max_length"])
    for config in CONFIGS:
        beams = [beam for row in golden_beams(golden, config_name(*config)) for beam in row]
        assert any(beam[-1] == eos and len(beam) < max_length for beam in beams), config
        assert any(eos not in beam and len(beam) == max_length for beam in beams), config
    # The planted near-tie: at step 1, EOS is the best token and token 3 is second, closer
    # than the length penalty's reach (the EOS length rule decides between them).
    step1 = golden["log_probs"][:, 1]  # (B, V_prev, V)
    best_two = np.argsort(step1, axis=-1)[..., ::-1][..., :2]
    tied = (best_two[..., 0] == eos) & (best_two[..., 1] == 3)
    gap = np.take_along_axis(step1, best_two, -1)
    assert (tied & (gap[..., 0] - gap[..., 1] < 0.1)).any()


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: config_name(*c))
def test_numpy_reference_reproduces_tfa(golden, config):
    name = config_name(*config)
    sequences, scores, lengths = reference_beam_search(golden, *config, tfa_coverage)
    assert sequences == golden_beams(golden, name)
    np.testing.assert_allclose(scores, golden[f"{name}/scores"], atol=1e-5)
    np.testing.assert_array_equal(lengths, golden[f"{name}/lengths"])


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: config_name(*c))
def test_beam_sampler_matches_tfa(golden, config):
    width, _, coverage_penalty = config
    name = config_name(*config)
    beams, scores = project_beams(golden, *config)
    expected, expected_scores = golden_beams(golden, name), golden[f"{name}/scores"]
    expected_lengths = golden[f"{name}/lengths"]
    # Rows whose real source position 1 gets exact zeros: the project's rule instead.
    differs = np.zeros(len(beams), bool)
    if coverage_penalty:
        differs[1::2] = True
        ours, our_scores, our_lengths = reference_beam_search(golden, *config, project_coverage)
        expected = [ours[b] if differs[b] else expected[b] for b in range(len(beams))]
        expected_scores = np.where(differs[:, None], our_scores, expected_scores)
        expected_lengths = np.where(differs[:, None], our_lengths, expected_lengths)
    assert beams == expected
    np.testing.assert_allclose(scores, expected_scores, atol=1e-5)
    # Lengths: tokens up to and including EOS (tfa's `final_state.lengths`).
    lengths = np.array([[len(beam) for beam in row] for row in beams])
    np.testing.assert_array_equal(lengths, expected_lengths)


def test_tfa_gather_tree_misaligns_beams_re_ranked_after_they_all_finished(golden):
    """Why the comparison backtracks tfa's per-step outputs instead of its `predicted_ids`.

    tfa's `gather_tree` walks back from step `max(lengths) - 1` of each row; a row whose beams
    all finished before the last step was re-ranked since (a finished beam's score changes
    once), so there `predicted_ids[b, :, w]` is not the beam `scores[b, w]` belongs to.
    Everywhere else the two agree.
    """
    eos, misaligned = int(golden["eos_id"]), 0
    for config in CONFIGS:
        name = config_name(*config)
        ids = golden[f"{name}/predicted_ids"]
        gathered = [[until_eos(ids[b, :, w], eos) for w in range(config[0])] for b in range(12)]
        walked = golden_beams(golden, name)
        for b in range(12):
            if gathered[b] != walked[b]:
                misaligned += 1
                assert golden[f"{name}/lengths"][b].max() < golden[f"{name}/steps"]
                assert sorted(gathered[b]) == sorted(walked[b])  # the same beams, reordered
    assert misaligned > 0


def test_the_exact_zero_rows_do_change_the_result(golden):
    """The project's rule changes the winner of some row with exact zeros (the test bites)."""
    changed = 0
    for config in CONFIGS:
        if not config[2]:
            continue
        ours, our_scores, _ = reference_beam_search(golden, *config, project_coverage)
        theirs = golden_beams(golden, config_name(*config))
        changed += sum(ours[b] != theirs[b] for b in range(1, len(ours), 2))
        # Rows without the planted zeros decode exactly as tfa's.
        assert [ours[b] for b in range(0, len(ours), 2)] == theirs[0::2]
    assert changed > 0
