"""The models of `tests/data/saved_models/` and the outputs compared after loading them:
one decoder per mechanism that adds a term to the additive core, and `Seq2Seq` with each
decoder kind."""

import keras
import numpy as np

from keras_attn_rnn import AttentionDecoder, scores
from keras_attn_rnn.mechanisms import CoverageAttention, LocationSensitiveAttention
from keras_attn_rnn.models import Seq2Seq

_rng = np.random.default_rng(0)
X = _rng.normal(size=(2, 5, 4)).astype("float32")
MEMORY = _rng.normal(size=(2, 7, 6)).astype("float32")
SOURCE = _rng.integers(1, 11, (3, 6)).astype("int32")
SOURCE[1, 4:] = 0
SOURCE[2, 2:] = 0
TARGET = _rng.integers(1, 9, (3, 5)).astype("int32")
TARGET[2, 3:] = 0


def _decoder_model(attention):
    x, memory = keras.Input((None, 4)), keras.Input((None, 6))
    decoder = AttentionDecoder(keras.layers.LSTMCell(8), attention=attention)
    return keras.Model([x, memory], list(decoder([x, memory], return_attention_scores=True)))


def _seq2seq(**kwargs):
    return Seq2Seq(11, 9, embedding_dim=6, units=8, **kwargs)


CASES = {
    "decoder_coverage": lambda: _decoder_model(CoverageAttention(5)),
    "decoder_location": lambda: _decoder_model(
        LocationSensitiveAttention(5, filters=3, kernel_size=3)
    ),
    "seq2seq_bahdanau": lambda: _seq2seq(  # saved when no attention layer was the default
        bidirectional=True,
        attention={"score": scores.Additive(5, normalize=True)},
        attention_layer_size=None,
    ),
    "seq2seq_luong": lambda: _seq2seq(
        decoder="luong",
        rnn="gru",
        bidirectional=True,
        attention={"score": "general"},
        attention_layer_size=5,
    ),
}


def outputs(model):
    """NumPy outputs: a decoder's `[outputs, alignments]`; a `Seq2Seq`'s logits and
    alignments under teacher forcing, then of its first two cached steps."""
    if isinstance(model, Seq2Seq):
        logits, alignments = model([SOURCE, TARGET], return_attention_scores=True)
        first, first_alignments, cache = model.init_cache(SOURCE, start_id=1)
        second, second_alignments, _ = model.next_logits(np.full((3,), 2, "int32"), cache)
        found = [logits, alignments, first, first_alignments, second, second_alignments]
    else:
        found = model([X, MEMORY])
    return [keras.ops.convert_to_numpy(t) for t in found]
