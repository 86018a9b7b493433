"""Beam search moves a translator's decoder state with the beams and leaves its encoder
memory, the same for every beam of a source, where it is (`reorder_cache`): the decoding
is exactly that of gathering the whole cache every step, for every decoder, mechanism and
generator, on every backend."""

import keras
import numpy as np
import pytest

from keras_attn_rnn import AttentionDecoder, SequenceAttention, samplers
from keras_attn_rnn.generation import generate
from keras_attn_rnn.generators import KerasAttentionGenerator, Seq2SeqGenerator
from keras_attn_rnn.models import Seq2Seq
from keras_attn_rnn.samplers import beam_sampler
from tools.beam_reorder_speed import GathersAll

pytestmark = pytest.mark.layers

SOURCE_VOCAB, TARGET_VOCAB = 11, 9
SOURCE = np.array([[3, 4, 5, 6, 7], [8, 9, 0, 0, 0], [10, 3, 3, 4, 0]], "int32")
SOURCE_EXT = np.array([[3, 4, 5, 6, 7], [2, 9, 0, 0, 0], [9, 3, 3, 4, 0]], "int32")
TARGET_IN = np.array([[1, 4], [1, 5], [1, 6]], "int32")


def _seq2seq(**kwargs):
    keras.utils.set_random_seed(2)
    model = Seq2Seq(SOURCE_VOCAB, TARGET_VOCAB, embedding_dim=6, units=8, **kwargs)
    model([SOURCE, TARGET_IN] + ([SOURCE_EXT] if kwargs.get("copy") else []))
    return model


def _generator(kind):
    keras.utils.set_random_seed(4)
    src = keras.Input((None,), dtype="int32")
    memory, h, c = keras.layers.LSTM(8, return_sequences=True, return_state=True)(
        keras.layers.Embedding(SOURCE_VOCAB, 6, mask_zero=True)(src)
    )
    encoder = keras.Model(src, [memory, h, c])
    embedding = keras.layers.Embedding(TARGET_VOCAB, 6, mask_zero=True)
    head = [keras.layers.Dense(TARGET_VOCAB)]
    if kind == "seq2seq_generator":
        decoder = AttentionDecoder(keras.layers.LSTMCell(8), score="general")
        target_in = keras.Input((None,), dtype="int32")
        head[0](decoder([embedding(target_in), memory], initial_state=[h, c]))  # builds all
        return Seq2SeqGenerator(encoder, embedding, decoder, head)
    decoder_rnn = keras.layers.LSTM(8, return_sequences=True)
    attention = SequenceAttention(score="dot")
    hidden = decoder_rnn(embedding(keras.Input((None,), dtype="int32")), initial_state=[h, c])
    head[0](keras.layers.Concatenate()([hidden, attention([hidden, memory])]))  # builds all
    return KerasAttentionGenerator(encoder, embedding, decoder_rnn, attention, head)


MODELS = {
    "bahdanau": lambda: _seq2seq(),
    "bahdanau_location": lambda: _seq2seq(
        attention={"mechanism": "location", "units": 5, "filters": 2, "kernel_size": 3}
    ),
    "bahdanau_monotonic": lambda: _seq2seq(
        attention={"mechanism": "monotonic", "score": "general", "mode": "parallel"}
    ),
    "bahdanau_coverage": lambda: _seq2seq(attention={"mechanism": "coverage", "units": 5}),
    "luong": lambda: _seq2seq(decoder="luong", attention={"score": "additive"}),
    "copy": lambda: _seq2seq(copy=True, max_oov=2, unk_id=2),
    "seq2seq_generator": lambda: _generator("seq2seq_generator"),
    "keras_attention_generator": lambda: _generator("keras_attention_generator"),
}


def _numpy_leaves(tree):
    return [keras.ops.convert_to_numpy(leaf) for leaf in keras.tree.flatten(tree)]


def _extras(model):
    return {"source_ext": SOURCE_EXT} if getattr(model, "copy", False) is True else {}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_beam_search_decodes_as_gathering_the_whole_cache(name):
    model = MODELS[name]()
    sampler = samplers.BeamSampler(
        num_beams=3, num_beams_returned=2, coverage_penalty_weight=0.4, length_penalty=0.6
    )
    kwargs = dict(max_length=6, start_id=1, eos_id=3, sampler=sampler, **_extras(model))
    own = generate(model, SOURCE, **kwargs)
    gathered = generate(GathersAll(model), SOURCE, **kwargs)
    assert len({tuple(row) for row in own.tokens.reshape(-1, 6)}) > 1  # the beams differ
    np.testing.assert_array_equal(own.tokens, gathered.tokens)
    np.testing.assert_array_equal(own.scores, gathered.scores)
    np.testing.assert_array_equal(own.attention, gathered.attention)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_fixed_entries_are_what_no_step_changes_and_stay_in_place(name):
    model = MODELS[name]()
    fixed = model._step.fixed_entries
    prompts = np.stack([SOURCE, SOURCE_EXT], 1) if _extras(model) else SOURCE
    _, _, first = model.init_cache(prompts, 4, start_id=1)
    assert {"memory_mask"} <= set(fixed) & set(first)  # the memory is among them
    cache = first
    for token in ([4, 5, 6], [7, 7, 8], [2, 5, 4]):
        _, _, cache = model.next_logits(np.array(token, "int32"), cache)
    for entry in set(fixed) & set(first):
        for start, now in zip(_numpy_leaves(first[entry]), _numpy_leaves(cache[entry])):
            np.testing.assert_array_equal(now, start)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_reorder_cache_gathers_the_decoder_state_and_keeps_the_memory_in_place(name):
    model = MODELS[name]()
    one = np.stack([SOURCE[:1], SOURCE_EXT[:1]], 1) if _extras(model) else SOURCE[:1]
    _, _, cache = model.init_cache(one, 4, start_id=1)
    cache = keras.tree.map_structure(lambda x: keras.ops.repeat(x, 3, axis=0), cache)
    for token in ([4, 5, 6], [7, 7, 8]):  # three beams of one source, apart by now
        _, _, cache = model.next_logits(np.array(token, "int32"), cache)
    parents = np.array([[2, 0, 0]], "int32")
    reordered = model.reorder_cache(cache, parents)
    gathered = beam_sampler.gather_beams(cache, parents)
    assert set(reordered) == set(cache)
    moved = 0
    for entry in cache:
        if entry in model._step.fixed_entries:
            assert reordered[entry] is cache[entry]  # left where it is, not copied
        for ours, theirs, before in zip(
            _numpy_leaves(reordered[entry]),
            _numpy_leaves(gathered[entry]),
            _numpy_leaves(cache[entry]),
        ):
            np.testing.assert_array_equal(ours, theirs)
            moved += not np.array_equal(ours, before)
    assert moved  # the decoder state did move with the beams


def test_beam_search_reorders_through_the_model_s_own_reorder_cache():
    model = MODELS["bahdanau"]()
    chosen = []

    def recording(cache, parents):
        chosen.append(tuple(parents.shape))
        return type(model).reorder_cache(model, cache, parents)

    model.reorder_cache = recording  # before the decoding function is traced
    generate(model, SOURCE, 4, start_id=1, sampler=samplers.BeamSampler(num_beams=2))
    assert chosen and set(chosen) == {(3, 2)}  # (sources, beams), each time it was called
