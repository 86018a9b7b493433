"""`scores.additive_pairwise`: the parallel additive score formed a few query rows at a time
where ops are not fused, with the values and gradients of the whole `(B, Tq, Tv, U)` form."""

import keras
import numpy as np
import pytest
from helpers import gradient, to_numpy
from keras import ops

from keras_attn_rnn import _compilation, scores

pytestmark = pytest.mark.layers

B, TQ, TV, U = 3, 7, 5, 4  # Tq = 7: chunks of 2 and 3 leave a short last one


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(U,)).astype("float32")
    query = rng.normal(size=(B, TQ, U)).astype("float32")
    keys = rng.normal(size=(B, TV, U)).astype("float32")
    return v, query, keys


def reference(v, query, keys):
    return np.einsum("bqtu,u->bqt", np.tanh(query[:, :, None] + keys[:, None]), v)


def chunk_rows(monkeypatch, rows):
    """Forces chunks of `rows` query rows (the loop), whatever the backend compiles."""
    monkeypatch.setattr(_compilation, "fuses_elementwise", lambda: False)
    monkeypatch.setattr(scores, "PAIRWISE_CHUNK_ELEMENTS", rows * B * TV * U)


def loop_inputs(monkeypatch):
    """The `(B, chunks, c * U)` inputs of each chunk loop `additive_pairwise` runs."""
    seen = []
    original = scores._keras_compat.rnn

    def rnn(step, inputs, *args, **kwargs):
        seen.append(tuple(inputs.shape))
        return original(step, inputs, *args, **kwargs)

    monkeypatch.setattr(scores._keras_compat, "rnn", rnn)
    return seen


@pytest.mark.parametrize("rows, chunks", [(1, 7), (2, 4), (3, 3), (6, 2), (TQ, 0), (100, 0)])
def test_chunks_of_any_length_give_the_whole_tensor_s_scores(monkeypatch, rows, chunks):
    chunk_rows(monkeypatch, rows)
    loops = loop_inputs(monkeypatch)
    v, query, keys = inputs()
    got = to_numpy(scores.additive_pairwise(*map(ops.convert_to_tensor, (v, query, keys))))
    assert got.shape == (B, TQ, TV)
    np.testing.assert_allclose(got, reference(v, query, keys), rtol=1e-5, atol=1e-5)
    # as many chunks of `rows` rows as cover Tq; none where the whole tensor fits
    assert loops == ([(B, chunks, rows * U)] if chunks else [])


def test_a_budget_below_one_row_still_takes_one_row_at_a_time(monkeypatch):
    chunk_rows(monkeypatch, 1)
    monkeypatch.setattr(scores, "PAIRWISE_CHUNK_ELEMENTS", 1)
    loops = loop_inputs(monkeypatch)
    v, query, keys = inputs()
    got = to_numpy(scores.additive_pairwise(*map(ops.convert_to_tensor, (v, query, keys))))
    np.testing.assert_allclose(got, reference(v, query, keys), rtol=1e-5, atol=1e-5)
    assert loops == [(B, TQ, U)]


@pytest.mark.parametrize("case", ["unbatched", "shared keys", "rank 4"])
def test_other_ranks_are_one_piece_with_the_same_broadcasting(monkeypatch, case):
    chunk_rows(monkeypatch, 1)
    loops = loop_inputs(monkeypatch)
    v, query, keys = inputs(6)
    query, keys = {
        "unbatched": (query[0], keys[0]),  # (Tq, U) x (Tv, U)
        "shared keys": (query, keys[0]),  # (B, Tq, U) x (Tv, U): one memory for every row
        "rank 4": (np.stack([query, query[::-1]]), np.stack([keys, keys])),
    }[case]
    got = to_numpy(scores.additive_pairwise(*map(ops.convert_to_tensor, (v, query, keys))))
    want = np.einsum("...qtu,u->...qt", np.tanh(query[..., :, None, :] + keys[..., None, :, :]), v)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert loops == []


def test_saturated_rows_and_an_exact_zero_survive_the_chunks(monkeypatch):
    chunk_rows(monkeypatch, 2)
    v, query, keys = inputs(1)
    query[0, 6] = 50.0  # tanh saturates at 1 in the short last chunk
    query[1, 3] = -keys[1, 0]  # tanh(0) = 0 for the pair (3, 0)
    v_zero = v.copy()
    v_zero[:] = 0.0
    got = to_numpy(scores.additive_pairwise(*map(ops.convert_to_tensor, (v, query, keys))))
    np.testing.assert_allclose(got[0, 6], np.full(TV, v.sum()), rtol=1e-5)
    np.testing.assert_allclose(got, reference(v, query, keys), rtol=1e-5, atol=1e-5)
    zeros = to_numpy(scores.additive_pairwise(*map(ops.convert_to_tensor, (v_zero, query, keys))))
    np.testing.assert_array_equal(zeros, 0.0)


@pytest.mark.parametrize("name", ["v", "query", "keys"])
def test_the_gradients_through_the_chunks_are_the_derivative_of_the_formula(monkeypatch, name):
    chunk_rows(monkeypatch, 3)
    v, query, keys = inputs(2)
    given = {"v": v, "query": query, "keys": keys}

    def pairwise(x):
        args = {**given, name: x}
        return scores.additive_pairwise(*(ops.convert_to_tensor(args[k]) for k in given))

    grad, w = gradient(pairwise, given[name])
    t = np.tanh(query[:, :, None] + keys[:, None])  # (B, Tq, Tv, U)
    g = w[..., None] * v * (1.0 - t**2)
    expected = {"v": np.sum(w[..., None] * t, axis=(0, 1, 2)), "query": g.sum(2), "keys": g.sum(1)}
    np.testing.assert_allclose(grad, expected[name], rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="only a TensorFlow graph has unknown shapes"
)
def test_in_a_graph_of_unknown_shapes_the_chunk_length_is_reckoned_when_it_runs(monkeypatch):
    import tensorflow as tf

    chunk_rows(monkeypatch, 2)
    v, query, keys = inputs(4)
    spec = [tf.TensorSpec((U,)), tf.TensorSpec((None, None, U)), tf.TensorSpec((None, None, U))]
    traced = tf.function(scores.additive_pairwise, input_signature=spec)
    np.testing.assert_allclose(
        traced(v, query, keys).numpy(), reference(v, query, keys), rtol=1e-5, atol=1e-5
    )
    # other lengths through the same graph: 9 query rows (chunks of 2), 10 keys
    v, query, keys = v, np.tile(query, (1, 2, 1))[:, :9], np.tile(keys, (1, 2, 1))
    np.testing.assert_allclose(
        traced(v, query, keys).numpy(), reference(v, query, keys), rtol=1e-5, atol=1e-5
    )
    assert traced.experimental_get_tracing_count() == 1


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="only a TensorFlow graph has unknown shapes"
)
def test_a_single_query_row_of_unknown_batch_is_one_piece_with_no_loop(monkeypatch):
    import tensorflow as tf

    chunk_rows(monkeypatch, 1)
    loops = loop_inputs(monkeypatch)
    v, query, keys = inputs(5)
    spec = [tf.TensorSpec((U,)), tf.TensorSpec((None, 1, U)), tf.TensorSpec((None, None, U))]
    traced = tf.function(scores.additive_pairwise, input_signature=spec)
    got = traced(v, query[:, :1], keys).numpy()
    np.testing.assert_allclose(got, reference(v, query[:, :1], keys), rtol=1e-5, atol=1e-5)
    assert loops == []


def test_a_fusing_compiler_or_a_single_row_gets_the_whole_tensor(monkeypatch):
    monkeypatch.setattr(scores, "PAIRWISE_CHUNK_ELEMENTS", 1)
    loops = loop_inputs(monkeypatch)
    v, query, keys = map(ops.convert_to_tensor, inputs())
    monkeypatch.setattr(_compilation, "fuses_elementwise", lambda: True)
    scores.additive_pairwise(v, query, keys)
    monkeypatch.setattr(_compilation, "fuses_elementwise", lambda: False)
    scores.additive_pairwise(v, query[:, :1], keys)
    assert loops == []
    scores.additive_pairwise(v, query, keys)
    assert loops == [(B, TQ, U)]
