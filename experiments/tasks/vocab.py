"""Token <-> id vocabularies; ids 0-3 are the special tokens every task shares."""

from __future__ import annotations

from collections.abc import Iterable

PAD, START, END, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")


class Vocab:
    """Token <-> id mapping; ids 0-3 are `<pad>`, `<s>`, `</s>`, `<unk>`.

    Args:
        tokens: the non-special tokens, in id order.
        joiner: string used to join decoded tokens ("" for characters).
    """

    def __init__(self, tokens: Iterable[str], joiner: str = ""):
        self.tokens = list(SPECIALS) + [t for t in tokens if t not in SPECIALS]
        self.joiner = joiner
        self.index = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of `tokens`; unknown tokens map to `<unk>`."""
        return [self.index.get(t, UNK) for t in tokens]

    def labels(self, ids: Iterable[int]) -> list[str]:
        """Token strings of `ids`, padding dropped."""
        return [self.tokens[int(i)] for i in ids if int(i) != PAD]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids` up to the first `</s>`, without specials."""
        out = []
        for i in ids:
            i = int(i)
            if i == END:
                break
            if i >= len(SPECIALS):
                out.append(self.tokens[i])
        return self.joiner.join(out)

    def to_dict(self) -> dict:
        """Serializable form, logged as an artifact."""
        return {"tokens": self.tokens, "joiner": self.joiner}
