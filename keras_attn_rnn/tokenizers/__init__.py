"""Tokenizers: raw text <-> token ids, the vocabulary inside the layer's config.

Every tokenizer gives `<pad>` 0, `<s>` 1, `</s>` 2 and `<unk>` 3 and learns its
vocabulary with `adapt(texts)`, as Keras preprocessing layers do:

- `"char"`: `CharTokenizer`, each character a token;
- `"word"`: `WordTokenizer`, words split on whitespace (or a regular expression);
- `"subword"`: `SentencePieceTokenizer`, BPE or unigram subword units (needs the
  `sentencepiece` package).

`get("subword", vocabulary_size=4000)` builds one by name; the preprocessors
(`keras_attn_rnn.preprocessors`) and the runner use these same classes, so a model's
`.keras` file, the runner and the served model encode and decode alike.
"""

from keras_attn_rnn import registry
from keras_attn_rnn.tokenizers.char_tokenizer import CharTokenizer
from keras_attn_rnn.tokenizers.sentence_piece_tokenizer import SentencePieceTokenizer
from keras_attn_rnn.tokenizers.tokenizer import END, PAD, SPECIALS, START, UNK, Extended, Tokenizer
from keras_attn_rnn.tokenizers.vocabulary_tokenizer import VocabularyTokenizer
from keras_attn_rnn.tokenizers.word_tokenizer import WordTokenizer

__all__ = [
    "END",
    "PAD",
    "REGISTRY",
    "SPECIALS",
    "START",
    "UNK",
    "CharTokenizer",
    "Extended",
    "SentencePieceTokenizer",
    "Tokenizer",
    "VocabularyTokenizer",
    "WordTokenizer",
    "get",
    "names",
    "serialize",
]

# The names of a tokenizer's unit: `get`, and the runner's `task.units`.
REGISTRY = registry.Registry(
    "tokenizer",
    Tokenizer,
    "a `keras_attn_rnn.tokenizers.Tokenizer`",
    {"char": CharTokenizer, "word": WordTokenizer, "subword": SentencePieceTokenizer},
)


def names():
    """The registered tokenizer names: `("char", "word", "subword")`."""
    return REGISTRY.names()


def get(identifier, **kwargs):
    """A tokenizer from a name (`get("subword", vocabulary_size=4000)`), a config, or an
    instance."""
    return REGISTRY.get(identifier, **kwargs)


def serialize(tokenizer):
    """The config of a tokenizer (Keras's serialization format, JSON-able, vocabulary
    included)."""
    return REGISTRY.serialize(tokenizer)
