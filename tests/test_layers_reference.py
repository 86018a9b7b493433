"""Layer outputs against NumPy references of the formulas and against Keras's own layers."""

import keras
import numpy as np
import pytest
import reference
from helpers import to_numpy

from keras_attn_rnn import AttentionPooling, SequenceAttention, scores

pytestmark = pytest.mark.layers

ATOL = 1e-5
SCORES = [
    "dot",
    "scaled_dot",
    "general",
    "additive",
    "tanh_dot",
    scores.ScaledDot(use_scale=True),
    scores.General(use_scale=True),
    scores.Additive(units=5, normalize=True),
]
SCORE_IDS = [
    "dot",
    "scaled_dot",
    "general",
    "additive",
    "tanh_dot",
    "scaled_dot+scale",
    "general+scale",
    "additive+normalize",
]


def fresh(score):
    """A new score layer per test (instances hold weights)."""
    if isinstance(score, str):
        return score
    return type(score).from_config(score.get_config())


def randomize(layer, seed=0):
    """Sets every weight to non-trivial random values so biases and scales matter."""
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0.0, 0.6, w.shape).astype("float32"))


def random_inputs(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s).astype("float32") for s in shapes]


def padding_mask(batch, length, lengths):
    return np.arange(length)[None, :] < np.asarray(lengths)[:, None]


@pytest.mark.parametrize("score", SCORES, ids=SCORE_IDS)
@pytest.mark.parametrize("query", ["learned", "fixed", "external"])
def test_attention_pooling_matches_numpy(score, query):
    b, t, d = 3, 6, 4
    (x,) = random_inputs((b, t, d))
    mask = padding_mask(b, t, [6, 3, 1])
    kwargs = {}
    inputs = x
    if query == "fixed":
        kwargs["query_value"] = list(np.linspace(-1, 1, d))
    if query == "external":
        (q,) = random_inputs((b, d), seed=1)
        inputs = [x, q]
    layer = AttentionPooling(score=fresh(score), query=query, **kwargs)
    layer(inputs)
    randomize(layer.score_layer)
    if query == "learned":
        randomize(layer, seed=2)
    y, a = layer(inputs, mask=mask, return_attention_scores=True)

    if query == "external":
        query_vectors = q[:, None, :]
    else:
        query_vectors = np.broadcast_to(to_numpy(layer.query_vector), (b, 1, d))
    s = reference.score(layer.score_layer, query_vectors, x)[:, 0, :]
    a_ref = reference.masked_softmax(s, mask)
    y_ref = np.einsum("bt,btd->bd", a_ref, x)
    np.testing.assert_allclose(to_numpy(a), a_ref, atol=ATOL)
    np.testing.assert_allclose(to_numpy(y), y_ref, atol=ATOL)
    assert np.all(to_numpy(a)[~mask] == 0.0)


def test_attention_pooling_default_is_the_seed_formula():
    """score='tanh_dot': s_t = tanh(W h_t + b), a = softmax(s . e), y = sum a_t h_t."""
    (h,) = random_inputs((2, 5, 3))
    layer = AttentionPooling(units=4)
    layer(h)
    randomize(layer)
    randomize(layer.score_layer, seed=3)
    w = {v.path.split("/")[-1]: to_numpy(v) for v in layer.score_layer.weights}
    e = to_numpy(layer.query_vector)
    assert w["kernel"].shape == (3, 4) and w["bias"].shape == (4,) and e.shape == (4,)
    s = np.tanh(h @ w["kernel"] + w["bias"])
    a = np.exp(s @ e)
    a /= a.sum(-1, keepdims=True)
    np.testing.assert_allclose(to_numpy(layer(h)), np.einsum("bt,btd->bd", a, h), atol=ATOL)
    assert [v.path.split("/")[-1] for v in layer.trainable_weights] == ["query", "kernel", "bias"]


def test_fixed_query_is_not_trained():
    layer = AttentionPooling(query="fixed", query_value=[1.0, -2.0, 0.5])
    layer(np.zeros((1, 2, 3), "float32"))
    assert all(w is not layer.query_vector for w in layer.trainable_weights)
    assert any(w is layer.query_vector for w in layer.non_trainable_weights)
    np.testing.assert_array_equal(to_numpy(layer.query_vector), [1.0, -2.0, 0.5])
    assert layer.get_config()["query_value"] == [1.0, -2.0, 0.5]


@pytest.mark.parametrize("score", SCORES, ids=SCORE_IDS)
@pytest.mark.parametrize("causal", [False, True])
def test_sequence_attention_matches_numpy(score, causal):
    b, tq, tv, d = 2, 5, 6, 4
    q, v, k = random_inputs((b, tq, d), (b, tv, d), (b, tv, d))
    q_mask = padding_mask(b, tq, [5, 3])
    v_mask = padding_mask(b, tv, [6, 2])
    layer = SequenceAttention(score=fresh(score))
    layer([q, v, k])
    randomize(layer.score_layer)
    out, a = layer(
        [q, v, k], mask=[q_mask, v_mask], use_causal_mask=causal, return_attention_scores=True
    )
    key_mask = v_mask[:, None, :] & (reference.causal(tq, tv)[None] if causal else True)
    a_ref = reference.masked_softmax(reference.score(layer.score_layer, q, k), key_mask)
    out_ref = (a_ref @ v) * q_mask[..., None]
    np.testing.assert_allclose(to_numpy(a), a_ref, atol=ATOL)
    np.testing.assert_allclose(to_numpy(out), out_ref, atol=ATOL)
    assert np.all(to_numpy(a)[~np.broadcast_to(key_mask, a_ref.shape)] == 0.0)


@pytest.mark.parametrize("causal", [False, True])
def test_local_window_matches_numpy(causal):
    b, t, d, w = 2, 7, 3, 2
    (x,) = random_inputs((b, t, d))
    mask = padding_mask(b, t, [7, 4])
    layer = SequenceAttention(score="general", window=w)
    layer([x, x])
    randomize(layer.score_layer)
    out, a = layer([x, x], mask=[mask, mask], use_causal_mask=causal, return_attention_scores=True)
    structure = reference.window(t, t, w) & (reference.causal(t, t) if causal else True)
    a_ref = reference.masked_softmax(
        reference.score(layer.score_layer, x, x), mask[:, None, :] & structure[None]
    )
    np.testing.assert_allclose(to_numpy(a), a_ref, atol=ATOL)
    np.testing.assert_allclose(to_numpy(out), (a_ref @ x) * mask[..., None], atol=ATOL)


# Independent peers: Keras's own attention layers.

# Keras 3.10 and 3.11's own Attention / AdditiveAttention subtract a `(B, Tv)` value mask
# from `(B, Tq, Tv)` scores without expanding it (a shape error unless Tq == B); Keras 3.12
# expands it. The library does not use these layers: only the peer comparison is affected.
_PEER_MASK_BUG = tuple(int(part) for part in keras.__version__.split(".")[:2]) < (3, 12)
_PEER_BUG = pytest.mark.xfail(
    _PEER_MASK_BUG,
    reason=f"keras.layers.Attention in Keras {keras.__version__} mishandles a (B, Tv) value "
    "mask without a causal mask (fixed in Keras 3.12)",
    strict=True,
)
MASK_CASES = [(None, None, False), ("pad", "pad", False), (None, None, True), ("pad", "pad", True)]
PEER_LAYER_CASES = [
    pytest.param(*case, marks=_PEER_BUG) if case == ("pad", "pad", False) else case
    for case in MASK_CASES
]


def _peer_inputs():
    q, v, k = random_inputs((2, 5, 4), (2, 6, 4), (2, 6, 4), seed=7)
    masks = [padding_mask(2, 5, [5, 2]), padding_mask(2, 6, [6, 3])]
    return q, v, k, masks


@pytest.mark.parametrize("q_mask,v_mask,causal", PEER_LAYER_CASES)
def test_dot_equals_keras_attention(q_mask, v_mask, causal):
    q, v, k, masks = _peer_inputs()
    mask = masks if q_mask else None
    ours, a = SequenceAttention(score="dot")(
        [q, v, k], mask=mask, use_causal_mask=causal, return_attention_scores=True
    )
    peer, a_peer = keras.layers.Attention()(
        [q, v, k], mask=mask, use_causal_mask=causal, return_attention_scores=True
    )
    np.testing.assert_allclose(to_numpy(ours), to_numpy(peer), atol=ATOL)
    np.testing.assert_allclose(to_numpy(a), to_numpy(a_peer), atol=ATOL)


@pytest.mark.parametrize("q_mask,v_mask,causal", MASK_CASES)
def test_scaled_dot_equals_dot_product_attention(q_mask, v_mask, causal):
    q, v, k, masks = _peer_inputs()
    mask = masks if q_mask else None
    ours = SequenceAttention(score="scaled_dot")([q, v, k], mask=mask, use_causal_mask=causal)
    peer_mask = None if mask is None else masks[1][:, None, None, :]
    peer = keras.ops.dot_product_attention(
        q[:, :, None, :], k[:, :, None, :], v[:, :, None, :], mask=peer_mask, is_causal=causal
    )[:, :, 0, :]
    peer = to_numpy(peer)
    if mask is not None:
        peer = peer * masks[0][..., None]
    np.testing.assert_allclose(to_numpy(ours), peer, atol=ATOL)


@pytest.mark.parametrize("q_mask,v_mask,causal", PEER_LAYER_CASES)
def test_additive_with_identity_projections_equals_keras_additive_attention(q_mask, v_mask, causal):
    q, v, k, masks = _peer_inputs()
    mask = masks if q_mask else None
    peer_layer = keras.layers.AdditiveAttention(use_scale=True)
    peer_layer([q, v, k])
    scale = np.random.default_rng(3).normal(size=4).astype("float32")
    peer_layer.scale.assign(scale)
    ours_layer = SequenceAttention(score="additive")
    ours_layer([q, v, k])
    ours_layer.score_layer.query_kernel.assign(np.eye(4, dtype="float32"))
    ours_layer.score_layer.key_kernel.assign(np.eye(4, dtype="float32"))
    ours_layer.score_layer.v.assign(scale)
    ours, a = ours_layer([q, v, k], mask=mask, use_causal_mask=causal, return_attention_scores=True)
    peer, a_peer = peer_layer(
        [q, v, k], mask=mask, use_causal_mask=causal, return_attention_scores=True
    )
    np.testing.assert_allclose(to_numpy(ours), to_numpy(peer), atol=ATOL)
    np.testing.assert_allclose(to_numpy(a), to_numpy(a_peer), atol=ATOL)


def test_keras_masks_flow_from_embedding_through_lstm():
    tokens = np.array([[3, 1, 4, 0, 0], [5, 0, 0, 0, 0]])
    inp = keras.Input((None,), dtype="int32")
    h = keras.layers.Embedding(10, 4, mask_zero=True)(inp)
    h = keras.layers.LSTM(4, return_sequences=True)(h)
    pooled, a = AttentionPooling()(h, return_attention_scores=True)
    model = keras.Model(inp, [pooled, a])
    weights = to_numpy(model(tokens)[1])
    np.testing.assert_array_equal(weights[tokens == 0], 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    # Trailing padding does not change the pooled vector.
    longer = np.pad(tokens, ((0, 0), (0, 3)))
    np.testing.assert_allclose(to_numpy(model(longer)[0]), to_numpy(model(tokens)[0]), atol=ATOL)
    assert AttentionPooling().compute_mask(h, None) is None


def test_training_step_updates_weights_and_loss_decreases():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 6, 4)).astype("float32")
    y = (x[:, :, 0].max(-1) > 1.0).astype("float32")
    inp = keras.Input((6, 4))
    h = SequenceAttention(score="additive", dropout=0.1)([inp, inp], use_causal_mask=True)
    out = keras.layers.Dense(1, activation="sigmoid")(AttentionPooling()(h))
    model = keras.Model(inp, out)
    model.compile(keras.optimizers.Adam(0.05), "binary_crossentropy")
    before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, epochs=5, batch_size=32, verbose=0)
    assert model.evaluate(x, y, verbose=0) < before


@pytest.mark.parametrize("score", SCORES, ids=SCORE_IDS)
def test_a_score_layer_is_callable_on_its_own(score):
    """`scores.Dot()(q, k)`: the public score layers build from their call arguments."""
    layer = scores.get(fresh(score))
    query, keys = random_inputs((2, 3, 4), (2, 5, 4), seed=2)
    out = to_numpy(layer(query, keys))
    assert out.shape == (2, 3, 5)
    np.testing.assert_allclose(out, reference.score(layer, query, keys), atol=ATOL)
