"""AttentionDecoder against TensorFlow Addons' AttentionWrapper (golden outputs).

`tests/data/tfa_golden.npz` is produced by `tests/data/make_tfa_golden.py` in a
separate TF 2.15 + tensorflow-addons 0.23 environment: per case, the inputs, the
weights stored by role, and tfa's per-step outputs, alignments (one array per
mechanism) and final state; plus `tfa.activations.sparsemax` on a few rows.

The six original cases (content attention, `AttentionDecoder(score=...)`) carry
`meta_is_bahdanau`; the mechanism cases (monotonic in its three modes, hardmax,
two mechanisms in one decoder) carry `meta_num_mechanisms` and per mechanism
`meta_mechanism_<i>_*`: see the generator's docstring.
"""

import os

import keras
import numpy as np
import pytest
from helpers import to_numpy
from keras import ops

from keras_attn_rnn import AttentionDecoder, mechanisms, normalizers, scores

pytestmark = pytest.mark.layers

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "tfa_golden.npz")
ATOL = 1e-5
CELL_UNITS = 4


def _load():
    # The file is committed: a missing one is an error, never a skip.
    with np.load(GOLDEN) as data:
        cases = {}
        for key in data.files:
            case, _, name = key.partition("/")
            cases.setdefault(case, {})[name] = data[key]
        return cases


GROUPS = _load()
SPARSEMAX = GROUPS.pop("sparsemax")
CASES = GROUPS


def _num_mechanisms(g):
    return int(g["meta_num_mechanisms"]) if "meta_num_mechanisms" in g else 1


def _score(kind, units, normalize_or_scale):
    if kind == "additive":
        return scores.Additive(units=units, normalize=normalize_or_scale)
    assert kind == "general", kind
    return scores.General(use_scale=normalize_or_scale)


def _mechanism(g, i):
    p = f"meta_mechanism_{i}_"
    kind = str(g[p + "class"])
    score = _score(str(g[p + "score"]), int(g[p + "units"]), bool(g[p + "normalize_or_scale"]))
    if kind == "monotonic":
        # score_bias_init stays at its default: the value comes from the golden file
        return mechanisms.MonotonicAttention(score, mode=str(g[p + "mode"]), sigmoid_noise=0.0)
    assert kind == "content", kind
    return mechanisms.ContentAttention(score, normalizer=str(g[p + "normalizer"]))


def _build(g):
    """The decoder the case's metadata describes, unbuilt."""
    cell = (keras.layers.LSTMCell if g["meta_is_lstm"] else keras.layers.GRUCell)(CELL_UNITS)
    common = dict(output_attention=bool(g["meta_output_attention"]), return_state=True)
    if "meta_num_mechanisms" not in g:  # the original cases: the score= shorthand
        score_kind = "additive" if g["meta_is_bahdanau"] else "general"
        score = _score(score_kind, int(g["meta_units"]), bool(g["meta_normalize_or_scale"]))
        size = int(g["meta_attention_layer_size"]) or None
        return AttentionDecoder(cell, score=score, attention_layer_size=size, **common)
    n = _num_mechanisms(g)
    mechs = [_mechanism(g, i) for i in range(n)]
    sizes = [int(g[f"meta_mechanism_{i}_attention_layer_size"]) or None for i in range(n)]
    if n == 1:
        return AttentionDecoder(cell, attention=mechs[0], attention_layer_size=sizes[0], **common)
    size = None if all(s is None for s in sizes) else sizes
    return AttentionDecoder(cell, attention=mechs, attention_layer_size=size, **common)


def _owners(decoder):
    """Weight owners by the golden file's key prefixes."""
    owners = {"cell": decoder.cell}
    if len(decoder.mechanisms) == 1:
        names = [("score", "mechanism", "attention_layer")]
    else:
        names = [
            (f"mechanism_{i}/score", f"mechanism_{i}", f"attention_layer_{i}")
            for i in range(len(decoder.mechanisms))
        ]
    for (score, mechanism, layer_name), mech, layer in zip(
        names, decoder.mechanisms, decoder.attention_layers
    ):
        owners[score] = mech.score_layer
        owners[mechanism] = mech
        if layer is not None:
            assert layer.name == layer_name
            owners[layer_name] = layer
    return owners


def _decoder(case):
    g = CASES[case]
    decoder = _build(g)
    decoder.build([g["inputs"].shape, g["memory"].shape])
    owners = _owners(decoder)
    loaded = set()
    for key, value in g.items():
        owner, _, role = key.rpartition("/")
        if not owner:
            continue
        assert owner in owners, key  # a stored weight the decoder does not have
        variable = getattr(owners[owner], role)
        assert tuple(variable.shape) == value.shape, key
        variable.assign(value)
        np.testing.assert_array_equal(to_numpy(variable), value)
        loaded.add(id(variable))
    # every weight of the decoder comes from tfa: nothing left at its initializer
    assert {id(w) for w in decoder.weights} == loaded
    assert len(decoder.weights) == len(loaded)
    return decoder


def _memory_mask(g):
    return np.arange(g["memory"].shape[1])[None, :] < g["memory_lengths"][:, None]


def _expected_alignments(g):
    n = _num_mechanisms(g)
    return [g["alignments"]] if n == 1 else [g[f"alignments_{i}"] for i in range(n)]


def _as_list(alignments, n):
    if n == 1:
        assert not isinstance(alignments, (list, tuple))
        return [alignments]
    assert isinstance(alignments, (list, tuple)) and len(alignments) == n
    return list(alignments)


def test_golden_file_covers_the_mechanisms():
    """The golden file holds what the parity tests promise (guards a stale npz)."""
    modes = {}
    lengths = set()
    for g in CASES.values():
        lengths.update(int(n) for n in g["memory_lengths"])
        for i in range(_num_mechanisms(g)):
            p = f"meta_mechanism_{i}_"
            if p + "class" in g and str(g[p + "class"]) == "monotonic":
                modes.setdefault(str(g[p + "score"]), set()).add(str(g[p + "mode"]))
                bias = g[
                    "mechanism/score_bias"
                    if _num_mechanisms(g) == 1
                    else f"mechanism_{i}/score_bias"
                ]
                assert float(bias) != 0.0  # a non-default score_bias
    assert modes == {
        "additive": {"parallel", "recursive", "hard"},
        "general": {"parallel", "recursive", "hard"},
    }
    assert {1, 5} <= lengths
    assert any(_num_mechanisms(g) == 2 for g in CASES.values())
    assert SPARSEMAX is not None


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_tfa(case):
    g = CASES[case]
    n = _num_mechanisms(g)
    decoder = _decoder(case)
    mask = _memory_mask(g)
    expected_alignments = _expected_alignments(g)
    outputs, *states, attention, alignments = decoder(
        [g["inputs"], g["memory"]], mask=[None, mask], return_attention_scores=True
    )
    alignments = _as_list(alignments, n)
    np.testing.assert_allclose(to_numpy(outputs), g["outputs"], atol=ATOL, rtol=0)
    for i, (got, want) in enumerate(zip(alignments, expected_alignments)):
        np.testing.assert_allclose(to_numpy(got), want, atol=ATOL, rtol=0, err_msg=f"mechanism {i}")
    np.testing.assert_allclose(to_numpy(attention), g["final_attention"], atol=ATOL, rtol=0)
    expected_states = [g[k] for k in sorted(g) if k.startswith("final_cell_state_")]
    assert len(states) == len(expected_states)
    for state, expected in zip(states, expected_states):
        np.testing.assert_allclose(to_numpy(state), expected, atol=ATOL, rtol=0)
    # padded memory positions: exactly zero weight, as in tfa
    padded = ~np.broadcast_to(mask[:, None], g["outputs"].shape[:2] + mask.shape[1:])
    for got in alignments:
        assert np.all(to_numpy(got)[padded] == 0.0)

    # the step API, one step at a time as tfa was run
    state = decoder.get_initial_state(g["memory"], memory_mask=mask)
    for t in range(g["inputs"].shape[1]):
        output, state, step_alignments = decoder.step(
            ops.convert_to_tensor(g["inputs"][:, t]), state
        )
        np.testing.assert_allclose(to_numpy(output), g["outputs"][:, t], atol=ATOL, rtol=0)
        for i, (got, want) in enumerate(zip(_as_list(step_alignments, n), expected_alignments)):
            np.testing.assert_allclose(
                to_numpy(got), want[:, t], atol=ATOL, rtol=0, err_msg=f"step {t}, mechanism {i}"
            )
            assert np.all(to_numpy(got)[~mask] == 0.0)
    np.testing.assert_allclose(
        to_numpy(state["attention"]), g["final_attention"], atol=ATOL, rtol=0
    )
    assert len(state["cell_state"]) == len(expected_states)
    for got, expected in zip(state["cell_state"], expected_states):
        np.testing.assert_allclose(to_numpy(got), expected, atol=ATOL, rtol=0)
    # a monotonic mechanism's state is its last alignments (tfa's attention_state)
    for mechanism, mech_state, want in zip(
        decoder.mechanisms, state["attention_state"], expected_alignments
    ):
        if isinstance(mechanism, mechanisms.MonotonicAttention):
            np.testing.assert_allclose(
                to_numpy(mech_state["alignments"]), want[:, -1], atol=ATOL, rtol=0
            )


def test_sparsemax_matches_tfa():
    inputs = ops.convert_to_tensor(SPARSEMAX["inputs"])
    got = to_numpy(normalizers.sparsemax(inputs))
    np.testing.assert_allclose(got, SPARSEMAX["outputs"], atol=ATOL, rtol=0)
    # along another axis too
    got_t = to_numpy(normalizers.sparsemax(ops.transpose(inputs), axis=0))
    np.testing.assert_allclose(got_t.T, SPARSEMAX["outputs"], atol=ATOL, rtol=0)
