"""The models of `tests/data/saved_models/` and the outputs compared after loading them:
one decoder per mechanism that adds a term to the additive core, `Seq2Seq` with each
decoder kind, and the three ready models as saved before their arguments took one
spelling per concept (issue 49: `vocab_size`, `source_vocab`, `source_length`,
`max_tokens`, `max_vocabulary` in their configs), one with a text preprocessor."""

import keras
import numpy as np

from keras_attn_rnn import AttentionDecoder, scores
from keras_attn_rnn.mechanisms import CoverageAttention, LocationSensitiveAttention
from keras_attn_rnn.models import AttentiveClassifier, AttentiveLanguageModel, Seq2Seq
from keras_attn_rnn.preprocessors import Seq2SeqPreprocessor
from keras_attn_rnn.tokenizers import CharTokenizer, WordTokenizer

_rng = np.random.default_rng(0)
X = _rng.normal(size=(2, 5, 4)).astype("float32")
MEMORY = _rng.normal(size=(2, 7, 6)).astype("float32")
SOURCE = _rng.integers(1, 11, (3, 6)).astype("int32")
SOURCE[1, 4:] = 0
SOURCE[2, 2:] = 0
TARGET = _rng.integers(1, 9, (3, 5)).astype("int32")
TARGET[2, 3:] = 0
SOURCE_TEXTS = ["the cat sat on the mat today", "a dog", "the dog sat"]
TARGET_TEXTS = ["le chat assis", "un chien", "le chien"]


def _decoder_model(attention):
    x, memory = keras.Input((None, 4)), keras.Input((None, 6))
    decoder = AttentionDecoder(keras.layers.LSTMCell(8), attention=attention)
    return keras.Model([x, memory], list(decoder([x, memory], return_attention_scores=True)))


def _seq2seq(**kwargs):
    return Seq2Seq(11, 9, embedding_dim=6, units=8, **kwargs)


def _seq2seq_text():
    # the tokenizers' and the preprocessor's lengths cut these texts: a renamed key lost
    # on loading changes the ids
    source = WordTokenizer(sequence_length=5, vocabulary_size=9)
    source.adapt(SOURCE_TEXTS)
    target = CharTokenizer(vocabulary_size=12)
    target.adapt(TARGET_TEXTS)
    preprocessor = Seq2SeqPreprocessor(
        source, target, source_sequence_length=4, target_sequence_length=6
    )
    return Seq2Seq(embedding_dim=6, units=8, preprocessor=preprocessor)


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
    "classifier": lambda: AttentiveClassifier(11, 3, embedding_dim=6, units=8, num_layers=2),
    "language_model": lambda: AttentiveLanguageModel(
        11, embedding_dim=6, units=8, attention={"score": "general", "window": 3}
    ),
    "seq2seq_text": _seq2seq_text,
}


def outputs(model):
    """NumPy outputs: a decoder's `[outputs, alignments]`; a `Seq2Seq`'s logits and
    alignments under teacher forcing, then of its first two cached steps (with a
    preprocessor, on the ids it makes of the texts, which come first); a classifier's
    logits and weights; a language model's logits and weights, then of its first two
    cached steps."""
    if isinstance(model, Seq2Seq):
        source, target, found = SOURCE, TARGET, []
        if model.preprocessor is not None:
            (source, target), target_out, _ = model.preprocessor(SOURCE_TEXTS, TARGET_TEXTS)
            found = [source, target, target_out]
        logits, alignments = model([source, target], return_attention_scores=True)
        first, first_alignments, cache = model.init_cache(source, start_id=1)
        second, second_alignments, _ = model.next_logits(np.full((3,), 2, "int32"), cache)
        found += [logits, alignments, first, first_alignments, second, second_alignments]
    elif isinstance(model, AttentiveClassifier):
        found = model(SOURCE, return_attention_scores=True)
    elif isinstance(model, AttentiveLanguageModel):
        logits, weights = model(SOURCE, return_attention_scores=True)
        first, first_weights, cache = model.init_cache(SOURCE[:, :2], max_length=2)
        second, second_weights, _ = model.next_logits(np.full((3,), 2, "int32"), cache)
        found = [logits, weights, first, first_weights, second, second_weights]
    else:
        found = model([X, MEMORY])
    return [keras.ops.convert_to_numpy(t) for t in found]
