"""Attention mechanisms: NumPy references from the layers' own weights, properties,
the decoder with each mechanism (step API == full call, several mechanisms), saving,
mixed precision, XLA, errors."""

import keras
import numpy as np
import pytest
from helpers import assert_config_round_trip, save_and_reload_in_subprocess, to_numpy
from hypothesis import given
from hypothesis import strategies as st
from keras import ops

from keras_attn_rnn import AttentionDecoder, mechanisms, scores
from keras_attn_rnn.mechanisms import monotonic_attention

pytestmark = pytest.mark.layers

B, T, S, D_Q, D_M = 3, 4, 6, 4, 5
ATOL = 1e-5
MASK = np.arange(S)[None, :] < np.array([[6], [1], [4]])


def randomize(layer, seed=1, scale=0.6):
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0.0, scale, w.shape).astype("float32"))


def weights_of(layer):
    return {w.path.split("/")[-1]: to_numpy(w).astype("float64") for w in layer.weights}


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(B, T, D_Q)).astype("float32"),
        rng.normal(size=(B, S, D_M)).astype("float32"),
    )


def run(mechanism, queries, memory, mask=MASK, training=None):
    """The mechanism stepped over `queries (B, T, d_q)`: alignments `(B, T, S)`."""
    if not mechanism.built:
        mechanism.build((None, queries.shape[-1]), memory.shape)
        randomize(mechanism)
    keys = mechanism.prepare_keys(ops.convert_to_tensor(memory))
    mask = None if mask is None else ops.convert_to_tensor(mask)
    state = mechanism.initial_state(keys, mask)
    out = []
    for t in range(queries.shape[1]):
        weights, state = mechanism.call(
            ops.convert_to_tensor(queries[:, t]), keys, memory, mask, state, training=training
        )
        out.append(to_numpy(weights))
    return np.stack(out, 1)


def softmax(z, mask):
    z = np.where(mask, z, -np.inf)
    top = np.max(np.where(mask, z, -1e300), -1, keepdims=True)
    e = np.where(mask, np.exp(z - top), 0.0)
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# -- NumPy references ------------------------------------------------------------------------


def location_reference(w, queries, memory, mask, features, kernel_size):
    """`features`: "previous", "cumulative" or "both" (channels previous, cumulative)."""
    keys = memory @ w["key_kernel"] + w.get("b", 0.0)
    previous = cumulative_sum = np.zeros((B, S))
    out = []
    half = kernel_size // 2
    for t in range(queries.shape[1]):
        channels = {
            "previous": [previous],
            "cumulative": [cumulative_sum],
            "both": [previous, cumulative_sum],
        }[features]
        conv = 0.0
        for c, f in enumerate(channels):
            padded = np.pad(f, ((0, 0), (half, half)))
            conv = conv + np.stack(
                [padded[:, s : s + kernel_size] @ w["location_kernel"][:, c, :] for s in range(S)],
                1,
            )
        hidden = np.tanh(
            (queries[:, t] @ w["query_kernel"])[:, None] + keys + conv @ w["location_projection"]
        )
        a = softmax(hidden @ w["v"], mask)
        previous, cumulative_sum = a, cumulative_sum + a
        out.append(a)
    return np.stack(out, 1)


@pytest.mark.parametrize(
    "arguments, features",
    [
        ({"cumulative": True}, "cumulative"),
        ({"cumulative": False}, "previous"),
        ({"location_features": "cumulative"}, "cumulative"),
        ({"location_features": "previous"}, "previous"),
        ({"location_features": "both"}, "both"),
        ({}, "both"),
    ],
    ids=["cumulative=True", "cumulative=False", "cumulative", "previous", "both", "default"],
)
def test_location_sensitive_matches_numpy(arguments, features):
    queries, memory = inputs()
    mechanism = mechanisms.LocationSensitiveAttention(7, filters=3, kernel_size=3, **arguments)
    got = run(mechanism, queries, memory)
    assert mechanism.location_features == features
    channels = 2 if features == "both" else 1
    assert tuple(mechanism.location_kernel.shape) == (3, channels, 3)
    expected = location_reference(weights_of(mechanism), queries, memory, MASK, features, 3)
    np.testing.assert_allclose(got, expected, atol=ATOL)
    assert np.all(got[~np.broadcast_to(MASK[:, None], got.shape)] == 0)
    if features == "both":  # each channel matters: neither single-feature reference matches
        w = weights_of(mechanism)
        for single in ("previous", "cumulative"):
            other = location_reference(w, queries, memory, MASK, single, 3)
            assert not np.allclose(got, other, atol=1e-3)


@pytest.mark.parametrize("cumulative, features", [(True, "cumulative"), (False, "previous")])
def test_location_sensitive_old_config_keeps_its_features(cumulative, features):
    """A config saved with the older `cumulative` (and no `location_features`) loads as before."""
    config = mechanisms.LocationSensitiveAttention(4, filters=2, kernel_size=3).get_config()
    assert config["location_features"] == "both" and "cumulative" not in config
    del config["location_features"]
    config["cumulative"] = cumulative
    restored = mechanisms.LocationSensitiveAttention.from_config(config)
    assert restored.location_features == features
    restored.build((None, D_Q), (None, S, D_M))
    assert tuple(restored.location_kernel.shape) == (3, 1, 2)
    clone = assert_config_round_trip(restored)
    assert clone.location_features == features


def test_coverage_matches_numpy_and_its_loss():
    from keras_attn_rnn import losses

    queries, memory = inputs(1)
    mechanism = mechanisms.CoverageAttention(7)
    got = run(mechanism, queries, memory)
    w = weights_of(mechanism)
    keys = memory @ w["key_kernel"] + w["b"]
    coverage, expected = np.zeros((B, S)), []
    for t in range(T):
        hidden = np.tanh(
            (queries[:, t] @ w["query_kernel"])[:, None]
            + keys
            + coverage[..., None] * w["coverage_kernel"]
        )
        a = softmax(hidden @ w["v"], MASK)
        coverage = coverage + a
        expected.append(a)
    expected = np.stack(expected, 1)
    np.testing.assert_allclose(got, expected, atol=ATOL)
    previous = np.cumsum(expected, 1) - expected
    reference = np.minimum(expected, previous).sum(-1).mean(-1)  # every step attends
    np.testing.assert_allclose(to_numpy(losses.coverage_loss(got)), reference, atol=ATOL)


def test_local_p_matches_numpy_and_is_zero_outside_its_window():
    queries, memory = inputs(2)
    window = 1
    mechanism = mechanisms.LocalPredictiveAttention("general", window=window)
    got = run(mechanism, queries, memory)
    w = weights_of(mechanism)
    keys = memory @ w["kernel"]
    lengths = MASK.sum(-1)
    positions = np.arange(S)[None, :]
    for t in range(T):
        q = queries[:, t].astype("float64")
        centre = lengths * sigmoid(np.tanh(q @ w["position_kernel"]) @ w["position_v"])
        inside = MASK & (np.abs(positions - centre[:, None]) <= window)
        align = softmax(np.einsum("bd,bsd->bs", q, keys), inside)
        expected = align * np.exp(-((positions - centre[:, None]) ** 2) / (2 * (window / 2) ** 2))
        np.testing.assert_allclose(got[:, t], expected, atol=ATOL)
        assert np.all(got[:, t][~inside] == 0)
        assert np.all(got[:, t].sum(-1) <= 1 + 1e-6)


@pytest.mark.parametrize("placement", ["left", "both_sides"])
def test_local_p_follows_the_content_wherever_the_padding_is(placement):
    """Left (or two-sided) padding gives the right-padded alignments, shifted; 0 on padding."""
    queries, memory = inputs(6)
    mechanism = mechanisms.LocalPredictiveAttention("general", window=1)
    right = run(mechanism, queries, memory)
    lengths = MASK.sum(-1)
    offsets = lengths.max() - lengths if placement == "left" else (S - lengths) // 2
    moved, mask = np.zeros_like(memory), np.zeros_like(MASK)
    for b, (o, n) in enumerate(zip(offsets, lengths)):
        moved[b, o : o + n] = memory[b, :n]
        moved[b, :o] = moved[b, o + n :] = 7.0  # padding content that must not matter
        mask[b, o : o + n] = True
    got = run(mechanism, queries, moved, mask=mask)
    for b, (o, n) in enumerate(zip(offsets, lengths)):
        np.testing.assert_allclose(got[b, :, o : o + n], right[b, :, :n], atol=ATOL)
    assert np.all(got[~np.broadcast_to(mask[:, None], got.shape)] == 0)
    assert np.any(got[1] > 0) and np.any(got[2] > 0)  # the padded rows do attend


def test_local_p_without_a_mask_spans_the_whole_memory():
    """No mask: `start = 0` and `L = S`, as with a mask where every position is real."""
    queries, memory = inputs(3)
    mechanism = mechanisms.LocalPredictiveAttention("general", window=2)
    unmasked = run(mechanism, queries, memory, mask=None)
    everything = run(mechanism, queries, memory, mask=np.ones((B, S), bool))
    np.testing.assert_allclose(unmasked, everything, atol=ATOL)
    assert not np.allclose(unmasked, run(mechanism, queries, memory))  # MASK moves p_t


def test_local_p_with_holes_spans_first_to_last_unmasked_position():
    queries, memory = inputs(7)
    window = 2
    mechanism = mechanisms.LocalPredictiveAttention("general", window=window)
    mask = np.array([[0, 1, 0, 1, 1, 0], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    got = run(mechanism, queries, memory, mask=mask)
    w = weights_of(mechanism)
    keys = memory @ w["kernel"]
    start, span = np.array([1, 0, 0]), np.array([4, 0, 6])
    positions = np.arange(S)[None, :]
    for t in range(T):
        q = queries[:, t].astype("float64")
        centre = start + span * sigmoid(np.tanh(q @ w["position_kernel"]) @ w["position_v"])
        inside = mask & (np.abs(positions - centre[:, None]) <= window)
        align = softmax(np.einsum("bd,bsd->bs", q, keys), inside)
        expected = align * np.exp(-((positions - centre[:, None]) ** 2) / (2 * (window / 2) ** 2))
        np.testing.assert_allclose(got[:, t], expected, atol=ATOL)
    assert np.all(got[~np.broadcast_to(mask[:, None], got.shape)] == 0)


def monotonic_reference(p, previous, mode):
    """tfa's `monotonic_attention`, in float64 loops (recursive is exact)."""
    out = np.zeros_like(p)
    for b in range(p.shape[0]):
        if mode == "hard":
            chosen = p[b] * np.cumsum(previous[b])
            keep = np.concatenate([[1.0], np.cumprod(1 - chosen)[:-1]])
            out[b] = chosen * keep
            continue
        q = 0.0
        for i in range(p.shape[1]):
            q = (1 - p[b, i - 1]) * q + previous[b, i] if i else previous[b, 0]
            out[b, i] = p[b, i] * q
    return out


@pytest.mark.parametrize("mode", monotonic_attention.MODES)
@pytest.mark.parametrize(
    "score",
    [scores.Additive(units=5, normalize=True), scores.General()],
    ids=["additive", "general"],
)
def test_monotonic_matches_numpy(mode, score):
    queries, memory = inputs(3)
    mechanism = mechanisms.MonotonicAttention(score, mode=mode, score_bias_init=0.5)
    got = run(mechanism, queries, memory)
    layer = mechanism.score_layer
    from reference import score as score_reference

    bias = float(to_numpy(mechanism.score_bias))
    previous = np.eye(S)[[0] * B]
    for t in range(T):
        raw = score_reference(layer, queries[:, t : t + 1], memory)[:, 0] + bias
        p = (raw > 0).astype("float64") if mode == "hard" else sigmoid(raw)
        p = np.where(MASK, p, 0.0)
        previous = monotonic_reference(p, previous, mode)
        np.testing.assert_allclose(got[:, t], previous, atol=ATOL)


@given(
    st.sampled_from(monotonic_attention.MODES),
    st.integers(0, 2**16),
    st.sampled_from([-2.0, 0.0, 3.0]),
)
def test_monotonic_alignments_sum_to_at_most_one_and_hard_never_moves_back(mode, seed, bias):
    queries, memory = inputs(seed)
    mechanism = mechanisms.MonotonicAttention("general", mode=mode, score_bias_init=bias)
    mechanism.build((None, D_Q), memory.shape)
    got = run(mechanism, queries, memory)
    assert np.all(got >= 0) and np.all(got.sum(-1) <= 1 + 1e-5)
    assert np.all(got[~np.broadcast_to(MASK[:, None], got.shape)] == 0)
    if mode == "hard":
        assert set(np.unique(got)) <= {0.0, 1.0}
        attended = got.sum(-1) > 0
        position = np.argmax(got, -1)
        for b in range(B):
            steps = position[b][attended[b]]
            assert np.all(np.diff(steps) >= 0)
            # once it stops attending (ran off the end), it never attends again
            assert np.all(np.diff(attended[b].astype(int)) <= 0)


def test_monotonic_noise_is_used_in_training_only():
    queries, memory = inputs(4)
    quiet = mechanisms.MonotonicAttention("general", sigmoid_noise=0.0)
    noisy = mechanisms.MonotonicAttention("general", sigmoid_noise=2.0, seed=3)
    quiet.build((None, D_Q), memory.shape)
    noisy.build((None, D_Q), memory.shape)
    for a, b in zip(noisy.weights, quiet.weights):
        b.assign(a)
    inference = run(noisy, queries, memory, training=False)
    np.testing.assert_allclose(inference, run(quiet, queries, memory), atol=1e-6)
    training = run(noisy, queries, memory, training=True)
    assert not np.allclose(training, inference, atol=1e-3)
    assert np.all(training.sum(-1) <= 1 + 1e-5)


# -- in the decoder ------------------------------------------------------------------------


def every_mechanism():
    return {
        "content_hardmax": mechanisms.ContentAttention("general", normalizer="hardmax"),
        "monotonic_parallel": mechanisms.MonotonicAttention(scores.Additive(units=5)),
        "monotonic_hard": mechanisms.MonotonicAttention("general", mode="hard"),
        "location": mechanisms.LocationSensitiveAttention(5, filters=2, kernel_size=3),
        "coverage": mechanisms.CoverageAttention(5),
        "local_p": mechanisms.LocalPredictiveAttention("general", window=2),
        "gmm": mechanisms.GMMAttention(5, num_mixtures=2),
        "gmm_v2": mechanisms.GMMAttention(5, num_mixtures=2, version="v2"),
        "dca": mechanisms.DynamicConvolutionAttention(
            5, static_filters=2, static_kernel_size=3, dynamic_filters=2, dynamic_kernel_size=3
        ),
        "relative_location": mechanisms.LocationAttention(5, score="general"),
        "content_sparsemax": mechanisms.ContentAttention(
            "additive", units=4, normalizer="sparsemax"
        ),
    }


def built(attention, attention_layer_size=7, seed=1):
    decoder = AttentionDecoder(
        keras.layers.LSTMCell(D_Q), attention=attention, attention_layer_size=attention_layer_size
    )
    decoder.build([(None, None, 3), (None, None, D_M)])
    randomize(decoder, seed)
    return decoder


def decoder_data(seed=5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, T, 3)).astype("float32")
    memory = rng.normal(size=(B, S, D_M)).astype("float32")
    x_mask = np.ones((B, T), bool)
    x_mask[1, 2:] = False
    return x, memory, x_mask


def stepped(decoder, x, memory, x_mask):
    state = decoder.get_initial_state(memory, memory_mask=MASK)
    outputs, alignments = [], []
    for t in range(x.shape[1]):
        output, new_state, weights = decoder.step(ops.convert_to_tensor(x[:, t]), state)
        keep = x_mask[:, t][:, None]
        # the full call carries the state over masked steps: do the same
        carried = ("cell_state", "attention", "attention_state")
        kept = keras.tree.map_structure(
            lambda new, old, keep=keep: ops.where(keep, new, old),
            {k: new_state[k] for k in carried},
            {k: state[k] for k in carried},
        )
        state = {**new_state, **kept}
        outputs.append(np.where(keep, to_numpy(output), 0.0))
        weights = weights if isinstance(weights, list) else [weights]
        alignments.append([np.where(keep, to_numpy(w), 0.0) for w in weights])
    return np.stack(outputs, 1), [np.stack(a, 1) for a in zip(*alignments)]


@pytest.mark.parametrize("name", sorted(every_mechanism()))
def test_steps_reproduce_the_full_call(name):
    decoder = built(every_mechanism()[name])
    x, memory, x_mask = decoder_data()
    outputs, alignments = decoder([x, memory], mask=[x_mask, MASK], return_attention_scores=True)
    step_outputs, (step_alignments,) = stepped(decoder, x, memory, x_mask)
    np.testing.assert_allclose(to_numpy(outputs), step_outputs, atol=ATOL)
    np.testing.assert_allclose(to_numpy(alignments), step_alignments, atol=ATOL)
    assert np.all(to_numpy(alignments)[~np.broadcast_to(MASK[:, None], (B, T, S))] == 0)


@pytest.mark.parametrize("sizes", [[7, 3], None, [None, 4]], ids=["sizes", "none", "mixed"])
def test_several_mechanisms_concatenate_their_attention(sizes):
    decoder = built(
        [
            mechanisms.ContentAttention("additive", units=5),
            mechanisms.MonotonicAttention("general"),
        ],
        attention_layer_size=sizes,
    )
    x, memory, x_mask = decoder_data()
    outputs, alignments = decoder([x, memory], mask=[x_mask, MASK], return_attention_scores=True)
    assert isinstance(alignments, list) and len(alignments) == 2
    expected = sum(D_M if s is None else s for s in (sizes or [None, None]))
    assert to_numpy(outputs).shape == (B, T, expected)
    assert len(decoder.mechanisms) == 2 and len(decoder.attention_layers) == 2
    if sizes is None:
        assert decoder.attention_layers == [None, None]
    step_outputs, step_alignments = stepped(decoder, x, memory, x_mask)
    np.testing.assert_allclose(to_numpy(outputs), step_outputs, atol=ATOL)
    for got, want in zip(alignments, step_alignments):
        np.testing.assert_allclose(to_numpy(got), want, atol=ATOL)
    state = decoder.get_initial_state(memory, memory_mask=MASK)
    assert set(state) == {
        "cell_state",
        "attention",
        "attention_state",
        "keys",
        "memory",
        "memory_mask",
    }
    assert len(state["attention_state"]) == 2 and set(state["attention_state"][1]) == {"alignments"}


def test_the_score_shorthand_is_content_attention_with_the_same_weights():
    x, memory, x_mask = decoder_data()
    shorthand = AttentionDecoder(
        keras.layers.GRUCell(D_Q), score=scores.Additive(5, normalize=True), attention_layer_size=7
    )
    explicit = AttentionDecoder(
        keras.layers.GRUCell(D_Q),
        attention=mechanisms.ContentAttention(scores.Additive(5, normalize=True)),
        attention_layer_size=7,
    )
    for decoder in (shorthand, explicit):
        decoder.build([x.shape, memory.shape])

    def roles(decoder):  # owner/role, the cell's own name aside
        return [
            w.path.split("/")[-1] if "gru_cell" in w.path else "/".join(w.path.split("/")[-2:])
            for w in decoder.weights
        ]

    assert roles(shorthand) == roles(explicit)
    assert "score/query_kernel" in roles(shorthand) and "attention_layer/kernel" in roles(shorthand)
    for a, b in zip(shorthand.weights, explicit.weights):
        b.assign(a)
    np.testing.assert_allclose(
        to_numpy(shorthand([x, memory], mask=[x_mask, MASK])),
        to_numpy(explicit([x, memory], mask=[x_mask, MASK])),
        atol=0,
    )


def test_every_mechanism_saves_loads_and_round_trips(tmp_path):
    x_in, m_in = keras.Input((None, 3)), keras.Input((None, D_M))
    mask_in = keras.Input((None,), dtype="bool")
    outputs = []
    for mechanism in every_mechanism().values():
        decoder = AttentionDecoder(
            keras.layers.LSTMCell(D_Q), attention=mechanism, attention_layer_size=7
        )
        clone = assert_config_round_trip(decoder)
        assert type(clone.mechanisms[0]) is type(mechanism)
        outputs += list(decoder([x_in, m_in], mask=[None, mask_in], return_attention_scores=True))
    model = keras.Model([x_in, m_in, mask_in], outputs)
    randomize(model, scale=0.4)
    x, memory, _ = decoder_data()
    save_and_reload_in_subprocess(model, [x, memory, MASK], str(tmp_path))


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_is_finite_for_every_mechanism(policy):
    keras.config.set_dtype_policy(policy)
    x, memory, x_mask = decoder_data()
    every = list(every_mechanism().values())
    decoder = AttentionDecoder(
        keras.layers.LSTMCell(D_Q), attention=every, attention_layer_size=[4] * len(every)
    )
    outputs, alignments = decoder([x, memory], mask=[x_mask, MASK], return_attention_scores=True)
    assert np.all(np.isfinite(to_numpy(outputs).astype("float32")))
    for a in alignments:
        a = to_numpy(a)
        assert a.dtype == np.float32 and np.all(np.isfinite(a))
        assert np.all(a[~np.broadcast_to(MASK[:, None], a.shape)] == 0)


@pytest.mark.slow  # ~50 s on TF, ~90 s on JAX (eager JAX); JAX runs the one-mechanism variant
def test_jit_compiled_training_equals_eager_for_every_mechanism():
    x, memory, x_mask = decoder_data()
    count = len(every_mechanism())
    y = np.random.default_rng(0).normal(size=(B, T, 4 * count)).astype("float32")

    def trained(jit_compile):
        keras.utils.set_random_seed(7)
        x_in, m_in = keras.Input((T, 3)), keras.Input((S, D_M))
        mask_in = keras.Input((S,), dtype="bool")
        decoder = AttentionDecoder(
            keras.layers.LSTMCell(D_Q),
            attention=list(every_mechanism().values()),
            attention_layer_size=[4] * count,
        )
        model = keras.Model([x_in, m_in, mask_in], decoder([x_in, m_in], mask=[None, mask_in]))
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", jit_compile=jit_compile)
        losses = [model.train_on_batch([x, memory, MASK], y) for _ in range(2)]
        return losses, [to_numpy(w) for w in model.weights]

    if keras.backend.backend() == "torch":
        pytest.skip("jit_compile is a TensorFlow/JAX option")
    jit_losses, jit_weights = trained(True)
    eager_losses, eager_weights = trained(False)
    np.testing.assert_allclose(jit_losses, eager_losses, atol=ATOL)
    for a, b in zip(jit_weights, eager_weights, strict=True):
        np.testing.assert_allclose(a, b, atol=ATOL)


@pytest.mark.parametrize(
    "build, match",
    [
        (
            lambda: mechanisms.get("monotone"),
            r"mechanism must be one of 'content', .*Received: mechanism='monotone'",
        ),
        (
            lambda: mechanisms.ContentAttention(normalizer="sparse"),
            r"normalizer must be one of .*Received: normalizer='sparse'",
        ),
        (
            lambda: mechanisms.MonotonicAttention(mode="soft"),
            r"mode must be one of 'parallel', 'recursive', 'hard'. Received: mode='soft'",
        ),
        (
            lambda: mechanisms.MonotonicAttention(sigmoid_noise=-1.0),
            r"sigmoid_noise must be >= 0.*Received: sigmoid_noise=-1.0",
        ),
        (
            lambda: mechanisms.LocalPredictiveAttention(window=0),
            r"window must be a positive integer. Received: window=0",
        ),
        (
            lambda: mechanisms.LocationSensitiveAttention(4, kernel_size=4),
            r"kernel_size must be odd.*Received: kernel_size=4",
        ),
        (
            lambda: mechanisms.LocationSensitiveAttention(4, kernel_size=0),
            r"kernel_size must be a positive integer. Received: kernel_size=0",
        ),
        (
            lambda: mechanisms.LocationSensitiveAttention(4, location_features="sum"),
            r"location_features must be one of 'previous', 'cumulative', 'both'. "
            r"Received: location_features='sum'",
        ),
        (
            lambda: mechanisms.LocationSensitiveAttention(
                4, cumulative=True, location_features="both"
            ),
            r"not both .*Received: location_features='both', cumulative=True",
        ),
        (
            lambda: mechanisms.LocationSensitiveAttention(4, cumulative="yes"),
            r"cumulative must be True or False. Received: cumulative='yes'",
        ),
        (
            lambda: mechanisms.GMMAttention(4, version="v1"),
            r"version must be one of 'v2', 'v2b'. Received: version='v1'",
        ),
        (
            lambda: mechanisms.GMMAttention(4, num_mixtures=0),
            r"num_mixtures must be a positive integer. Received: num_mixtures=0",
        ),
        (
            lambda: mechanisms.DynamicConvolutionAttention(4, dynamic_kernel_size=4),
            r"dynamic_kernel_size must be odd .*"
            r"Received: dynamic_kernel_size=4",
        ),
        (
            lambda: mechanisms.DynamicConvolutionAttention(4, prior_alpha=0),
            r"prior_alpha must be a finite number > 0. Received: prior_alpha=0",
        ),
        (
            lambda: mechanisms.LocationAttention(4, min_width=0),
            r"min_width must be a finite number > 0.0. Received: min_width=0",
        ),
        (
            lambda: AttentionDecoder(
                keras.layers.LSTMCell(4),
                attention=[mechanisms.CoverageAttention(3)] * 2,
                attention_layer_size=[3],
            ),
            r"attention_layer_size must have one entry per mechanism \(2\). Received: attention_layer_size=\[3\]",
        ),
        (
            lambda: AttentionDecoder(
                keras.layers.LSTMCell(4), score="dot", attention=mechanisms.CoverageAttention(3)
            ),
            r"shorthand .*Received: score='dot'",
        ),
    ],
)
def test_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()
