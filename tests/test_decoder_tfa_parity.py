"""AttentionDecoder against TensorFlow Addons' AttentionWrapper (golden outputs).

`tests/data/tfa_golden.npz` is produced by `tests/data/make_tfa_golden.py` in a
separate TF 2.15 + tensorflow-addons 0.23 environment: per case, the inputs, the
weights stored by role, and tfa's per-step outputs, alignments and final state.
"""

import os

import keras
import numpy as np
import pytest
from helpers import to_numpy
from keras import ops

from keras_attn_rnn import AttentionDecoder, scores

pytestmark = pytest.mark.layers

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "tfa_golden.npz")
ATOL = 1e-5
CELL_UNITS = 4


def _load():
    if not os.path.exists(GOLDEN):
        return {}
    with np.load(GOLDEN) as data:
        cases = {}
        for key in data.files:
            case, _, name = key.partition("/")
            cases.setdefault(case, {})[name] = data[key]
        return cases


CASES = _load()
needs_golden = pytest.mark.skipif(
    not CASES, reason=f"{GOLDEN} is missing (run tests/data/make_tfa_golden.py with tfa)"
)


def _decoder(case):
    g = CASES[case]
    units = int(g["meta_units"])
    normalize_or_scale = bool(g["meta_normalize_or_scale"])
    if g["meta_is_bahdanau"]:
        score = scores.Additive(units=units, normalize=normalize_or_scale)
    else:
        score = scores.General(use_scale=normalize_or_scale)
    cell = (keras.layers.LSTMCell if g["meta_is_lstm"] else keras.layers.GRUCell)(CELL_UNITS)
    decoder = AttentionDecoder(
        cell,
        score=score,
        attention_layer_size=int(g["meta_attention_layer_size"]) or None,
        output_attention=bool(g["meta_output_attention"]),
        return_state=True,
    )
    decoder.build([g["inputs"].shape, g["memory"].shape])
    owners = {"cell": decoder.cell, "score": decoder.score_layer}
    if decoder.attention_layer is not None:
        owners["attention_layer"] = decoder.attention_layer
    loaded = set()
    for key, value in g.items():
        owner, _, role = key.partition("/")
        if owner in owners:
            variable = getattr(owners[owner], role)
            assert tuple(variable.shape) == value.shape, key
            variable.assign(value)
            loaded.add(id(variable))
    # every weight of the decoder comes from tfa: nothing left at its initializer
    assert {id(w) for w in decoder.weights} == loaded
    return decoder


def _memory_mask(g):
    return np.arange(g["memory"].shape[1])[None, :] < g["memory_lengths"][:, None]


@needs_golden
@pytest.mark.parametrize("case", sorted(CASES) or ["missing"])
def test_matches_tfa(case):
    g = CASES[case]
    decoder = _decoder(case)
    outputs, *states, attention, alignments = decoder(
        [g["inputs"], g["memory"]], mask=[None, _memory_mask(g)], return_attention_scores=True
    )
    np.testing.assert_allclose(to_numpy(outputs), g["outputs"], atol=ATOL, rtol=0)
    np.testing.assert_allclose(to_numpy(alignments), g["alignments"], atol=ATOL, rtol=0)
    np.testing.assert_allclose(to_numpy(attention), g["final_attention"], atol=ATOL, rtol=0)
    expected_states = [g[k] for k in sorted(g) if k.startswith("final_cell_state_")]
    assert len(states) == len(expected_states)
    for state, expected in zip(states, expected_states):
        np.testing.assert_allclose(to_numpy(state), expected, atol=ATOL, rtol=0)
    # padded memory positions: exactly zero weight, as in tfa
    assert np.all(
        to_numpy(alignments)[~np.broadcast_to(_memory_mask(g)[:, None], g["alignments"].shape)]
        == 0.0
    )

    # the step API, one step at a time as tfa was run
    state = decoder.get_initial_state(g["memory"], memory_mask=_memory_mask(g))
    for t in range(g["inputs"].shape[1]):
        output, state, alignments = decoder.step(ops.convert_to_tensor(g["inputs"][:, t]), state)
        np.testing.assert_allclose(to_numpy(output), g["outputs"][:, t], atol=ATOL, rtol=0)
        np.testing.assert_allclose(to_numpy(alignments), g["alignments"][:, t], atol=ATOL, rtol=0)
    np.testing.assert_allclose(to_numpy(state["attention"]), g["final_attention"], atol=ATOL)
    np.testing.assert_allclose(to_numpy(state["cell_state"][0]), g["final_cell_state_0"], atol=ATOL)
