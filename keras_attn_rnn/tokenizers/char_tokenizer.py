from keras_attn_rnn import serializable
from keras_attn_rnn.tokenizers.vocabulary_tokenizer import VocabularyTokenizer


@serializable.register
class CharTokenizer(VocabularyTokenizer):
    """Each character (code point) a token: `VocabularyTokenizer(split="chars", joiner="")`.

    Takes `VocabularyTokenizer`'s other arguments (`vocabulary`, `lowercase`,
    `vocabulary_size`, `min_count`, ...).

    Examples:
        >>> from keras_attn_rnn.tokenizers import CharTokenizer
        >>> tokenizer = CharTokenizer()
        >>> tokenizer.adapt(["abba", "cab"])
        >>> tokenizer.encode("abc"), tokenizer.decode([5, 4, 6])
        ([4, 5, 6], 'bac')
    """

    def __init__(self, vocabulary=None, **kwargs):
        super().__init__(vocabulary, split="chars", joiner="", **kwargs)

    def get_config(self):
        config = super().get_config()
        for key in ("split", "pattern", "joiner"):
            config.pop(key)
        return config
