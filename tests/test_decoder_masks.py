"""Masks reach AttentionDecoder in every call form users write: padded source positions get
weight exactly 0 and masked target steps output exactly 0, with or without `initial_state`."""

import keras
import numpy as np
import pytest
from helpers import to_numpy

from keras_attn_rnn import AttentionDecoder

pytestmark = pytest.mark.layers

SOURCE = np.array([[1, 2, 3, 0, 0], [4, 5, 0, 0, 0], [1, 1, 1, 1, 1]], dtype="int32")
TARGET = np.array([[1, 2, 0], [3, 0, 0], [1, 2, 3]], dtype="int32")
FORMS = ["embedding", "masking", "explicit", "subclassed"]


def _features(tokens, size=4):
    """Float features with zero rows at padding (for `keras.layers.Masking`)."""
    table = np.random.default_rng(0).standard_normal((10, size)).astype("float32") + 2.0
    return np.where(tokens[..., None] != 0, table[tokens], 0.0).astype("float32")


def _functional(form, initial_state):
    if form == "masking":
        src, tin = keras.Input((5, 4)), keras.Input((3, 4))
        source, target = keras.layers.Masking()(src), keras.layers.Masking()(tin)
    else:
        src, tin = keras.Input((5,), dtype="int32"), keras.Input((3,), dtype="int32")
        zero = form != "explicit"
        source = keras.layers.Embedding(10, 4, mask_zero=zero)(src)
        target = keras.layers.Embedding(10, 4, mask_zero=zero)(tin)
    memory, h, c = keras.layers.LSTM(8, return_sequences=True, return_state=True)(source)
    kwargs = {"initial_state": [h, c]} if initial_state else {}
    if form == "explicit":
        kwargs["mask"] = [keras.ops.not_equal(tin, 0), keras.ops.not_equal(src, 0)]
    decoder = AttentionDecoder(keras.layers.LSTMCell(8), attention_layer_size=6)
    outputs, alignments = decoder([target, memory], return_attention_scores=True, **kwargs)
    return keras.Model([src, tin], [outputs, alignments])


class _Translator(keras.Model):
    def __init__(self, initial_state):
        super().__init__()
        self.initial = initial_state
        self.source_embedding = keras.layers.Embedding(10, 4, mask_zero=True)
        self.target_embedding = keras.layers.Embedding(10, 4, mask_zero=True)
        self.encoder = keras.layers.LSTM(8, return_sequences=True, return_state=True)
        self.decoder = AttentionDecoder(keras.layers.LSTMCell(8), attention_layer_size=6)

    def call(self, inputs):
        source, target = inputs
        memory, h, c = self.encoder(self.source_embedding(source))
        kwargs = {"initial_state": [h, c]} if self.initial else {}
        return self.decoder(
            [self.target_embedding(target), memory], return_attention_scores=True, **kwargs
        )


@pytest.mark.parametrize("initial_state", [True, False], ids=["initial_state", "zero_state"])
@pytest.mark.parametrize("form", FORMS)
def test_masks_reach_the_decoder_in_every_call_form(form, initial_state):
    if form == "subclassed":
        model = _Translator(initial_state)
    else:
        model = _functional(form, initial_state)
    inputs = [_features(SOURCE), _features(TARGET)] if form == "masking" else [SOURCE, TARGET]
    outputs, alignments = (to_numpy(t) for t in model(inputs))
    source_pad = SOURCE == 0
    target_pad = TARGET == 0
    padded_weights = alignments[np.broadcast_to(source_pad[:, None, :], alignments.shape)]
    assert np.all(padded_weights == 0.0), "padded source positions got attention"
    assert np.all(outputs[target_pad] == 0.0), "masked target steps have outputs"
    # real steps attend over the real positions only, and sum to one there
    np.testing.assert_allclose(alignments.sum(-1)[~target_pad], 1.0, atol=1e-5)
    assert np.all(np.abs(outputs[~target_pad]).sum(-1) > 0)


def test_an_explicit_mask_wins_over_the_keras_masks():
    """`mask=` given explicitly is used even when Keras also has masks for the inputs."""
    src, tin = keras.Input((5,), dtype="int32"), keras.Input((3,), dtype="int32")
    source = keras.layers.Embedding(10, 4, mask_zero=True)(src)
    target = keras.layers.Embedding(10, 4, mask_zero=True)(tin)
    memory, h, c = keras.layers.LSTM(8, return_sequences=True, return_state=True)(source)
    no_first = keras.ops.concatenate(
        [keras.ops.zeros_like(src[:, :1], dtype="bool"), keras.ops.not_equal(src[:, 1:], 0)], 1
    )
    _, alignments = AttentionDecoder(keras.layers.LSTMCell(8))(
        [target, memory], initial_state=[h, c], mask=[None, no_first], return_attention_scores=True
    )
    alignments = to_numpy(keras.Model([src, tin], alignments)([SOURCE, TARGET]))
    assert np.all(alignments[:, :, 0] == 0.0)
    assert np.all(alignments[..., 1:][np.broadcast_to(SOURCE[:, None, 1:] == 0, (3, 3, 4))] == 0)
    # the target mask was given as None: every step runs, none is zeroed
    np.testing.assert_allclose(alignments.sum(-1), 1.0, atol=1e-5)
