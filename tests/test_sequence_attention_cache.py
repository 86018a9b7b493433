"""`SequenceAttention`'s cached step (keras-hub's `CachedMultiHeadAttention` calling
convention) against the full call."""

import numpy as np
import pytest
from helpers import to_numpy

from keras_attn_rnn import SequenceAttention, scores

pytestmark = pytest.mark.layers

ATOL = 1e-5


def randomize(layer, seed=0):
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0.0, 0.6, w.shape).astype("float32"))


@pytest.mark.parametrize(
    "score, window",
    [("dot", None), (scores.Additive(units=5, normalize=True), None), ("general", 2)],
    ids=["dot", "additive", "general-window2"],
)
def test_cached_causal_steps_equal_the_full_call(score, window):
    h = np.random.default_rng(0).normal(size=(2, 6, 4)).astype("float32")
    layer = SequenceAttention(score=score, window=window)
    layer([h, h])  # build
    randomize(layer)
    full, weights = to_numpy(layer([h, h], use_causal_mask=True, return_attention_scores=True))
    cache = layer.init_cache(np.zeros((2, 8, 4), "float32"))  # 2 spare positions
    for t in range(6):
        step = h[:, t : t + 1]
        out, w, cache = layer(
            [step, step],
            cache=cache,
            cache_update_index=t,
            use_causal_mask=True,
            return_attention_scores=True,
        )
        np.testing.assert_allclose(to_numpy(out)[:, 0], full[:, t], atol=ATOL)
        np.testing.assert_allclose(to_numpy(w)[:, 0, :6], weights[:, t], atol=ATOL)
        assert np.all(to_numpy(w)[:, 0, t + 1 :] == 0)
    np.testing.assert_allclose(to_numpy(cache["values"])[:, :6], h, atol=0)


def test_a_position_per_row_writes_and_masks_each_row_alone():
    h = np.random.default_rng(1).normal(size=(2, 5, 4)).astype("float32")
    layer = SequenceAttention(score="scaled_dot")
    layer([h, h])
    # Row 0 holds 2 positions, row 1 holds 4: the next step goes to 2 and 4.
    values = np.zeros((2, 6, 4), "float32")
    values[0, :2], values[1, :4] = h[0, :2], h[1, :4]
    cache = layer.init_cache(values)
    step = np.stack([h[0, 2:3], h[1, 4:5]])
    out, w, cache = layer(
        [step, step],
        cache=cache,
        cache_update_index=np.array([2, 4], "int32"),
        use_causal_mask=True,
        return_attention_scores=True,
    )
    w = to_numpy(w)[:, 0]
    assert np.all(w[0, 3:] == 0) and np.all(w[1, 5:] == 0)
    expected_0 = to_numpy(layer([h[:1, 2:3], h[:1, :3]]))[0, 0]
    expected_1 = to_numpy(layer([h[1:, 4:5], h[1:, :5]]))[0, 0]
    np.testing.assert_allclose(to_numpy(out)[:, 0], [expected_0, expected_1], atol=ATOL)
    np.testing.assert_allclose(to_numpy(cache["values"])[0, 2], h[0, 2], atol=0)
    np.testing.assert_allclose(to_numpy(cache["values"])[1, 4], h[1, 4], atol=0)


def test_a_chunk_of_steps_is_written_at_each_rows_position():
    h = np.random.default_rng(3).normal(size=(2, 7, 4)).astype("float32")
    layer = SequenceAttention(score="dot")
    layer([h, h])
    full = to_numpy(layer([h, h], use_causal_mask=True))
    # Row 0 holds 1 position, row 1 holds 3; the next 3 steps of each are written at once.
    values = np.zeros((2, 7, 4), "float32")
    values[0, :1], values[1, :3] = h[0, :1], h[1, :3]
    chunk = np.stack([h[0, 1:4], h[1, 3:6]])
    out, cache = layer(
        [chunk, chunk],
        cache=layer.init_cache(values),
        cache_update_index=np.array([1, 3], "int32"),
        use_causal_mask=True,
    )
    written = to_numpy(cache["values"])
    np.testing.assert_array_equal(written[0, :4], h[0, :4])
    np.testing.assert_array_equal(written[1, :6], h[1, :6])
    assert np.all(written[0, 4:] == 0) and np.all(written[1, 6:] == 0)  # nothing else moved
    np.testing.assert_allclose(to_numpy(out), np.stack([full[0, 1:4], full[1, 3:6]]), atol=ATOL)


def test_a_read_only_cache_is_cross_attention_over_a_masked_memory():
    rng = np.random.default_rng(2)
    query = rng.normal(size=(2, 3, 4)).astype("float32")
    memory = rng.normal(size=(2, 5, 6)).astype("float32")
    memory_mask = np.arange(5)[None, :] < np.array([[5], [2]])
    layer = SequenceAttention(score="additive", units=3)
    full, weights = to_numpy(
        layer([query, memory], mask=[None, memory_mask], return_attention_scores=True)
    )
    cache = layer.init_cache(memory)
    out, w, same = layer(query, mask=[None, memory_mask], cache=cache, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(out), full, atol=ATOL)
    np.testing.assert_allclose(to_numpy(w), weights, atol=ATOL)
    np.testing.assert_array_equal(to_numpy(same["values"]), memory)  # read only: unchanged


def test_cache_errors():
    layer = SequenceAttention()
    with pytest.raises(ValueError, match=r"needs a built SequenceAttention.*Received: "):
        layer.init_cache(np.zeros((1, 2, 3), "float32"))
    x = np.zeros((1, 2, 3), "float32")
    layer([x, x])
    with pytest.raises(ValueError, match=r"cache must be the dict.*Received: cache="):
        layer(x, cache={"keys": x})
    with pytest.raises(ValueError, match=r"needs cache_update_index.*Received: cache_update_index"):
        layer(x, cache=layer.init_cache(x), use_causal_mask=True)
    step = x[:, :1]
    for index in (2, -1):  # the cache holds positions 0 and 1
        with pytest.raises(ValueError, match=rf"an int in \[0, 1\].*cache_update_index={index}"):
            layer([step, step], cache=layer.init_cache(x), cache_update_index=index)
    # The last position is inside: written, the other left as it was.
    _, cache = layer([step + 1, step + 1], cache=layer.init_cache(x), cache_update_index=1)
    np.testing.assert_array_equal(to_numpy(cache["values"])[:, 1], (step + 1)[:, 0])
    np.testing.assert_array_equal(to_numpy(cache["values"])[:, 0], x[:, 0])


def test_a_cache_whose_keys_are_its_values_holds_them_once():
    h = np.random.default_rng(4).normal(size=(2, 5, 4)).astype("float32")
    identity, projected = SequenceAttention(score="scaled_dot"), SequenceAttention(score="general")
    for layer in (identity, projected):
        layer([h, h])
    assert set(identity.init_cache(h)) == {"values"}
    assert set(identity.init_cache(h, key=h + 1)) == {"keys", "values"}  # a key of its own
    assert set(projected.init_cache(h)) == {"keys", "values"}
    # The values-only cache reads its values as keys: the same step as with both stored.
    step = h[:, 2:3]
    kwargs = dict(cache_update_index=2, use_causal_mask=True, return_attention_scores=True)
    out, w, cache = identity([step, step], cache=identity.init_cache(np.zeros_like(h)), **kwargs)
    both = {"keys": np.zeros_like(h), "values": np.zeros_like(h)}
    out_both, w_both, cache_both = identity([step, step], cache=both, **kwargs)
    np.testing.assert_array_equal(to_numpy(out), to_numpy(out_both))
    np.testing.assert_array_equal(to_numpy(w), to_numpy(w_both))
    assert set(cache) == {"values"}
    np.testing.assert_array_equal(to_numpy(cache["values"]), to_numpy(cache_both["keys"]))


def test_values_only_cache_errors():
    x = np.zeros((1, 2, 3), "float32")
    dot, general = SequenceAttention(score="dot"), SequenceAttention(score="general")
    dot([x, x])
    general([x, x])
    with pytest.raises(ValueError, match=r"holds the values alone.*Received: inputs=\[query"):
        dot([x[:, :1], x[:, :1], x[:, :1] + 1], cache=dot.init_cache(x), cache_update_index=0)
    with pytest.raises(ValueError, match=r"\['keys', 'values'\]\. Received: .*\['values'\]"):
        general(x, cache={"values": x})


@pytest.mark.parametrize(
    "name, transforms",
    [
        ("dot", False),
        ("scaled_dot", False),
        ("general", True),
        ("tanh_dot", True),
        ("additive", True),
    ],
)
def test_scores_say_whether_they_transform_the_keys(name, transforms):
    assert scores.get(name).transforms_keys is transforms
