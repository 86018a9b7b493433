import collections
import re

import keras

from keras_attn_rnn.tokenizers.tokenizer import SPECIALS, Tokenizer, check_texts

SPLITS = ("chars", "whitespace", "regex")


@keras.saving.register_keras_serializable(package="keras_attn_rnn")
class VocabularyTokenizer(Tokenizer):
    """Characters or words with a vocabulary: text -> tokens by a fixed rule -> ids.

    A text becomes tokens in this order: padded with spaces on the right to
    `pad_to` characters (a longer text is kept whole), reversed with
    `reverse`, lower-cased with `lowercase`, split, and cut to `max_tokens`.
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
        max_tokens: keep the first `max_tokens` tokens, or None for all.
        empty_as_unknown: encode a text with no tokens as one `<unk>`.
        max_vocabulary: with `adapt`, the largest vocabulary (special tokens
            included), or None for every token seen.
        min_count: with `adapt`, the fewest times a token must appear.

    Example:

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
        split="chars",
        pattern=None,
        joiner="",
        lowercase=False,
        pad_to=None,
        reverse=False,
        max_tokens=None,
        empty_as_unknown=False,
        max_vocabulary=None,
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
            ("max_tokens", max_tokens),
            ("max_vocabulary", max_vocabulary),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(
                    f"{name} must be a positive integer or None. Received: {name}={value!r}"
                )
        if max_vocabulary is not None and max_vocabulary <= len(SPECIALS):
            raise ValueError(
                f"max_vocabulary must leave room beyond the {len(SPECIALS)} special tokens. "
                f"Received: max_vocabulary={max_vocabulary}"
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
        self.max_tokens = max_tokens
        self.empty_as_unknown = bool(empty_as_unknown)
        self.max_vocabulary = max_vocabulary
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
        if self.max_vocabulary is not None:
            kept = kept[: self.max_vocabulary - len(SPECIALS)]
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
        return tokens if self.max_tokens is None else tokens[: self.max_tokens]

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
            "max_tokens": self.max_tokens,
            "empty_as_unknown": self.empty_as_unknown,
            "max_vocabulary": self.max_vocabulary,
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
