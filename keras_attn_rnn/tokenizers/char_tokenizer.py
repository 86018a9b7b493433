import keras

from keras_attn_rnn.tokenizers.vocabulary_tokenizer import VocabularyTokenizer


@keras.saving.register_keras_serializable(package="keras_attn_rnn")
class CharTokenizer(VocabularyTokenizer):
    """Each character (code point) a token: `VocabularyTokenizer(split="chars", joiner="")`.

    Takes `VocabularyTokenizer`'s other arguments (`vocabulary`, `lowercase`,
    `max_vocabulary`, `min_count`, ...).

    Example:

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
