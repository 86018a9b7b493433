"""Mechanisms outside the golden shapes: long memories with saturated choice probabilities,
fresh sigmoid noise per step, row and batch, NaN in padded memory, the initial weights
(the parity tests overwrite them all) and the coverage loss over padded steps."""

import keras
import numpy as np
import pytest
from helpers import exported_subclasses, to_numpy
from keras import ops

from keras_attn_rnn import (
    AttentionDecoder,
    AttentionPooling,
    SequenceAttention,
    losses,
    mechanisms,
    scores,
)
from keras_attn_rnn.mechanisms import local_predictive_attention, monotonic_attention

pytestmark = pytest.mark.layers


def recursive_reference(p, previous):
    """`a_i = p_i q_i`, `q_i = (1 - p_{i-1}) q_{i-1} + previous_i`, in float64 loops."""
    out = np.zeros(p.shape)
    for b in range(p.shape[0]):
        q = 0.0
        for i in range(p.shape[1]):
            q = (1 - p[b, i - 1]) * q + previous[b, i] if i else previous[b, 0]
            out[b, i] = p[b, i] * q
    return out


def saturated_probabilities(rng, batch, length):
    """Choice probabilities in [0, 1] with exact 1.0, exact 0, tiny values and runs near 0.5."""
    p = rng.uniform(0.0, 1.0, (batch, length))
    p[0] = rng.uniform(0.45, 0.55, length)  # tfa's closed form collapses after ~33 of these
    p[1, length // 3] = 1.0  # a probability that rounds to 1.0: cumprod(1 - p) is exactly 0
    p[2, ::5] = 1e-12
    p[3, ::7] = 0.0
    p[3, 1::7] = 1.0
    return p.astype("float32")


@pytest.mark.parametrize("length", [8, 64, 512])
def test_parallel_monotonic_is_exact_on_long_memories(length):
    rng = np.random.default_rng(length)
    p = saturated_probabilities(rng, 4, length)
    previous = rng.dirichlet(np.ones(length), 4).astype("float32")
    previous[0] = np.eye(length)[0]
    expected = recursive_reference(p.astype("float64"), previous.astype("float64"))
    for mode in ("parallel", "recursive"):
        got = to_numpy(
            monotonic_attention.monotonic_alignments(
                ops.convert_to_tensor(p), ops.convert_to_tensor(previous), mode
            )
        )
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0, err_msg=mode)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow graphs only")
def test_parallel_monotonic_is_exact_when_the_length_is_unknown_until_run_time():
    """A TensorFlow graph with a `None` memory length scans in a while loop; gradients flow."""
    import tensorflow as tf

    rng = np.random.default_rng(1)
    p = saturated_probabilities(rng, 4, 100)
    previous = rng.dirichlet(np.ones(100), 4).astype("float32")
    spec = tf.TensorSpec((None, None), tf.float32)

    @tf.function(input_signature=[spec, spec])
    def alignments_and_gradient(p, previous):
        with tf.GradientTape() as tape:
            tape.watch(p)
            alignments = monotonic_attention.monotonic_alignments(p, previous, "parallel")
            total = tf.reduce_sum(alignments * tf.range(100, dtype=tf.float32))
        return alignments, tape.gradient(total, p)

    got, gradient = alignments_and_gradient(p, previous)
    expected = recursive_reference(p.astype("float64"), previous.astype("float64"))
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-5, rtol=0)
    assert np.all(np.isfinite(gradient.numpy())) and np.any(gradient.numpy() != 0)


def test_parallel_monotonic_keeps_the_mass_when_stepped_over_a_long_memory():
    """80 positions from score_bias 0 (p near 0.5): the attention per step stays where
    recursive mode has it (tfa's closed form falls to 0.26 at step 40)."""
    steps, length, units = 60, 80, 4
    rng = np.random.default_rng(0)
    memory = ops.convert_to_tensor(rng.normal(0, 0.1, (2, length, units)).astype("float32"))
    queries = rng.normal(0, 0.1, (2, steps, units)).astype("float32")
    totals = {}
    for mode in ("parallel", "recursive"):
        layer = mechanisms.MonotonicAttention("general", mode=mode)
        layer.build((None, units), (None, length, units))
        layer.score_layer.kernel.assign(np.eye(units, dtype="float32"))
        keys = layer.prepare_keys(memory)
        state = layer.initial_state(keys, None)
        history = []
        for t in range(steps):
            alignments, state = layer.call(
                ops.convert_to_tensor(queries[:, t]), keys, memory, None, state
            )
            history.append(to_numpy(alignments))
        totals[mode] = np.stack(history, 1)
    np.testing.assert_allclose(totals["parallel"], totals["recursive"], atol=1e-5)
    assert totals["parallel"][:, 40].sum(-1).min() > 0.9


# -- sigmoid noise ---------------------------------------------------------------------------

UNITS, LENGTH, BATCH = 3, 6, 3


def noisy_layer(seed=7):
    """Score 0 everywhere (zero memory, general score): `p = sigmoid(noise)` in training."""
    layer = mechanisms.MonotonicAttention("general", sigmoid_noise=3.0, seed=seed)
    layer.build((None, UNITS), (None, LENGTH, UNITS))
    return layer


def one_step(layer, state, training=True):
    memory = ops.zeros((BATCH, LENGTH, UNITS))
    keys = layer.prepare_keys(memory)
    alignments, next_state = layer.call(
        ops.ones((BATCH, UNITS)), keys, memory, None, state, training=training
    )
    return to_numpy(alignments), next_state


def at_step(state, steps):
    return {**state, "noise_step": ops.convert_to_tensor(np.asarray(steps, "int32"))}


def test_noise_differs_across_rows_steps_and_batches():
    layer = noisy_layer()
    first = layer.initial_state(ops.zeros((BATCH, LENGTH, UNITS)), None)
    second = layer.initial_state(ops.zeros((BATCH, LENGTH, UNITS)), None)  # the next batch
    step0, _ = one_step(layer, first)
    step1, _ = one_step(layer, at_step(first, [1, 1, 1]))
    rows_differ = [not np.allclose(step0[0], step0[b], atol=1e-3) for b in (1, 2)]
    assert all(rows_differ)
    assert not np.allclose(step0, step1, atol=1e-3)
    # step t + 1 of one batch is not step t of the next (the old seed arithmetic)
    next_batch_step0, _ = one_step(layer, second)
    assert not np.allclose(step1, next_batch_step0, atol=1e-3)
    assert not np.allclose(step0, next_batch_step0, atol=1e-3)
    # inference is noise-free: every row alike
    quiet, _ = one_step(layer, first, training=False)
    np.testing.assert_allclose(quiet[0], quiet[1], atol=1e-6)


def test_noise_is_reproducible_from_the_seed():
    runs = []
    for _ in range(2):
        layer = noisy_layer(seed=11)
        state = layer.initial_state(ops.zeros((BATCH, LENGTH, UNITS)), None)
        runs.append([one_step(layer, at_step(state, [t] * BATCH))[0] for t in range(3)])
    np.testing.assert_array_equal(np.stack(runs[0]), np.stack(runs[1]))
    other = noisy_layer(seed=12)
    state = other.initial_state(ops.zeros((BATCH, LENGTH, UNITS)), None)
    assert not np.allclose(one_step(other, state)[0], runs[0][0], atol=1e-3)


def test_noise_and_both_soft_modes_with_one_row_and_one_position():
    """The smallest shapes: a batch of one (the seed is read from row 0) and a memory of one."""
    layer = mechanisms.MonotonicAttention("general", sigmoid_noise=3.0, seed=3)
    layer.build((None, UNITS), (None, LENGTH, UNITS))
    memory = ops.zeros((1, LENGTH, UNITS))
    state = layer.initial_state(layer.prepare_keys(memory), None)
    noisy, _ = layer.call(
        ops.ones((1, UNITS)), layer.prepare_keys(memory), memory, None, state, training=True
    )
    assert np.all(np.isfinite(to_numpy(noisy)))
    p = np.array([[0.3], [1.0]], "float32")
    previous = np.ones((2, 1), "float32")
    for mode in ("parallel", "recursive"):
        got = to_numpy(
            monotonic_attention.monotonic_alignments(
                ops.convert_to_tensor(p), ops.convert_to_tensor(previous), mode
            )
        )
        np.testing.assert_allclose(got, p, atol=1e-7)  # a_0 = p_0 q_0, q_0 = previous_0


@pytest.mark.parametrize("sigmoid_noise", [0.5, 2.0])
def test_the_noise_is_standard_normal_times_sigmoid_noise(sigmoid_noise):
    """With score 0 and attention one-hot at 0, a_0 = p_0 = sigmoid(sigmoid_noise * n):
    logit(a_0) / sigmoid_noise recovers n, which is N(0, 1) across rows (tfa's noise)."""
    rows = 4000
    layer = mechanisms.MonotonicAttention("general", sigmoid_noise=sigmoid_noise, seed=1)
    layer.build((None, UNITS), (None, LENGTH, UNITS))
    memory = ops.zeros((rows, LENGTH, UNITS))
    keys = layer.prepare_keys(memory)
    state = layer.initial_state(keys, None)
    state = {**state, "noise_seed": ops.convert_to_tensor(np.full((rows, 2), 3, "int32"))}
    alignments, next_state = layer.call(
        ops.ones((rows, UNITS)), keys, memory, None, state, training=True
    )
    np.testing.assert_array_equal(to_numpy(next_state["noise_step"]), np.ones(rows))
    a0 = to_numpy(alignments)[:, 0].astype("float64")
    noise = np.log(a0 / (1.0 - a0)) / sigmoid_noise
    assert abs(noise.mean()) < 0.1 and abs(noise.std() - 1.0) < 0.06
    assert abs(np.mean(noise > 0) - 0.5) < 0.04


def test_no_noise_without_sigmoid_noise_and_hard_mode_at_a_score_of_zero():
    """sigmoid_noise=0 trains without noise (and without a seed in the state); hard mode
    chooses where score > 0, so a score of exactly 0 chooses nothing (as tfa)."""
    memory = ops.zeros((BATCH, LENGTH, UNITS))
    for mode, expected_first in (("parallel", 0.5), ("hard", 0.0)):
        layer = mechanisms.MonotonicAttention("general", mode=mode)
        layer.build((None, UNITS), (None, LENGTH, UNITS))
        keys = layer.prepare_keys(memory)
        state = layer.initial_state(keys, None)
        assert "noise_seed" not in state
        trained, _ = layer.call(ops.ones((BATCH, UNITS)), keys, memory, None, state, True)
        quiet, _ = layer.call(ops.ones((BATCH, UNITS)), keys, memory, None, state, False)
        np.testing.assert_array_equal(to_numpy(trained), to_numpy(quiet))
        np.testing.assert_allclose(to_numpy(trained)[:, 0], expected_first, atol=1e-7)


def test_a_finished_row_does_not_freeze_the_others_noise():
    """The decoder keeps a finished row's state: row 0 stays at step 2 while the others go on."""
    layer = noisy_layer()
    state = layer.initial_state(ops.zeros((BATCH, LENGTH, UNITS)), None)
    step3, _ = one_step(layer, at_step(state, [2, 3, 3]))
    step4, _ = one_step(layer, at_step(state, [2, 4, 4]))
    assert not np.allclose(step3[1:], step4[1:], atol=1e-3)
    _, next_state = one_step(layer, at_step(state, [2, 3, 3]))
    np.testing.assert_array_equal(to_numpy(next_state["noise_step"]), [3, 4, 4])


def test_noise_in_the_decoder_differs_between_training_batches():
    decoder = AttentionDecoder(
        keras.layers.GRUCell(UNITS),
        attention=mechanisms.MonotonicAttention("general", sigmoid_noise=3.0, seed=5),
    )
    x = np.ones((2, 4, 2), "float32")
    memory = np.ones((2, LENGTH, UNITS), "float32")
    _, first = decoder([x, memory], return_attention_scores=True, training=True)
    _, second = decoder([x, memory], return_attention_scores=True, training=True)
    first, second = to_numpy(first), to_numpy(second)
    assert not np.allclose(first, second, atol=1e-3)
    assert not np.allclose(first[0], first[1], atol=1e-3)  # identical rows, different noise


# -- padded memory ---------------------------------------------------------------------------


def every_mechanism():
    return [
        mechanisms.ContentAttention("additive", units=4),
        mechanisms.ContentAttention("general", normalizer="sparsemax"),
        mechanisms.MonotonicAttention(scores.Additive(units=4)),
        mechanisms.MonotonicAttention("general", mode="hard"),
        mechanisms.LocationSensitiveAttention(4, filters=2, kernel_size=3),
        mechanisms.CoverageAttention(4),
        mechanisms.LocalPredictiveAttention("general", window=2),
        mechanisms.GMMAttention(4, num_mixtures=2),
        mechanisms.DynamicConvolutionAttention(
            4, static_filters=2, static_kernel_size=3, dynamic_filters=2, dynamic_kernel_size=3
        ),
        mechanisms.LocationAttention(4),
    ]


def padded_memory(fill):
    rng = np.random.default_rng(3)
    memory = rng.normal(size=(2, 5, 3)).astype("float32")
    mask = np.array([[True] * 5, [True, True, True, False, False]])
    memory[~mask] = fill
    return memory, mask


@pytest.mark.parametrize("fill", [np.nan, np.inf])
@pytest.mark.parametrize("index", range(len(every_mechanism())))
def test_padded_memory_influences_nothing_in_the_decoder(index, fill):
    decoder = AttentionDecoder(
        keras.layers.LSTMCell(3), attention=every_mechanism()[index], attention_layer_size=4
    )
    x = np.random.default_rng(4).normal(size=(2, 3, 2)).astype("float32")
    clean, _ = padded_memory(0.0)
    dirty, mask = padded_memory(fill)
    want = [
        to_numpy(t) for t in decoder([x, clean], mask=[None, mask], return_attention_scores=True)
    ]
    got = [
        to_numpy(t) for t in decoder([x, dirty], mask=[None, mask], return_attention_scores=True)
    ]
    for g, w in zip(got, want):
        assert np.all(np.isfinite(g))
        np.testing.assert_array_equal(g, w)
    state = decoder.get_initial_state(ops.convert_to_tensor(dirty), memory_mask=mask)
    output, _, alignments = decoder.step(ops.convert_to_tensor(x[:, 0]), state)
    assert np.all(np.isfinite(to_numpy(output))) and np.all(np.isfinite(to_numpy(alignments)))


@pytest.mark.parametrize("window", [None, 1])
def test_padded_values_influence_nothing_in_sequence_attention(window):
    layer = SequenceAttention("additive", units=4, window=window)
    query = np.ones((2, 4, 3), "float32")
    clean, mask = padded_memory(0.0)
    dirty, _ = padded_memory(np.nan)
    want = layer([query, clean], mask=[None, mask], return_attention_scores=True)
    got = layer([query, dirty], mask=[None, mask], return_attention_scores=True)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(to_numpy(g), to_numpy(w))


def test_padded_steps_influence_nothing_in_pooling():
    layer = AttentionPooling("additive", units=4)
    clean, mask = padded_memory(0.0)
    dirty, _ = padded_memory(np.nan)
    np.testing.assert_array_equal(
        to_numpy(layer(dirty, mask=mask)), to_numpy(layer(clean, mask=mask))
    )


# -- initial weights -------------------------------------------------------------------------


def weight(layer, name):
    (found,) = [w for w in layer.weights if w.path.split("/")[-1] == name]
    return to_numpy(found)


@pytest.mark.parametrize("bias", [-4.0, 0.0, 1.5])
def test_score_bias_starts_at_score_bias_init(bias):
    layer = mechanisms.MonotonicAttention("general", score_bias_init=bias)
    layer.build((None, 3), (None, 5, 3))
    assert weight(layer, "score_bias") == np.float32(bias)


@pytest.mark.parametrize("units", [1, 4, 9])
def test_initial_weights_are_tfas(units):
    """tfa's initial values: normalized Bahdanau gain sqrt(1 / units), biases 0, scales 1."""
    additive = scores.Additive(units=units, normalize=True)
    additive.build_for((None, 1, 3), (None, 5, 2))
    np.testing.assert_allclose(weight(additive, "g"), np.sqrt(1.0 / units), rtol=1e-6)
    np.testing.assert_array_equal(weight(additive, "b"), np.zeros(units))
    general = scores.General(use_scale=True)
    general.build_for((None, 1, 3), (None, 5, 2))
    assert weight(general, "scale") == 1.0


@pytest.mark.parametrize("use_bias", [True, False])
def test_coverage_attention_weights_and_the_score_without_bias(use_bias):
    """The documented shapes (`coverage_kernel` one weight per unit, not one scalar), b = 0 at
    first and absent without use_bias, where the score has no b."""
    layer = mechanisms.CoverageAttention(4, use_bias=use_bias)
    layer.build((None, 3), (None, 5, 2))
    shapes = {w.path.split("/")[-1]: tuple(w.shape) for w in layer.weights}
    expected = {"query_kernel": (3, 4), "key_kernel": (2, 4), "coverage_kernel": (4,), "v": (4,)}
    assert shapes == ({**expected, "b": (4,)} if use_bias else expected)
    if use_bias:
        np.testing.assert_array_equal(weight(layer, "b"), np.zeros(4))
    rng = np.random.default_rng(0)
    memory = rng.normal(size=(2, 5, 2)).astype("float32")
    query = rng.normal(size=(2, 3)).astype("float32")
    coverage = rng.random((2, 5)).astype("float32")
    alignments, _ = layer.call(
        ops.convert_to_tensor(query),
        layer.prepare_keys(ops.convert_to_tensor(memory)),
        ops.convert_to_tensor(memory),
        None,
        {"coverage": ops.convert_to_tensor(coverage)},
    )
    hidden = np.tanh(
        (query @ weight(layer, "query_kernel"))[:, None]
        + memory @ weight(layer, "key_kernel")
        + coverage[..., None] * weight(layer, "coverage_kernel")
        + (weight(layer, "b") if use_bias else 0.0)
    )
    scores_ = hidden @ weight(layer, "v")
    expected_weights = np.exp(scores_ - scores_.max(-1, keepdims=True))
    expected_weights /= expected_weights.sum(-1, keepdims=True)
    np.testing.assert_allclose(to_numpy(alignments), expected_weights, atol=1e-6)


@pytest.mark.parametrize("use_bias", [True, False])
def test_location_sensitive_weights_and_the_keys_without_bias(use_bias):
    """The documented shapes, b = 0 at first and one per unit; without use_bias no b, and the
    prepared keys are the key projection alone."""
    layer = mechanisms.LocationSensitiveAttention(4, filters=2, kernel_size=3, use_bias=use_bias)
    layer.build((None, 3), (None, 5, 2))
    shapes = {w.path.split("/")[-1]: tuple(w.shape) for w in layer.weights}
    expected = {
        "query_kernel": (3, 4),
        "key_kernel": (2, 4),
        "location_kernel": (3, 2, 2),
        "location_projection": (2, 4),
        "v": (4,),
    }
    assert shapes == ({**expected, "b": (4,)} if use_bias else expected)
    if use_bias:
        np.testing.assert_array_equal(weight(layer, "b"), np.zeros(4))
        layer.b.assign(np.arange(1.0, 5.0, dtype="float32"))
    memory = np.random.default_rng(0).normal(size=(2, 5, 2)).astype("float32")
    keys = to_numpy(layer.prepare_keys(ops.convert_to_tensor(memory)))
    projected = memory @ weight(layer, "key_kernel")
    bias = np.arange(1.0, 5.0) if use_bias else 0.0
    np.testing.assert_allclose(keys, projected + bias, atol=1e-5)


@pytest.mark.parametrize(
    "row, span",
    [
        ([1, 1, 1, 0, 0], (0, 3)),  # right padding
        ([0, 0, 1, 1, 1], (2, 3)),  # left padding
        ([0, 1, 0, 1, 0], (1, 3)),  # holes: first to last real position
        ([1, 1, 1, 1, 1], (0, 5)),
        ([0, 0, 0, 0, 0], (0, 0)),  # no real position
    ],
)
def test_unmasked_span_per_row(row, span):
    """Each row's first real position and the span to its last, whatever the other rows are."""
    others = [[1, 1, 1, 1, 1], [0, 0, 0, 0, 0]]
    mask = ops.convert_to_tensor(np.array([row] + others, bool))
    start, length = local_predictive_attention.unmasked_span(mask)
    np.testing.assert_array_equal(to_numpy(start), [span[0], 0, 0])
    np.testing.assert_array_equal(to_numpy(length), [span[1], 5, 0])


# -- coverage loss ---------------------------------------------------------------------------


def test_coverage_loss_averages_over_real_steps_only():
    # row 0: two real steps, then two padded (all-zero) ones; row 1: four real steps
    real = [[0.5, 0.5, 0.0], [0.5, 0.25, 0.25]]
    alignments = np.array(
        [real + [[0.0] * 3] * 2, real + [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]], "float32"
    )
    coverage = np.cumsum(alignments, 1) - alignments
    per_step = np.minimum(alignments, coverage).sum(-1)
    expected = [per_step[0, :2].mean(), per_step[1].mean()]
    np.testing.assert_allclose(to_numpy(losses.coverage_loss(alignments)), expected, rtol=1e-6)
    assert expected[0] != per_step[0].mean()  # the test tells the two averages apart


def test_the_mechanism_registry_names_every_mechanism():
    """Every mechanism class the package exports has one registered name (the registry, not a
    list here, is what the runner and the contract suite read)."""
    exported = exported_subclasses(mechanisms, mechanisms.Mechanism)
    registered = [mechanisms.class_for(name) for name in mechanisms.names()]
    assert exported and exported <= set(registered)
    for name in mechanisms.names():
        assert issubclass(mechanisms.class_for(name), mechanisms.Mechanism)
        assert mechanisms.REGISTRY.name_of(mechanisms.class_for(name)) == name


def test_a_built_mechanism_serializes_without_its_build_config():
    """The owning decoder builds its mechanisms; a build config in theirs would make Keras
    build them again, with shapes of its own, when the decoder is loaded."""
    layer = mechanisms.CoverageAttention(4)
    layer.build((None, 3), (None, 5, 2))
    assert "build_config" in keras.saving.serialize_keras_object(layer)
    config = mechanisms.serialize(layer)
    assert "build_config" not in config
    assert isinstance(mechanisms.get(config), mechanisms.CoverageAttention)


def test_half_precision_scores_that_overflowed_still_normalize():
    """float16 scores overflow to inf under mixed precision: clipped to float16's range, the
    weights stay finite and the overflowed position takes the mass."""
    scores_ = ops.convert_to_tensor(np.array([[np.inf, 0.0, -np.inf]], "float16"))
    weights = to_numpy(mechanisms.Mechanism().normalize(scores_, None)).astype("float64")
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights, [[1.0, 0.0, 0.0]], atol=1e-3)
