"""The plain-Keras translator: what a Keras user writes without keras-attn-rnn.

An LSTM (or GRU) encoder, an LSTM decoder started from its final state and trained by
teacher forcing, `keras.layers.Attention` (Luong's dot score) of the decoder's outputs over
the encoder's, and a `tanh` layer on `[h; context]` before the logits: the arrangement of
the TensorFlow "NMT with attention" tutorial, with Keras's own layers only, as a functional
model. It needs nothing of this library to load (`keras.saving.load_model`), and decodes
with every sampler through `keras_attn_rnn.generators.KerasAttentionGenerator`, built from
its layers by name (`generator`); its attention, which Keras's functional model does not
return, comes from the same steps fed the target (`teacher_forced`).
"""

from __future__ import annotations

import keras
import numpy as np

from keras_attn_rnn.generators import KerasAttentionGenerator

NAME = "keras"  # `model.decoder: keras` selects it
MODEL_NAME = "keras_seq2seq"  # the functional model's name: how a reload is told apart


def build(
    source_vocab: int,
    target_vocab: int,
    embedding_dim: int,
    units: int,
    rnn: str = "lstm",
    dropout: float = 0.0,
    name: str = MODEL_NAME,
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


def is_peer(model) -> bool:
    """Whether `model` is one `build` made (or its reload: the name stays): Keras's own
    model, without the step API."""
    return (
        isinstance(model, keras.Model)
        and model.name == MODEL_NAME
        and not hasattr(model, "init_cache")
    )


def generator(model: keras.Model) -> KerasAttentionGenerator:
    """The step API of a model `build` made (or its reload), from its layers by name (kept on
    the model: one per model)."""
    kept = model.__dict__.get("_peer_generator")  # bypasses Keras tracking
    if kept is None:
        kept = model.__dict__["_peer_generator"] = KerasAttentionGenerator.from_model(model)
    return kept


def teacher_forced(model: keras.Model, source, target_in) -> tuple[np.ndarray, np.ndarray]:
    """`(logits (B, T, V), alignments (B, T, S))` of the decoder fed `target_in` (its first
    column the start id), step by step through `generator(model)`: the attention of a
    functional model that returns none."""
    steps = generator(model)
    target_in = np.asarray(target_in, "int32")
    logits, alignments, cache = steps.init_cache(source, start_id=int(target_in[0, 0]))
    all_logits, all_alignments = [logits], [alignments]
    for t in range(1, target_in.shape[1]):
        logits, alignments, cache = steps.next_logits(target_in[:, t], cache)
        all_logits.append(logits)
        all_alignments.append(alignments)
    as_array = lambda parts: np.stack([keras.ops.convert_to_numpy(p) for p in parts], 1)  # noqa: E731
    weights = as_array(all_alignments) * (target_in != 0)[..., None]  # padding attends nowhere
    return as_array(all_logits), weights.astype("float32")
