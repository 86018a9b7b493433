"""The one step API (`keras_attn_rnn.stepping`): its parts against the layers they step, and
the ready models against the generators built from their own layers (the same step code,
so the same numbers)."""

import keras
import numpy as np
import pytest

from keras_attn_rnn import AttentionDecoder, SequenceAttention, mechanisms, models
from keras_attn_rnn.generators import CausalLMGenerator, Seq2SeqGenerator
from keras_attn_rnn.stepping import (
    AttentionDecoderStep,
    CausalAttentionStep,
    DecoderStep,
    _ops,
    causal_attention_step,
)

pytestmark = pytest.mark.layers


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_with_start_last_valid_and_pad_time():
    prompts = np.array([[3, 4, 0], [5, 0, 0]], "int32")
    np.testing.assert_array_equal(_numpy(causal_attention_step.with_start(prompts, None)), prompts)
    np.testing.assert_array_equal(
        _numpy(causal_attention_step.with_start(prompts, 1)), [[1, 3, 4, 0], [1, 5, 0, 0]]
    )
    sequence = np.arange(2 * 3 * 2, dtype="float32").reshape(2, 3, 2)
    last = causal_attention_step.last_valid(sequence, np.array([2, 3]))
    np.testing.assert_array_equal(_numpy(last), [sequence[0, 1], sequence[1, 2]])
    padded = _numpy(causal_attention_step.pad_time(sequence, 2))
    assert padded.shape == (2, 5, 2)
    np.testing.assert_array_equal(padded[:, :3], sequence)
    assert np.all(padded[:, 3:] == 0.0)
    assert causal_attention_step.pad_time(sequence, 0) is sequence


@pytest.mark.parametrize("kind", [keras.layers.LSTM, keras.layers.GRU, keras.layers.SimpleRNN])
def test_run_cell_and_cell_step_give_the_layer_s_outputs_and_last_real_states(kind):
    layer = kind(5, return_sequences=True, return_state=True)
    x = keras.ops.convert_to_tensor(np.random.default_rng(0).normal(size=(2, 4, 3)), "float32")
    mask = keras.ops.convert_to_tensor([[True] * 4, [True, True, False, False]])
    outputs, *states = layer(x, mask=mask)
    ran, final = _ops.run_cell(layer.cell, x, mask)
    np.testing.assert_allclose(_numpy(ran)[0], _numpy(outputs)[0], atol=1e-6)
    np.testing.assert_allclose(_numpy(ran)[1, :2], _numpy(outputs)[1, :2], atol=1e-6)
    assert len(final) == len(states)
    for got, want in zip(final, states):
        np.testing.assert_allclose(_numpy(got), _numpy(want), atol=1e-6)
    # one more step from the final states is the layer over one more token
    more = keras.ops.concatenate([x, x[:, :1]], axis=1)
    longer, *_ = layer(more)
    output, new_states = _ops.cell_step(layer.cell, x[:1, 0], [s[:1] for s in final])
    np.testing.assert_allclose(_numpy(output), _numpy(longer)[:1, 4], atol=1e-6)
    assert isinstance(new_states, list) and len(new_states) == len(states)


def test_embed_token_reads_ids_as_int32_and_attaches_no_mask():
    embedding = keras.layers.Embedding(7, 3, mask_zero=True)
    embedding.build((None,))
    y = _ops.embed_token(embedding, np.array([0, 4], "int64"))
    np.testing.assert_array_equal(_numpy(y), _numpy(embedding.embeddings)[[0, 4]])
    assert getattr(y, "_keras_mask", None) is None


def _lm_parts():
    keras.utils.set_random_seed(3)
    embedding = keras.layers.Embedding(11, 4, mask_zero=True)
    rnns = [keras.layers.LSTM(6, return_sequences=True), keras.layers.GRU(5, return_sequences=True)]
    attention = SequenceAttention(score="general")
    head = keras.layers.Dense(11)
    tokens = keras.Input((None,), dtype="int32")
    h = embedding(tokens)
    for rnn in rnns:
        h = rnn(h)
    context = attention([h, h], use_causal_mask=True)
    model = keras.Model(tokens, head(keras.layers.Concatenate()([h, context])))
    return model, embedding, rnns, attention, head


def test_causal_attention_step_equals_the_model_on_the_whole_prefix():
    model, embedding, rnns, attention, head = _lm_parts()
    step = CausalAttentionStep(
        embedding,
        [rnn.cell for rnn in rnns],
        attention,
        lambda h, c: head(keras.ops.concatenate([h, c], axis=-1)),
    )
    tokens = np.array([[3, 4, 5, 6, 7], [8, 9, 2, 3, 4]], "int32")
    mask = keras.ops.ones((2, 2), "bool")
    h = embedding(tokens[:, :2])
    states = []
    for rnn in rnns:
        h, layer_states = _ops.run_cell(rnn.cell, h, mask)
        states.append(layer_states)
    logits, weights, cache = step.start(h, mask, states, max_length=3)
    whole = _numpy(model(tokens))
    assert _numpy(weights).shape == (2, 5)
    np.testing.assert_allclose(_numpy(logits), whole[:, 1], atol=1e-5)
    for t in range(2, 5):
        logits, weights, cache = step.next_logits(tokens[:, t], cache)
        np.testing.assert_allclose(_numpy(logits), whole[:, t], atol=1e-5)
        # position t attends over the t + 1 tokens so far, never the spare cache
        np.testing.assert_allclose(_numpy(weights)[:, : t + 1].sum(-1), 1.0, atol=1e-5)
        assert np.all(_numpy(weights)[:, t + 1 :] == 0.0)


def test_decoder_step_equals_the_attention_decoder_over_the_whole_target():
    keras.utils.set_random_seed(4)
    monotonic = mechanisms.class_for("monotonic")(units=5)
    decoder = AttentionDecoder(keras.layers.GRUCell(6), attention=monotonic)
    embedding = keras.layers.Embedding(9, 3, mask_zero=True)
    head = keras.layers.Dense(9)
    memory = np.random.default_rng(1).normal(size=(2, 4, 6)).astype("float32")
    memory_mask = np.array([[True] * 4, [True, True, True, False]])
    target_in = np.array([[1, 5, 6], [1, 7, 2]], "int32")
    outputs, alignments = decoder(
        [embedding(target_in), memory], mask=[None, memory_mask], return_attention_scores=True
    )
    step = DecoderStep(embedding, AttentionDecoderStep(decoder), lambda s: head(s.output))
    logits, step_alignments, cache = step.start(memory, memory_mask, None, start_id=1)
    # monotonic attention starts one-hot at 0, where beam search's coverage starts
    np.testing.assert_array_equal(_numpy(cache["initial_alignments"]), [[1, 0, 0, 0]] * 2)
    for t in range(3):
        if t:
            logits, step_alignments, cache = step.next_logits(target_in[:, t], cache)
        np.testing.assert_allclose(_numpy(logits), _numpy(head(outputs[:, t])), atol=1e-5)
        np.testing.assert_allclose(_numpy(step_alignments), _numpy(alignments)[:, t], atol=1e-5)
        assert np.all(_numpy(step_alignments)[1, 3] == 0.0)


class _Encode(keras.layers.Layer):
    """A ready `Seq2Seq`'s encoder as a generator's: source -> `[memory, *states]`."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def call(self, source):
        memory, _, states = self.model.encode(source, training=False)
        return [memory, *states]


def _same_steps(first, second, prompts, tokens, atol, start_id):
    """Both models' logits and weights from init_cache, then from next_logits on each of
    `tokens`' columns, agree within `atol`."""
    steps = tokens.shape[1]
    a = first.init_cache(prompts, steps, start_id=start_id)
    b = second.init_cache(prompts, steps, start_id=start_id)
    for t in range(steps + 1):
        for x, y in zip(a[:2], b[:2]):
            np.testing.assert_allclose(_numpy(x), _numpy(y), rtol=0, atol=atol)
        if t < steps:
            a = first.next_logits(tokens[:, t], a[2])
            b = second.next_logits(tokens[:, t], b[2])


def test_a_ready_lm_and_a_generator_over_its_layers_step_alike():
    keras.utils.set_random_seed(5)
    model = models.AttentiveLanguageModel(
        vocabulary_size=13,
        embedding_dim=4,
        units=6,
        rnn="gru",
        num_layers=2,
        attention={"window": 2},
    )
    prompts = np.array([[3, 4, 5], [6, 0, 0]], "int32")
    model(prompts)
    encoder = model.encoder
    generator = CausalLMGenerator(
        encoder.embedding,
        encoder.rnn_layers,
        model.self_attention,
        [model.attention_layer, model.output_layer],
    )
    # the generator runs the prompts cell by cell, the model through its RNN layers
    _same_steps(model, generator, prompts, np.array([[7, 8], [9, 10]], "int32"), 1e-6, 1)


@pytest.mark.parametrize("mechanism", ["content", "location"])
def test_a_ready_seq2seq_and_a_generator_over_its_layers_step_alike(mechanism):
    keras.utils.set_random_seed(6)
    model = models.Seq2Seq(
        source_vocabulary_size=12,
        target_vocabulary_size=10,
        embedding_dim=4,
        units=6,
        attention={"mechanism": mechanism},
    )
    source = np.array([[3, 4, 5, 6], [7, 8, 0, 0]], "int32")
    model([source, source])
    encoder = _Encode(model)
    encoder(source)
    generator = Seq2SeqGenerator(
        encoder, model.target_embedding, model.attention_decoder, model.output_layer, 12
    )
    _same_steps(model, generator, source, np.array([[5, 6], [7, 2]], "int32"), 0.0, 1)
