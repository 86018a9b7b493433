"""AttentionDecoder: step API, masking, training, compilation, serialization, errors."""

import keras
import numpy as np
import pytest
from helpers import assert_config_round_trip, save_and_reload_in_subprocess, to_numpy
from keras import ops
from keras.backend import standardize_dtype

from keras_attn_rnn import AttentionDecoder, _compilation, scores

pytestmark = pytest.mark.layers

B, T, S, D_IN, D_MEM, UNITS = 3, 4, 5, 3, 6, 4
EXACT = 1e-6  # same maths in another order of floating-point operations
ATOL = 1e-5


def data(seed=0, batch=B, steps=T, length=S):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, steps, D_IN)).astype("float32")
    memory = rng.normal(size=(batch, length, D_MEM)).astype("float32")
    return x, memory


def lengths_mask(lengths, size):
    return np.arange(size)[None, :] < np.asarray(lengths)[:, None]


MEMORY_MASK = lengths_mask([5, 1, 3], S)


@keras.saving.register_keras_serializable(package="keras_attn_rnn_tests")
class MinimalCell(keras.layers.Layer):
    """A user cell following Keras's contract (state_size, output_size, call)."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = units
        self.output_size = units

    def build(self, input_shape):
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], self.units))
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(self.units, self.units)
        )

    def call(self, inputs, states):
        h = ops.tanh(ops.matmul(inputs, self.kernel) + ops.matmul(states[0], self.recurrent_kernel))
        return h, [h]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


CELLS = {
    "lstm": lambda: keras.layers.LSTMCell(UNITS),
    "gru": lambda: keras.layers.GRUCell(UNITS),
    "gru_reset_before": lambda: keras.layers.GRUCell(UNITS, reset_after=False),
    "simple_rnn": lambda: keras.layers.SimpleRNNCell(UNITS),
    "stacked": lambda: keras.layers.StackedRNNCells(
        [keras.layers.LSTMCell(UNITS), keras.layers.GRUCell(UNITS)]
    ),
    "lstm_dropout": lambda: keras.layers.LSTMCell(UNITS, dropout=0.3, recurrent_dropout=0.3),
    "user_cell": lambda: MinimalCell(UNITS),
}


def randomize(layer, seed=1, scale=0.6):
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0.0, scale, w.shape).astype("float32"))


def built_decoder(cell="lstm", seed=1, **kwargs):
    kwargs.setdefault("attention_layer_size", 7)
    decoder = AttentionDecoder(CELLS[cell](), **kwargs)
    decoder.build([(None, None, D_IN), (None, None, D_MEM)])
    randomize(decoder, seed)
    return decoder


def random_state(decoder, seed=2):
    rng = np.random.default_rng(seed)
    sizes = keras.tree.flatten(decoder.cell.state_size)
    return [rng.normal(size=(B, n)).astype("float32") for n in sizes]


def run_steps(decoder, x, memory, memory_mask=None, cell_state=None):
    state = decoder.get_initial_state(memory, memory_mask=memory_mask, cell_state=cell_state)
    outputs, alignments = [], []
    for t in range(x.shape[1]):
        output, state, weights = decoder.step(ops.convert_to_tensor(x[:, t]), state)
        outputs.append(to_numpy(output))
        alignments.append(to_numpy(weights))
    return np.stack(outputs, 1), np.stack(alignments, 1), state


# -- shapes and structure ------------------------------------------------------------------


def test_weights_are_named_after_their_role():
    decoder = built_decoder(score=scores.Additive(units=5, normalize=True))
    names = {"/".join(w.path.split("/")[-2:]) for w in decoder.weights}
    assert names == {
        "lstm_cell/kernel",
        "lstm_cell/recurrent_kernel",
        "lstm_cell/bias",
        "score/query_kernel",
        "score/key_kernel",
        "score/v",
        "score/g",
        "score/b",
        "attention_layer/kernel",
    }
    assert decoder.attention_layer.bias is None


# -- step API ------------------------------------------------------------------------------


STEP_CASES = [(cell, True) for cell in sorted(CELLS)] + [("lstm", False), ("user_cell", False)]


@pytest.mark.parametrize(
    "cell,masked", STEP_CASES, ids=[f"{c}-{'mask' if m else 'no_mask'}" for c, m in STEP_CASES]
)
def test_steps_reproduce_the_full_call(cell, masked):
    x, memory = data()
    decoder = built_decoder(cell, return_state=True)
    memory_mask = MEMORY_MASK if masked else None
    initial = random_state(decoder)
    outputs, *states, attention, alignments = decoder(
        [x, memory], mask=[None, memory_mask], initial_state=initial, return_attention_scores=True
    )
    assert tuple(outputs.shape) == (B, T, 7) and tuple(attention.shape) == (B, 7)
    assert tuple(alignments.shape) == (B, T, S) and standardize_dtype(alignments.dtype) == "float32"
    assert [tuple(s.shape) for s in states] == [
        (B, n) for n in keras.tree.flatten(decoder.cell.state_size)
    ]
    np.testing.assert_allclose(to_numpy(alignments).sum(-1), 1.0, atol=1e-6)
    step_outputs, step_alignments, state = run_steps(decoder, x, memory, memory_mask, initial)
    np.testing.assert_allclose(step_outputs, to_numpy(outputs), atol=EXACT, rtol=0)
    np.testing.assert_allclose(step_alignments, to_numpy(alignments), atol=EXACT, rtol=0)
    np.testing.assert_allclose(to_numpy(state["attention"]), to_numpy(attention), atol=EXACT)
    flat = keras.tree.flatten(state["cell_state"])
    for a, b in zip(flat, states, strict=True):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), atol=EXACT, rtol=0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"input_feeding": False},
        {"output_attention": False},
        {"attention_layer_size": None, "score": "general"},
    ],
    ids=["no_input_feeding", "cell_output", "luong_no_attention_layer"],
)
def test_steps_reproduce_the_full_call_variants(kwargs):
    x, memory = data()
    decoder = built_decoder("gru", **kwargs)
    outputs, alignments = decoder(
        [x, memory], mask=[None, MEMORY_MASK], return_attention_scores=True
    )
    step_outputs, step_alignments, _ = run_steps(decoder, x, memory, MEMORY_MASK)
    np.testing.assert_allclose(step_outputs, to_numpy(outputs), atol=EXACT, rtol=0)
    np.testing.assert_allclose(step_alignments, to_numpy(alignments), atol=EXACT, rtol=0)


def test_step_state_is_tileable_and_loops():
    """Beam search repeats every tensor of the state along the batch and loops."""
    x, memory = data()
    decoder = built_decoder("lstm")
    state = decoder.get_initial_state(memory, memory_mask=MEMORY_MASK)
    assert set(state) == {
        "cell_state",
        "attention",
        "attention_state",
        "keys",
        "memory",
        "memory_mask",
    }
    tiled = keras.tree.map_structure(lambda t: ops.repeat(t, 2, axis=0), state)
    x0 = ops.convert_to_tensor(x[:, 0])
    output, _, alignments = decoder.step(x0, state)
    tiled_output, tiled_state, _ = decoder.step(ops.repeat(x0, 2, axis=0), tiled)
    np.testing.assert_allclose(
        to_numpy(tiled_output), np.repeat(to_numpy(output), 2, axis=0), atol=EXACT
    )
    assert keras.tree.map_structure(lambda t: tuple(t.shape), tiled_state) == (
        keras.tree.map_structure(lambda t: tuple(t.shape), tiled)
    )

    def body(t, state, total):
        output, state, _ = decoder.step(ops.take(ops.convert_to_tensor(x), t, axis=1), state)
        return t + 1, state, total + ops.sum(output)

    _, _, total = ops.while_loop(lambda t, *_: t < T, body, (0, state, 0.0))
    expected, _, _ = run_steps(decoder, x, memory, MEMORY_MASK)
    np.testing.assert_allclose(to_numpy(total), expected.sum(), rtol=1e-5)


@pytest.mark.parametrize("fused", [False, True], ids=["op_by_op", "fused"])
def test_fast_path_equals_calling_the_cell(fused, monkeypatch):
    """LSTMCell / GRUCell maths re-done with hoisted inputs equal the cells' own call, in both
    forms of the LSTM's step: the fed-back attention and `h` through two matmuls (op by op)
    or one against the stacked kernel (under a fusing compiler)."""
    monkeypatch.setattr(_compilation, "fuses_elementwise", lambda: fused)
    x, memory = data()
    for make in (
        lambda: keras.layers.LSTMCell(
            UNITS, activation="relu", recurrent_activation="tanh", use_bias=False
        ),
        lambda: keras.layers.GRUCell(UNITS),
        lambda: keras.layers.GRUCell(UNITS, reset_after=False, use_bias=False),
    ):
        decoder = AttentionDecoder(make(), attention_layer_size=7)
        decoder.build([x.shape, memory.shape])
        randomize(decoder, scale=0.4)
        assert decoder.fast_path in ("lstm", "gru")
        fast = to_numpy(decoder([x, memory], mask=[None, MEMORY_MASK]))
        decoder.fast_path = None  # call the cell itself
        generic = to_numpy(decoder([x, memory], mask=[None, MEMORY_MASK]))
        np.testing.assert_allclose(fast, generic, atol=EXACT, rtol=0)


def test_step_api_needs_a_built_decoder():
    decoder = AttentionDecoder(keras.layers.GRUCell(UNITS))
    with pytest.raises(ValueError, match=r"needs a built AttentionDecoder.*Received: "):
        decoder.get_initial_state(data()[1])


# -- masking -------------------------------------------------------------------------------


def test_padded_memory_gets_exactly_zero_weight():
    x, memory = data()
    mask = lengths_mask([5, 1, 0], S)  # the last row is all padding
    decoder = built_decoder("lstm", return_state=True)
    outputs, *_, alignments = decoder([x, memory], mask=[None, mask], return_attention_scores=True)
    alignments, outputs = to_numpy(alignments), to_numpy(outputs)
    assert np.all(alignments[np.broadcast_to(~mask[:, None], alignments.shape)] == 0.0)
    np.testing.assert_allclose(alignments[:2].sum(-1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(alignments[1, :, 0], 1.0)
    assert np.all(np.isfinite(outputs))
    # what padding holds does not matter
    noisy = np.where(mask[..., None], memory, 1e4).astype("float32")
    np.testing.assert_allclose(
        to_numpy(decoder([x, noisy], mask=[None, mask])[0]), outputs, atol=EXACT
    )


def test_input_mask_carries_the_state():
    """Masked input steps keep the state (as keras.layers.RNN) and output zeros."""
    x, memory = data()
    lengths = [4, 2, 3]
    mask = lengths_mask(lengths, T)
    decoder = built_decoder("gru", return_state=True)
    outputs, h, attention, alignments = (
        to_numpy(t)
        for t in decoder([x, memory], mask=[mask, MEMORY_MASK], return_attention_scores=True)
    )
    for b, n in enumerate(lengths):
        alone = decoder(
            [x[b : b + 1, :n], memory[b : b + 1]],
            mask=[None, MEMORY_MASK[b : b + 1]],
            return_attention_scores=True,
        )
        alone = [to_numpy(t)[0] for t in alone]
        np.testing.assert_allclose(outputs[b, :n], alone[0], atol=EXACT)
        np.testing.assert_allclose(h[b], alone[1], atol=EXACT)
        np.testing.assert_allclose(attention[b], alone[2], atol=EXACT)
        np.testing.assert_allclose(alignments[b, :n], alone[3], atol=EXACT)
        assert np.all(outputs[b, n:] == 0.0) and np.all(alignments[b, n:] == 0.0)
    decoder.return_sequences, decoder.return_state = False, False
    last = to_numpy(decoder([x, memory], mask=[mask, MEMORY_MASK]))
    np.testing.assert_allclose(last, outputs[np.arange(B), np.asarray(lengths) - 1], atol=EXACT)


def test_keras_masks_flow_from_the_encoder():
    source = np.array([[1, 2, 3, 0, 0], [4, 5, 6, 7, 1], [2, 0, 0, 0, 0]])
    target = np.array([[1, 2, 0, 0], [3, 4, 5, 6], [1, 2, 3, 0]])
    src, tgt = keras.Input((None,), dtype="int32"), keras.Input((None,), dtype="int32")
    memory = keras.layers.LSTM(D_MEM, return_sequences=True)(
        keras.layers.Embedding(8, 5, mask_zero=True)(src)
    )
    embedded = keras.layers.Embedding(8, D_IN, mask_zero=True)(tgt)
    decoder = AttentionDecoder(keras.layers.LSTMCell(UNITS), attention_layer_size=7)
    outputs, alignments = decoder([embedded, memory], return_attention_scores=True)
    model = keras.Model([src, tgt], [outputs, alignments, memory, embedded])
    randomize(decoder)
    outputs, alignments, memory, embedded = (to_numpy(t) for t in model([source, target]))
    source_mask, target_mask = source != 0, target != 0
    assert np.all(alignments[np.broadcast_to(~source_mask[:, None], alignments.shape)] == 0.0)
    assert np.all(outputs[~target_mask] == 0.0)
    explicit = decoder([embedded, memory], mask=[target_mask, source_mask])
    np.testing.assert_allclose(outputs, to_numpy(explicit), atol=EXACT)


# -- training and compilation --------------------------------------------------------------


def _tiny_model(seed=3):
    x_in = keras.Input((T, D_IN))
    m_in = keras.Input((S, D_MEM))
    mask_in = keras.Input((S,), dtype="bool")
    h = AttentionDecoder(keras.layers.LSTMCell(UNITS), attention_layer_size=7)(
        [x_in, m_in], mask=[None, mask_in]
    )
    model = keras.Model([x_in, m_in, mask_in], keras.layers.Dense(2)(h))
    randomize(model, seed, scale=0.4)
    return model


# On torch `jit_compile=True` is torch.compile: compiling the decoder's unrolled training
# step took 107 s on 2 CPU cores, so there it is a slow test.
_SLOW_ON_TORCH = [pytest.mark.slow] if keras.backend.backend() == "torch" else []


@pytest.mark.parametrize(
    "jit_compile", [pytest.param(True, marks=_SLOW_ON_TORCH)], ids=["jit_compile"]
)
def test_compiled_training_equals_eager(jit_compile):
    """`jit_compile=True` (XLA on TensorFlow, jax.jit on JAX, torch.compile on torch) trains as
    eager, within 1e-5."""
    x, memory = data()
    y = np.random.default_rng(4).normal(size=(B, T, 2)).astype("float32")
    inputs = [x, memory, MEMORY_MASK]
    results = []
    for mode in ({"jit_compile": jit_compile}, {"run_eagerly": True}):
        model = _tiny_model()
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", **mode)
        losses = [float(model.train_on_batch(inputs, y)) for _ in range(2)]
        results.append(
            (losses, [to_numpy(w) for w in model.weights], model.predict_on_batch(inputs))
        )
    (jit_losses, jit_weights, jit_pred), (eager_losses, eager_weights, eager_pred) = results
    np.testing.assert_allclose(jit_losses, eager_losses, atol=ATOL)
    assert jit_losses[1] < jit_losses[0]
    for a, b in zip(jit_weights, eager_weights, strict=True):
        np.testing.assert_allclose(a, b, atol=ATOL)
    np.testing.assert_allclose(jit_pred, eager_pred, atol=ATOL)


def test_dropout_cell_trains_and_infers():
    x, memory = data()
    decoder = built_decoder("lstm_dropout")
    assert decoder.fast_path is None
    first = to_numpy(decoder([x, memory], training=True))
    second = to_numpy(decoder([x, memory], training=True))
    assert np.all(np.isfinite(first)) and not np.allclose(first, second)
    inference = to_numpy(decoder([x, memory]))
    assert np.all(np.isfinite(inference)) and not np.allclose(first, inference)
    assert decoder.cell._dropout_mask is None  # masks are per call


@pytest.mark.slow
def test_learns_to_reverse_and_aligns_to_the_mirror():
    """Encoder LSTM + AttentionDecoder on `reverse`: >= 95 % tokens, alignment on S-1-t."""
    vocab, length, units, n = 8, 6, 32, 2048
    rng = np.random.default_rng(0)
    source = rng.integers(1, vocab, size=(n, length))
    target = source[:, ::-1]
    target_in = np.concatenate([np.full((n, 1), vocab), target[:, :-1]], axis=1)  # BOS = vocab

    src, tgt = keras.Input((length,), dtype="int32"), keras.Input((length,), dtype="int32")
    memory, h, c = keras.layers.LSTM(units, return_sequences=True, return_state=True)(
        keras.layers.Embedding(vocab, 16)(src)
    )
    decoder = AttentionDecoder(
        keras.layers.LSTMCell(units), score="general", attention_layer_size=units
    )
    outputs, alignments = decoder(
        [keras.layers.Embedding(vocab + 1, 16)(tgt), memory],
        initial_state=[h, c],
        return_attention_scores=True,
    )
    logits = keras.layers.Dense(vocab)(outputs)
    model = keras.Model([src, tgt], logits)
    probe = keras.Model([src, tgt], [logits, alignments])
    model.compile(
        keras.optimizers.Adam(0.01),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit([source, target_in], target, batch_size=64, epochs=6, verbose=0)

    test_source = rng.integers(1, vocab, size=(256, length))
    test_target = test_source[:, ::-1]
    test_in = np.concatenate([np.full((256, 1), vocab), test_target[:, :-1]], axis=1)
    logits, alignments = (to_numpy(t) for t in probe([test_source, test_in]))
    accuracy = np.mean(logits.argmax(-1) == test_target)
    hits = np.mean(alignments.argmax(-1) == (length - 1 - np.arange(length))[None])
    assert accuracy >= 0.95, accuracy
    assert hits >= 0.90, hits


def test_mixed_float16_runs_without_nan():
    keras.config.set_dtype_policy("mixed_float16")
    x, memory = data()
    decoder = AttentionDecoder(CELLS["stacked"](), attention_layer_size=7)  # the cells' own call
    outputs, alignments = decoder(
        [x, memory], mask=[None, lengths_mask([5, 1, 0], S)], return_attention_scores=True
    )
    assert standardize_dtype(outputs.dtype) == "float16"
    assert standardize_dtype(alignments.dtype) == "float32"
    assert np.all(np.isfinite(to_numpy(outputs))) and np.all(np.isfinite(to_numpy(alignments)))
    model = _tiny_model()  # LSTMCell: the fast path
    model.compile(optimizer="sgd", loss="mse")
    loss = model.train_on_batch([x, memory, MEMORY_MASK], np.ones((B, T, 2), "float32"))
    assert np.isfinite(float(loss))
    assert all(np.all(np.isfinite(to_numpy(w))) for w in model.weights)


# -- serialization -------------------------------------------------------------------------


def test_config_round_trip_with_nested_cell_and_score():
    decoder = AttentionDecoder(
        CELLS["stacked"](),
        score=scores.Additive(units=5, normalize=True),
        attention_layer_size=7,
        output_attention=False,
        input_feeding=False,
        return_state=True,
    )
    clone = assert_config_round_trip(decoder)
    assert isinstance(clone.cell, keras.layers.StackedRNNCells)
    assert [type(c).__name__ for c in clone.cell.cells] == ["LSTMCell", "GRUCell"]
    assert clone.score_layer.units == 5 and clone.score_layer.normalize
    assert clone.get_config()["score"]["class_name"] == "Additive"
    assert AttentionDecoder.from_config(AttentionDecoder(CELLS["gru"]()).get_config()).score == (
        "additive"
    )


def test_save_and_load_in_a_fresh_process(tmp_path):
    x_in, m_in = keras.Input((None, D_IN)), keras.Input((None, D_MEM))
    mask_in = keras.Input((None,), dtype="bool")
    decoder = AttentionDecoder(
        CELLS["stacked"](),
        score=scores.Additive(units=5, normalize=True),
        attention_layer_size=7,
        return_state=True,
    )
    outputs, *_, attention, alignments = decoder(
        [x_in, m_in], mask=[None, mask_in], return_attention_scores=True
    )
    model = keras.Model([x_in, m_in, mask_in], [outputs, attention, alignments])
    randomize(model)
    x, memory = data()
    save_and_reload_in_subprocess(model, [x, memory, MEMORY_MASK], str(tmp_path))


# -- errors --------------------------------------------------------------------------------


def test_errors():
    x, memory = data()
    decoder = AttentionDecoder(keras.layers.LSTMCell(UNITS))
    cases = [
        (lambda: decoder([x, memory[:2]]), r"same batch size.*Received: inputs.shape"),
        (lambda: decoder([x, memory[:, 0]]), r"memory must have rank 3.*Received: memory"),
        (lambda: decoder(x), r"memory is missing.*Received: inputs="),
        (lambda: decoder([x]), r"memory is missing.*Received: inputs="),
        (
            lambda: decoder([x, memory], initial_state=[np.zeros((B, UNITS), "float32")]),
            r"initial_state must match the cell's state_size.*Received: initial_state",
        ),
        (
            lambda: decoder([x, memory], initial_state=[np.zeros((B, 5), "float32")] * 2),
            r"initial_state must match.*Received: initial_state",
        ),
        (
            lambda: AttentionDecoder(keras.layers.GRUCell(UNITS), score="dot")([x, memory]),
            r"score='dot' needs the query size to equal 6.*Received: query_shape",
        ),
        (
            lambda: AttentionDecoder(keras.layers.GRUCell(UNITS), score="dott"),
            r"score must be one of.*Received: score='dott'",
        ),
        (
            lambda: AttentionDecoder(keras.layers.GRUCell(UNITS), score="general", units=4),
            r"units is only used by score='additive'.*Received: score='general', units=4",
        ),
        (
            lambda: AttentionDecoder(keras.layers.Dense(3)),
            r"cell must be a Keras RNN cell.*Received: cell=",
        ),
        (
            lambda: AttentionDecoder(keras.layers.GRUCell(UNITS), attention_layer_size=0),
            r"attention_layer_size must be a positive integer.*Received: attention_layer_size=0",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
