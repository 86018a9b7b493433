"""The mistakes users port from tfa or from other layers fail at once, naming the argument.

Each check runs before any step: a layer refused at construction or build stays unbuilt.
"""

import keras
import numpy as np
import pytest

from keras_attn_rnn import AttentionDecoder, SequenceAttention, models, samplers
from keras_attn_rnn.generation import generate

pytestmark = pytest.mark.layers


def _x_mem(batch=2, steps=3, length=5):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, steps, 4)).astype("float32")
    mem = rng.standard_normal((batch, length, 6)).astype("float32")
    return x, mem


@pytest.mark.parametrize("layer", [keras.layers.LSTM, keras.layers.GRU, keras.layers.SimpleRNN])
def test_a_whole_rnn_layer_instead_of_a_cell_is_refused_at_construction(layer):
    with pytest.raises(ValueError, match=r"cell must be an RNN cell.*not a whole RNN layer") as err:
        AttentionDecoder(layer(8))
    assert f"Received: cell={layer.__name__} layer" in str(err.value)


def test_three_inputs_say_two_tensors_not_a_missing_memory():
    x, mem = _x_mem()
    decoder = AttentionDecoder(keras.layers.LSTMCell(8))
    with pytest.raises(ValueError, match=r"two tensors.*Received: inputs=a list of 3 inputs"):
        decoder([x, mem, mem])
    assert not decoder.built
    with pytest.raises(ValueError, match="the memory is missing"):
        decoder([x])


def test_a_single_mask_tensor_is_refused_by_the_decoder_whatever_its_shape():
    # (2, 5) is the memory's shape: taken as the inputs' mask it used to pass silently
    # when T == S, and to blame `inputs_mask` otherwise.
    decoder = AttentionDecoder(keras.layers.LSTMCell(8))
    for steps in (3, 5):
        x, mem = _x_mem(steps=steps)
        memory_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
        with pytest.raises(ValueError, match=r"mask must be a list \[inputs_mask, memory_mask\]"):
            decoder([x, mem], mask=memory_mask)
    outputs = decoder([x, mem], mask=[None, memory_mask])
    assert tuple(outputs.shape) == (2, 5, 6)


def test_a_single_mask_tensor_is_refused_by_sequence_attention():
    q, v = np.ones((2, 3, 4), "float32"), np.ones((2, 5, 4), "float32")
    with pytest.raises(ValueError, match=r"mask must be a list \[query_mask, value_mask\]"):
        SequenceAttention()([q, v], mask=np.ones((2, 5), bool))


@pytest.mark.parametrize("position", ["value", "key", "query"])
def test_sequence_attention_batch_mismatch_names_the_shapes(position):
    shapes = {"query": (2, 3, 4), "value": (2, 5, 4), "key": (2, 5, 4)}
    shapes[position] = (3,) + shapes[position][1:]
    tensors = {name: np.ones(shape, "float32") for name, shape in shapes.items()}
    layer = SequenceAttention(score="general")
    with pytest.raises(ValueError, match=r"same batch size.*" + rf"{position}\.shape=\(3, "):
        layer([tensors["query"], tensors["value"], tensors["key"]])
    assert not layer.built


def test_sequence_attention_batch_mismatch_with_a_cache():
    layer = SequenceAttention()
    h = np.ones((2, 4, 8), "float32")
    layer([h, h])
    cache = layer.init_cache(np.zeros((2, 6, 8), "float32"))
    with pytest.raises(ValueError, match="same batch size"):
        layer(np.ones((3, 1, 8), "float32"), cache=cache)


def test_output_attention_takes_true_false_or_both():
    for bad in ("cell", 1, None):
        with pytest.raises(ValueError, match=r'output_attention must be True, False or "both"'):
            AttentionDecoder(keras.layers.LSTMCell(8), output_attention=bad)


def test_output_attention_both_is_the_cell_output_then_the_attention():
    x, mem = _x_mem()
    mask = [np.array([[1, 1, 0], [1, 1, 1]], bool), np.array([[1, 1, 1, 0, 0]] * 2, bool)]
    both = AttentionDecoder(
        keras.layers.LSTMCell(8), attention_layer_size=5, output_attention="both"
    )
    outputs = keras.ops.convert_to_numpy(both([x, mem], mask=mask))
    assert outputs.shape == (2, 3, 13)
    config = both.get_config()
    cell_only = AttentionDecoder.from_config({**config, "output_attention": False})
    attention_only = AttentionDecoder.from_config({**config, "output_attention": True})
    for layer in (cell_only, attention_only):
        layer([x, mem])
        layer.set_weights(both.get_weights())
    cell = keras.ops.convert_to_numpy(cell_only([x, mem], mask=mask))
    attention = keras.ops.convert_to_numpy(attention_only([x, mem], mask=mask))
    np.testing.assert_allclose(outputs, np.concatenate([cell, attention], -1), atol=1e-6)
    assert np.all(outputs[0, 2] == 0.0)  # a masked step outputs zeros, both halves
    last = AttentionDecoder.from_config({**config, "return_sequences": False})
    last([x, mem])
    last.set_weights(both.get_weights())
    # without return_sequences: the last unmasked step's output, of the full size
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(last([x, mem], mask=mask)), outputs[[0, 1], [1, 2]], atol=1e-6
    )


@pytest.mark.parametrize(
    ("sampler", "options", "named"),
    [
        ("greedy", {"k": 5}, "k"),
        ("greedy", {"beam_width": 8}, "beam_width"),
        ("sample", {"p": 0.9}, "p"),
        ("top_k", {"k": 3, "length_penalty": 0.6}, "length_penalty"),
        ("beam", {"temperature": 0.5}, "temperature"),
    ],
)
def test_an_option_the_sampler_does_not_take_is_refused(sampler, options, named):
    with pytest.raises(ValueError, match=rf"{named} is not an argument of sampler='{sampler}'"):
        samplers.get(sampler, **options)
    lm = models.AttentiveLanguageModel(vocabulary_size=12, units=8)
    with pytest.raises(TypeError, match=rf"unexpected keyword argument '{named}'"):
        generate(lm, [[3, 4]], 3, sampler=sampler, **{named: options[named]})
    assert not lm.built  # refused before the model ran
