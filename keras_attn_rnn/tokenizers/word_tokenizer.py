import keras

from keras_attn_rnn.tokenizers.vocabulary_tokenizer import VocabularyTokenizer


@keras.saving.register_keras_serializable(package="keras_attn_rnn")
class WordTokenizer(VocabularyTokenizer):
    """Words as tokens: split on whitespace (or on the matches of `pattern`), joined with a
    space. `VocabularyTokenizer(split="whitespace", joiner=" ")`, or `split="regex"` with
    `pattern` (e.g. `r"\\w+|[^\\w\\s]"` to keep punctuation apart).

    Takes `VocabularyTokenizer`'s other arguments (`vocabulary`, `lowercase`,
    `max_vocabulary`, `min_count`, ...). A word outside the vocabulary is `<unk>`:
    decoding does not give the text back where words were unknown or spacing differed.

    Example:

    >>> from keras_attn_rnn.tokenizers import WordTokenizer
    >>> tokenizer = WordTokenizer(pattern=r"\\w+|[^\\w\\s]", max_vocabulary=8)
    >>> tokenizer.adapt(["Hello, world!", "Hello again."])
    >>> tokenizer.tokenize("Hello, you!")
    ['Hello', ',', 'you', '!']
    >>> tokenizer.decode(tokenizer.encode("Hello, world!"))
    'Hello , world !'
    """

    def __init__(self, vocabulary=None, pattern=None, **kwargs):
        split = "whitespace" if pattern is None else "regex"
        kwargs.setdefault("joiner", " ")
        super().__init__(vocabulary, split=split, pattern=pattern, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.pop("split")
        return config
