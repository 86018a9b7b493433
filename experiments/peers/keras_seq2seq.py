"""The plain-Keras translator: what a Keras user writes without keras-attn-rnn.

An LSTM (or GRU) encoder, an LSTM decoder started from its final state and trained by
teacher forcing, `keras.layers.Attention` (Luong's dot score) of the decoder's outputs over
the encoder's, and a `tanh` layer on `[h; context]` before the logits: the arrangement of
the TensorFlow "NMT with attention" tutorial, with Keras's own layers only, as a functional
model. It needs nothing of this library to load (`keras.saving.load_model`), and decodes
with every sampler through `keras_attn_rnn.generators.KerasAttentionGenerator`, built from
its layers by name (`generator`).
"""

from __future__ import annotations

import keras

from keras_attn_rnn.generators import KerasAttentionGenerator

NAME = "keras"  # `model.decoder: keras` selects it


def build(
    source_vocab: int,
    target_vocab: int,
    embedding_dim: int,
    units: int,
    rnn: str = "lstm",
    dropout: float = 0.0,
    name: str = "keras_seq2seq",
) -> keras.Model:
    """The functional model `[source (B, S), target_in (B, T)] -> logits (B, T, V)`; id 0 is
    padding on both sides (`mask_zero`), so Keras's masks skip it in the RNNs, the attention
    and the loss."""
    layer = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}[rnn]
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    embedded = keras.layers.Embedding(
        source_vocab, embedding_dim, mask_zero=True, name="source_embedding"
    )(source)
    embedded = keras.layers.Dropout(dropout, name="source_dropout")(embedded)
    memory, *state = layer(units, return_sequences=True, return_state=True, name="encoder")(
        embedded
    )
    target = keras.layers.Embedding(
        target_vocab, embedding_dim, mask_zero=True, name="target_embedding"
    )(target_in)
    target = keras.layers.Dropout(dropout, name="target_dropout")(target)
    hidden = layer(units, return_sequences=True, name="decoder")(target, initial_state=state)
    context = keras.layers.Attention(name="attention")([hidden, memory])
    combined = keras.layers.Concatenate(name="combine")([hidden, context])
    combined = keras.layers.Dense(units, activation="tanh", name="attention_layer")(combined)
    combined = keras.layers.Dropout(dropout, name="output_dropout")(combined)
    logits = keras.layers.Dense(target_vocab, name="logits")(combined)
    return keras.Model([source, target_in], logits, name=name)


def generator(model: keras.Model, preprocessor=None) -> KerasAttentionGenerator:
    """The step API of a model `build` made (or its reload), from its layers by name."""
    source = model.inputs[0]
    encoder_output = model.get_layer("encoder").output
    encoder = keras.Model(source, encoder_output)
    return KerasAttentionGenerator(
        encoder,
        model.get_layer("target_embedding"),
        model.get_layer("decoder"),
        model.get_layer("attention"),
        [model.get_layer("attention_layer"), model.get_layer("logits")],
        preprocessor=preprocessor,
    )
