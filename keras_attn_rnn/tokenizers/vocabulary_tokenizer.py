import collections
import re

from keras_attn_rnn import _deprecation, serializable
from keras_attn_rnn.tokenizers.tokenizer import SPECIALS, Tokenizer, check_texts

SPLITS = ("chars", "whitespace", "regex")


@serializable.register
@_deprecation.renamed(
    {"max_tokens": "sequence_length", "max_vocabulary": "vocabulary_size"},
    old_order=(
        "split",
        "pattern",
        "joiner",
        "lowercase",
        "pad_to",
        "reverse",
        "sequence_length",
        "empty_as_unknown",
        "vocabulary_size",
        "min_count",
    ),
    # `vocabulary_size` is the size of the vocabulary it has (`Tokenizer`'s)
    attributes={"max_tokens": "sequence_length", "max_vocabulary": "vocabulary_size_target"},
)
class VocabularyTokenizer(Tokenizer):
    """Characters or words with a vocabulary: text -> tokens by a fixed rule -> ids.

    A text becomes tokens in this order: padded with spaces on the right to
    `pad_to` characters (a longer text is kept whole), reversed with
    `reverse`, lower-cased with `lowercase`, split, and cut to `sequence_length`.
    Tokens become ids through the vocabulary; a token not in it is `<unk>`,
    and with `empty_as_unknown` a text with no tokens is one `<unk>`. `decode`
    goes back: the tokens of the ids up to the first `</s>`, special tokens
    dropped, joined with `joiner`, un-reversed and stripped of the padding.

    `CharTokenizer` and `WordTokenizer` are this class with the split of their
    name; `adapt(texts)` learns the vocabulary from training texts (the most
    frequent tokens first, ties in order of first appearance).

    Args:
        vocabulary: the tokens in id order, starting with `<pad>`, `<s>`, `</s>`,
            `<unk>` (those four are added when missing); default: the special
            tokens alone, until `adapt`.
        split: `"chars"` (each code point a token), `"whitespace"`
            (`str.split()`) or `"regex"` (every match of `pattern`).
        pattern: the regular expression of `split="regex"` (only there).
        joiner: what `decode` joins tokens with (`""` for characters).
        lowercase: lower-case the text before splitting.
        pad_to: the width a text is padded to first, or None.
        reverse: reverse the (padded) text.
        sequence_length: keep the first `sequence_length` tokens, or None for all.
        empty_as_unknown: encode a text with no tokens as one `<unk>`.
        vocabulary_size: with `adapt`, the largest vocabulary (special tokens
            included), or None for every token seen.
        min_count: with `adapt`, the fewest times a token must appear.

    Examples:
        >>> from keras_attn_rnn.tokenizers import WordTokenizer
        >>> tokenizer = WordTokenizer(lowercase=True)
        >>> tokenizer.adapt(["the cat sat", "The dog sat"])
        >>> tokenizer.vocabulary
        ['<pad>', '<s>', '</s>', '<unk>', 'the', 'sat', 'cat', 'dog']
        >>> tokenizer.encode("The bird sat")
        [4, 3, 5]
        >>> tokenizer.decode([4, 6, 5, 2, 7])
        'the cat sat'
    """

    def __init__(
        self,
        vocabulary=None,
        *,
        split="chars",
        pattern=None,
        joiner="",
        lowercase=False,
        pad_to=None,
        reverse=False,
        sequence_length=None,
        empty_as_unknown=False,
        vocabulary_size=None,
        min_count=1,
        **kwargs,
    ):
        if split not in SPLITS:
            raise ValueError(
                f"split must be one of {', '.join(repr(s) for s in SPLITS)}. "
                f"Received: split={split!r}"
            )
        if (split == "regex") != (pattern is not None):
            raise ValueError(
                "pattern must be given with split='regex', and only then. "
                f"Received: split={split!r}, pattern={pattern!r}"
            )
        if not isinstance(joiner, str):
            raise ValueError(f"joiner must be a string. Received: joiner={joiner!r}")
        for name, value in (
            ("pad_to", pad_to),
            ("sequence_length", sequence_length),
            ("vocabulary_size", vocabulary_size),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(
                    f"{name} must be a positive integer or None. Received: {name}={value!r}"
                )
        if vocabulary_size is not None and vocabulary_size <= len(SPECIALS):
            raise ValueError(
                f"vocabulary_size must leave room beyond the {len(SPECIALS)} special tokens. "
                f"Received: vocabulary_size={vocabulary_size}"
            )
        if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
            raise ValueError(
                f"min_count must be a positive integer. Received: min_count={min_count!r}"
            )
        try:
            self._regex = None if pattern is None else re.compile(pattern)
        except (re.error, TypeError) as err:
            raise ValueError(
                f"pattern must be a regular expression ({err}). Received: pattern={pattern!r}"
            ) from None
        super().__init__(**kwargs)
        self._vocabulary = _with_specials(vocabulary or [])
        self.split = split
        self.pattern = pattern
        self.joiner = joiner
        self.lowercase = bool(lowercase)
        self.pad_to = pad_to
        self.reverse = bool(reverse)
        self.sequence_length = sequence_length
        self.empty_as_unknown = bool(empty_as_unknown)
        self.vocabulary_size_target = vocabulary_size  # what adapt aims at, at most
        self.min_count = min_count

    @property
    def vocabulary(self):
        return self._vocabulary

    def set_vocabulary(self, vocabulary):
        """Replaces the vocabulary (the special tokens are added first when missing)."""
        self._vocabulary = _with_specials(vocabulary)
        self._vocabulary_changed()

    def adapt(self, texts):
        counts = collections.Counter()
        for text in check_texts(texts):
            counts.update(self._split(text))
        kept = [token for token, count in counts.most_common() if count >= self.min_count]
        kept = [token for token in kept if token not in SPECIALS]
        if self.vocabulary_size_target is not None:
            kept = kept[: self.vocabulary_size_target - len(SPECIALS)]
        self.set_vocabulary(kept)

    def _split(self, text):
        if self.lowercase:
            text = text.lower()
        if self.split == "whitespace":
            return text.split()
        if self.split == "regex":
            return self._regex.findall(text)
        return list(text)

    def tokenize(self, text):
        if self.pad_to:
            text = text.ljust(self.pad_to)
        if self.reverse:
            text = text[::-1]
        tokens = self._split(text)
        return tokens if self.sequence_length is None else tokens[: self.sequence_length]

    def token_ids(self, tokens):
        ids = super().token_ids(tokens)
        return [SPECIALS.index("<unk>")] if not ids and self.empty_as_unknown else ids

    def detokenize(self, tokens):
        text = self.joiner.join(tokens)
        if self.reverse:
            text = text[::-1]
        if self.pad_to:
            text = text.rstrip(" ")
        return text

    def get_config(self):
        return {
            **super().get_config(),
            "vocabulary": list(self._vocabulary),
            "split": self.split,
            "pattern": self.pattern,
            "joiner": self.joiner,
            "lowercase": self.lowercase,
            "pad_to": self.pad_to,
            "reverse": self.reverse,
            "sequence_length": self.sequence_length,
            "empty_as_unknown": self.empty_as_unknown,
            "vocabulary_size": self.vocabulary_size_target,
            "min_count": self.min_count,
        }


def _with_specials(tokens):
    if isinstance(tokens, str):
        raise ValueError(
            f"vocabulary must be a list of tokens, not a str. Received: vocabulary={tokens[:40]!r}"
        )
    tokens = list(tokens)
    for i, token in enumerate(tokens):
        if not isinstance(token, str):
            raise ValueError(f"vocabulary must hold strings. Received: vocabulary[{i}]={token!r}")
    seen, ordered = set(SPECIALS), list(SPECIALS)
    for token in tokens:
        if token not in seen:
            seen.add(token)
            ordered.append(token)
    return ordered
