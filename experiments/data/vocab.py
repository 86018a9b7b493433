"""Token <-> id vocabularies; ids 0-3 are the special tokens every task shares.

The ids and the mapping are `keras_attn_rnn.tokenizers`' (the one tokenizer of the library,
the runner and the served text model); a `Vocab` is the mapping alone, over tokens already
split.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from keras_attn_rnn import tokenizers
from keras_attn_rnn.tokenizers import END, PAD, SPECIALS, START, UNK, Tokenizer, VocabularyTokenizer

__all__ = ["END", "PAD", "SPECIALS", "START", "UNK", "Vocab"]


class Vocab:
    """Token <-> id mapping; ids 0-3 are `<pad>`, `<s>`, `</s>`, `<unk>`.

    Args:
        tokens: the non-special tokens, in id order.
        joiner: string used to join decoded tokens ("" for characters).
        tokenizer: instead of `tokens`, an adapted tokenizer whose vocabulary this is
            (subword units decode through their tokenizer, not by joining pieces).
    """

    def __init__(
        self, tokens: Iterable[str] = (), joiner: str = "", tokenizer: Tokenizer | None = None
    ):
        if tokenizer is None:
            tokenizer = VocabularyTokenizer(
                list(SPECIALS) + [t for t in tokens if t not in SPECIALS], joiner=joiner
            )
        self.tokens = list(tokenizer.vocabulary)
        self.joiner = joiner
        self._mapping = tokenizer
        self.index = self._mapping.index

    def __len__(self) -> int:
        return len(self.tokens)

    def tokenizer(self, **rules) -> VocabularyTokenizer:
        """A `VocabularyTokenizer` over this vocabulary that splits text by `rules` (its arguments:
        `split`, `pattern`, `lowercase`, `pad_to`, `reverse`, `sequence_length`, ...)."""
        return VocabularyTokenizer(self.tokens, joiner=self.joiner, **rules)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of `tokens`; unknown tokens map to `<unk>`."""
        return self._mapping.token_ids(tokens)

    def labels(self, ids: Iterable[int], oov: Sequence[str] = ()) -> list[str]:
        """Token strings of `ids`, padding dropped; an extended id `len(self) + k` (copy
        attention) is `oov[k]`, or `<unk>` past its end."""
        return [self._mapping.label(i, oov) for i in ids if int(i) != PAD]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids` up to the first `</s>`, without specials."""
        return self._mapping.decode(ids)

    def decode_extended(self, ids: Iterable[int], oov: Sequence[str]) -> str:
        """`decode` of extended ids: `len(self) + k` is `oov[k]` (`Tokenizer.decode_extended`)."""
        return self._mapping.decode_extended(ids, oov)

    def card(self) -> dict:
        """How the text card decodes ids of this vocabulary: its tokenizer's Keras config."""
        return tokenizers.serialize(self._mapping)

    def to_dict(self) -> dict:
        """Serializable form, logged as an artifact."""
        return {"tokens": self.tokens, "joiner": self.joiner}
