from keras_attn_rnn import _deprecation, serializable
from keras_attn_rnn.tokenizers.vocabulary_tokenizer import VocabularyTokenizer


@serializable.register
@_deprecation.renamed(old_order=("pattern",))
class WordTokenizer(VocabularyTokenizer):
    """Words as tokens: split on whitespace (or on the matches of `pattern`), joined with a
    space. `VocabularyTokenizer(split="whitespace", joiner=" ")`, or `split="regex"` with
    `pattern` (e.g. `r"\\w+|[^\\w\\s]"` to keep punctuation apart).

    Takes `VocabularyTokenizer`'s other arguments (`vocabulary`, `lowercase`,
    `vocabulary_size`, `min_count`, ...). A word outside the vocabulary is `<unk>`:
    decoding does not give the text back where words were unknown or spacing differed.

    Examples:
        >>> from keras_attn_rnn.tokenizers import WordTokenizer
        >>> tokenizer = WordTokenizer(pattern=r"\\w+|[^\\w\\s]", vocabulary_size=8)
        >>> tokenizer.adapt(["Hello, world!", "Hello again."])
        >>> tokenizer.tokenize("Hello, you!")
        ['Hello', ',', 'you', '!']
        >>> tokenizer.decode(tokenizer.encode("Hello, world!"))
        'Hello , world !'
    """

    def __init__(self, vocabulary=None, *, pattern=None, **kwargs):
        split = "whitespace" if pattern is None else "regex"
        kwargs.setdefault("joiner", " ")
        super().__init__(vocabulary, split=split, pattern=pattern, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.pop("split")
        return config
