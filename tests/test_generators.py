"""`Seq2SeqGenerator` and `CausalLMGenerator` decode a user's own models exactly as re-running
the whole model on the growing prefix would (greedy), with ragged prompts, on every backend."""

import keras
import numpy as np
import pytest

from keras_attn_rnn import AttentionDecoder, SequenceAttention, mechanisms, samplers
from keras_attn_rnn.generation import generate
from keras_attn_rnn.generators import CausalLMGenerator, Seq2SeqGenerator

pytestmark = pytest.mark.layers

SOURCE_VOCAB, TARGET_VOCAB, LM_VOCAB = 17, 13, 19


def _nmt(attention=None):
    """A functional Bahdanau NMT model, its inference encoder and its layers."""
    keras.utils.set_random_seed(3)
    src = keras.Input((None,), dtype="int32", name="source")
    tin = keras.Input((None,), dtype="int32", name="target_in")
    memory, h, c = keras.layers.LSTM(12, return_sequences=True, return_state=True)(
        keras.layers.Embedding(SOURCE_VOCAB, 6, mask_zero=True)(src)
    )
    embed_target = keras.layers.Embedding(TARGET_VOCAB, 6, mask_zero=True)
    options = {"attention": attention} if attention else {"score": "general"}
    decoder = AttentionDecoder(keras.layers.LSTMCell(12), attention_layer_size=10, **options)
    head = [keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(TARGET_VOCAB)]
    outputs = decoder([embed_target(tin), memory], initial_state=[h, c])
    logits = head[1](head[0](outputs))
    model = keras.Model([src, tin], logits)
    encoder = keras.Model(src, [memory, h, c])
    return model, Seq2SeqGenerator(encoder, embed_target, decoder, head)


class _SubclassedLM(keras.Model):
    """A user's subclassed LM: two stacked RNNs, causal attention, a two-layer head."""

    def __init__(self):
        super().__init__()
        self.embedding = keras.layers.Embedding(LM_VOCAB, 6, mask_zero=True)
        self.rnns = [
            keras.layers.LSTM(10, return_sequences=True),
            keras.layers.GRU(8, return_sequences=True),
        ]
        self.attention = SequenceAttention(score="additive", units=6)
        self.head = [keras.layers.Dense(12, activation="tanh"), keras.layers.Dense(LM_VOCAB)]

    def call(self, tokens):
        mask = keras.ops.not_equal(tokens, 0)
        h = self.embedding(tokens)
        for rnn in self.rnns:
            h = rnn(h, mask=mask)
        context = self.attention([h, h], mask=[mask, mask], use_causal_mask=True)
        x = keras.ops.concatenate([h, context], axis=-1)
        for layer in self.head:
            x = layer(x)
        return x


def _next_id(logits):
    """Greedy's choice: the best id, padding (0) excluded."""
    logits = np.array(logits, dtype="float64")
    logits[0] = -np.inf
    return int(np.argmax(logits))


def _rerun_seq2seq(model, source_row, length, start_id):
    target = [start_id]
    for _ in range(length):
        logits = model([np.array([source_row]), np.array([target])], training=False)
        target.append(_next_id(keras.ops.convert_to_numpy(logits)[0, -1]))
    return target[1:]


def _rerun_lm(model, prompt, length):
    tokens = list(prompt)
    for _ in range(length):
        logits = model(np.array([tokens]), training=False)
        tokens.append(_next_id(keras.ops.convert_to_numpy(logits)[0, -1]))
    return tokens[len(prompt) :]


def test_seq2seq_generator_equals_rerunning_the_model_on_ragged_sources():
    model, generator = _nmt()
    sources = [[3, 4, 5, 6, 7], [8, 9], [10, 11, 12]]
    result = generator.generate(sources, 6, start_id=1)
    assert result.tokens.shape == (3, 6) and result.attention.shape == (3, 6, 5)
    for row, source in enumerate(sources):
        assert result.tokens[row].tolist() == _rerun_seq2seq(model, source, 6, start_id=1)
        # padded source positions get exactly zero attention
        assert np.all(result.attention[row, :, len(source) :] == 0.0)
    np.testing.assert_allclose(result.attention.sum(-1), 1.0, atol=1e-5)


def test_seq2seq_generator_beam_of_width_one_is_greedy_and_wider_beams_score_no_worse():
    _, generator = _nmt(attention=mechanisms.LocationSensitiveAttention(8, filters=4))
    sources = [[3, 4, 5, 6], [8, 9, 10]]
    greedy = generator.generate(sources, 5, start_id=1)
    narrow = generate(
        generator,
        sources,
        5,
        start_id=1,
        sampler=samplers.get("beam", beam_width=1, length_penalty=0),
    )
    wide = generate(
        generator,
        sources,
        5,
        start_id=1,
        sampler=samplers.get("beam", beam_width=4, length_penalty=0),
    )
    np.testing.assert_array_equal(narrow.tokens, greedy.tokens)
    np.testing.assert_allclose(narrow.scores, greedy.scores, atol=1e-5)
    assert np.all(wide.scores >= narrow.scores - 1e-5)


def test_causal_lm_generator_equals_rerunning_the_model_on_ragged_prompts():
    keras.utils.set_random_seed(5)
    model = _SubclassedLM()
    model(np.ones((1, 3), "int32"))
    generator = CausalLMGenerator(model.embedding, model.rnns, model.attention, model.head)
    prompts = [[3, 4, 5, 6], [7], [8, 9]]
    result = generator.generate(prompts, 5)
    assert result.tokens.shape == (3, 5)
    for row, prompt in enumerate(prompts):
        assert result.tokens[row].tolist() == _rerun_lm(model, prompt, 5)
    # each row's weights cover only its own prompt and what it generated
    for row, prompt in enumerate(prompts):
        for step in range(5):
            seen = len(prompt) + step
            assert np.all(result.attention[row, step, seen:] == 0.0)
            np.testing.assert_allclose(result.attention[row, step, :seen].sum(), 1.0, atol=1e-5)


def test_a_functional_lm_with_a_start_id_and_sampling_is_reproducible():
    keras.utils.set_random_seed(7)
    tokens = keras.Input((None,), dtype="int32")
    embedding = keras.layers.Embedding(LM_VOCAB, 6, mask_zero=True)
    rnn = keras.layers.SimpleRNN(8, return_sequences=True)
    attention = SequenceAttention(score="dot", window=2)
    head = keras.layers.Dense(LM_VOCAB)
    h = rnn(embedding(tokens))
    context = attention([h, h], use_causal_mask=True)
    model = keras.Model(tokens, head(keras.layers.Concatenate()([h, context])))
    generator = CausalLMGenerator(embedding, rnn, attention, head)
    greedy = generator.generate([[4, 5], [6]], 4, start_id=1)
    for row, prompt in enumerate([[4, 5], [6]]):
        assert greedy.tokens[row].tolist() == _rerun_lm(model, [1, *prompt], 4)
    first = generator.generate([[4, 5], [6]], 4, seed=11, sampler=samplers.get("top_k", k=4))
    again = generator.generate([[4, 5], [6]], 4, seed=11, sampler=samplers.get("top_k", k=4))
    np.testing.assert_array_equal(first.tokens, again.tokens)


def test_generators_refuse_wrong_parts_before_any_work():
    _, generator = _nmt()
    embedding, head = generator.target_embedding, generator.head
    with pytest.raises(ValueError, match="decoder must be a keras_attn_rnn.AttentionDecoder"):
        Seq2SeqGenerator(generator.encoder, embedding, keras.layers.LSTMCell(4), head)
    with pytest.raises(ValueError, match="encoder must be a Keras layer or model"):
        Seq2SeqGenerator(lambda s: s, embedding, generator.decoder, head)
    with pytest.raises(ValueError, match="head must be a layer or a non-empty list"):
        Seq2SeqGenerator(generator.encoder, embedding, generator.decoder, [])
    with pytest.raises(ValueError, match="needs start_id"):
        generator.init_cache(np.ones((1, 3), "int32"))
    bidirectional = keras.layers.Bidirectional(keras.layers.LSTM(4, return_sequences=True))
    attention = SequenceAttention()
    with pytest.raises(ValueError, match="rnn must be one-directional RNN layers"):
        CausalLMGenerator(embedding, bidirectional, attention, keras.layers.Dense(3))
    with pytest.raises(ValueError, match="return_sequences=True"):
        CausalLMGenerator(embedding, keras.layers.GRU(4), attention, keras.layers.Dense(3))
    unbuilt = CausalLMGenerator(
        keras.layers.Embedding(9, 4),
        keras.layers.GRU(4, return_sequences=True),
        attention,
        keras.layers.Dense(9),
    )
    with pytest.raises(ValueError, match="embedding is not built"):
        unbuilt.generate([[1, 2]], 3)
    with pytest.raises(ValueError, match="target_vocabulary_size must be an integer >= 2"):
        Seq2SeqGenerator(
            generator.encoder, embedding, generator.decoder, head, target_vocabulary_size=0
        )


def _words(vocabulary_size):
    """A word tokenizer of exactly `vocabulary_size` ids (specials included)."""
    from keras_attn_rnn import tokenizers

    return tokenizers.WordTokenizer([f"w{i}" for i in range(vocabulary_size - 4)])


def test_generators_with_a_preprocessor_take_and_give_strings():
    """Your own model through its preprocessor: source strings in, the strings of the ids
    generation gives out; a language model returns each prompt with its continuation."""
    from keras_attn_rnn import preprocessors

    model, plain = _nmt()
    source_words, target_words = _words(SOURCE_VOCAB), _words(TARGET_VOCAB)
    preprocessor = preprocessors.Seq2SeqPreprocessor(
        source_words, target_words, target_sequence_length=5
    )
    translator = Seq2SeqGenerator(
        plain.encoder, plain.target_embedding, plain.decoder, plain.head, preprocessor=preprocessor
    )
    sources = ["w1 w2 w3", "w4 w5"]
    texts = translator.generate(sources, sampler="greedy")
    ids = generate(plain, preprocessor(sources), 6, start_id=1, eos_id=2).tokens
    assert texts == target_words.decode_batch(ids)
    assert translator.generate("w1 w2 w3") == texts[0]

    embedding = keras.layers.Embedding(LM_VOCAB, 6, mask_zero=True)
    rnn = keras.layers.GRU(8, return_sequences=True)
    attention = SequenceAttention(score="general")
    head = keras.layers.Dense(LM_VOCAB)
    tokens = keras.Input((None,), dtype="int32")
    hidden = rnn(embedding(tokens))
    keras.Model(tokens, head(keras.layers.Concatenate()([hidden, attention([hidden, hidden])])))
    lm_words = _words(LM_VOCAB)
    writer = CausalLMGenerator(
        embedding, rnn, attention, head, preprocessor=preprocessors.CausalLMPreprocessor(lm_words)
    )
    continued = writer.generate(["w3 w4", "w7"], max_length=3)
    assert continued[0].startswith("w3 w4") and continued[1].startswith("w7")
    with pytest.raises(ValueError, match=r"takes strings only with a preprocessor"):
        plain.generate(["w1"], 3)
    with pytest.raises(ValueError, match=r"preprocessor must be a .*Seq2SeqPreprocessor"):
        Seq2SeqGenerator(
            plain.encoder,
            plain.target_embedding,
            plain.decoder,
            plain.head,
            preprocessor=preprocessors.CausalLMPreprocessor(lm_words),
        )


def _keras_nmt(attention):
    """A translator of Keras's own layers only: LSTM encoder and decoder, `attention` of the
    decoder's outputs over the encoder's, a head on `[h; context]`."""
    keras.utils.set_random_seed(5)
    src = keras.Input((None,), dtype="int32")
    tin = keras.Input((None,), dtype="int32")
    memory, h, c = keras.layers.LSTM(12, return_sequences=True, return_state=True)(
        keras.layers.Embedding(SOURCE_VOCAB, 6, mask_zero=True)(src)
    )
    embed_target = keras.layers.Embedding(TARGET_VOCAB, 6, mask_zero=True)
    decoder_rnn = keras.layers.LSTM(12, return_sequences=True)
    hidden = decoder_rnn(embed_target(tin), initial_state=[h, c])
    head = [keras.layers.Dense(10, activation="tanh"), keras.layers.Dense(TARGET_VOCAB)]
    both = keras.layers.Concatenate()([hidden, attention([hidden, memory])])
    model = keras.Model([src, tin], head[1](head[0](both)))
    encoder = keras.Model(src, [memory, h, c])
    from keras_attn_rnn.generators import KerasAttentionGenerator

    return model, KerasAttentionGenerator(encoder, embed_target, decoder_rnn, attention, head)


@pytest.mark.parametrize(
    "attention",
    [lambda: keras.layers.Attention(), lambda: keras.layers.AdditiveAttention()],
    ids=["Attention", "AdditiveAttention"],
)
def test_a_plain_keras_model_generates_as_rerunning_it_does(attention):
    """Greedy decoding of a model of Keras's own layers, one cell step and one attention
    read per token, gives the tokens of re-running the whole model on the growing prefix;
    the alignments are the attention layer's scores over the (masked) source."""
    model, generator = _keras_nmt(attention())
    sources = [[3, 4, 5, 6], [7, 8]]
    result = generate(generator, sources, 5, start_id=1)
    for b, source in enumerate(sources):
        assert result.tokens[b].tolist() == _rerun_seq2seq(model, np.array(source), 5, 1)
        np.testing.assert_allclose(result.attention[b].sum(-1), 1.0, atol=1e-5)
        assert np.all(result.attention[b, :, len(source) :] == 0)  # padding never attended
    beam = generate(generator, sources, 5, start_id=1, sampler=samplers.BeamSampler(1))
    np.testing.assert_array_equal(beam.tokens, result.tokens)
