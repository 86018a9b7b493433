"""One tokenizer for the runner and the served text model: raw text <-> token ids.

The runner's task builders make their token ids through a `Tokenizer`, the
`Task` holds it, the run's text card stores its config (`to_config`), and
the text model (`experiments/tracking/text_model.py`) rebuilds it from the
card (`from_config`) to encode what it is sent: one class on both sides, so
serving cannot drift from training.

Why a top-level module: MLflow copies each entry of a model's `code_paths`
into the model's `code/` folder and puts that folder first on `sys.path`
when the model loads, so a file shipped there imports by its file name
(`import text_tokenizer`). The runner runs from a checkout, where this file
sits beside `experiments/` on the path, so it imports by that same name: the
runner and the served model load one module, not two copies under two names.
Inside `experiments` it would be `experiments.…` for the runner but a
top-level name in the served model (which must not import the runner);
inside `keras_attn_rnn` it would put a task's text handling into the layer
library's wheel. It needs the standard library only, so the served model
needs nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

# The ids every vocabulary starts with.
PAD, START, END, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
SPLITS = ("chars", "whitespace", "regex")


class Extended(NamedTuple):
    """A text encoded for copy attention (`Tokenizer.encode_extended`).

    `ids`: vocabulary ids, a token outside the vocabulary as `<unk>`;
    `extended`: the same, but the k-th distinct unknown token as
    `len(vocabulary) + k`; `oov`: those unknown tokens, in order of first
    appearance (extended id `len(vocabulary) + k` is `oov[k]`).
    """

    ids: list[int]
    extended: list[int]
    oov: list[str]


class Tokenizer:
    """Raw text -> tokens -> ids with a vocabulary, and ids -> text.

    A text becomes tokens in this order: padded with spaces on the right to
    `pad_to` characters (a longer text is kept whole), reversed with
    `reverse`, lower-cased with `lowercase`, split, and cut to `max_tokens`.
    Tokens become ids through the vocabulary `tokens`; a token not in it is
    `<unk>`, and with `empty_as_unknown` a text with no tokens is one
    `<unk>`. `decode` goes back: the tokens of the ids up to the first
    `</s>`, special tokens dropped, joined with `joiner`, un-reversed and
    stripped of the padding: a text that encodes to the same ids again,
    where the ids are in the vocabulary and the split can find the tokens
    once joined.

    For copy attention (`keras_attn_rnn.copying`) a text also encodes over an
    extended vocabulary (`encode_extended`): each distinct unknown token gets
    a temporary id past the vocabulary, `len(tokens)`, `len(tokens) + 1`, ...
    in order of first appearance; a target encodes against a source's unknown
    tokens (`encode_target`), and `decode_extended` writes extended ids back
    as those tokens.

    Args:
        tokens: the vocabulary in id order, starting with `SPECIALS` (`<pad>`,
            `<s>`, `</s>`, `<unk>`); default: the special tokens alone (every
            token is `<unk>`: the rules before a vocabulary is made).
        joiner: what `decode` joins tokens with (`""` for characters).
        split: `"chars"` (each code point a token), `"whitespace"`
            (`str.split()`: no empty tokens) or `"regex"` (every match of
            `pattern`, `re.findall`).
        pattern: the regular expression of `split="regex"` (required there,
            refused otherwise).
        lowercase: lower-case the text before splitting.
        pad_to: the width a text is padded to first, or None.
        reverse: reverse the (padded) text.
        max_tokens: keep the first `max_tokens` tokens, or None for all.
        empty_as_unknown: encode a text with no tokens as one `<unk>`.

    Example:

    >>> from text_tokenizer import SPECIALS, Tokenizer
    >>> tokenizer = Tokenizer([*SPECIALS, "a", "b"], split="chars", reverse=True)
    >>> tokenizer.encode("abc")
    [3, 5, 4]
    >>> tokenizer.decode([5, 4, 2])
    'ab'
    >>> words = Tokenizer([*SPECIALS, "meet", "at"], split="whitespace", joiner=" ")
    >>> source = words.encode_extended("meet Ada at Oslo")
    >>> source
    Extended(ids=[4, 3, 5, 3], extended=[4, 6, 5, 7], oov=['Ada', 'Oslo'])
    >>> words.encode_target("Oslo at Bob", source.oov)
    [7, 5, 3]
    >>> words.decode_extended([7, 5, 6, 2], source.oov)
    'Oslo at Ada'
    """

    def __init__(
        self,
        tokens: Sequence[str] = SPECIALS,
        *,
        joiner: str = "",
        split: str = "chars",
        pattern: str | None = None,
        lowercase: bool = False,
        pad_to: int | None = None,
        reverse: bool = False,
        max_tokens: int | None = None,
        empty_as_unknown: bool = False,
    ):
        tokens = list(tokens)
        if tokens[: len(SPECIALS)] != list(SPECIALS):
            raise ValueError(
                f"tokens must start with the special tokens {list(SPECIALS)}. "
                f"Received: tokens={tokens[: len(SPECIALS)]!r}..."
            )
        if not isinstance(joiner, str):
            raise ValueError(f"joiner must be a string. Received: joiner={joiner!r}")
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
        for name, value in (("pad_to", pad_to), ("max_tokens", max_tokens)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(
                    f"{name} must be a positive integer or None. Received: {name}={value!r}"
                )
        self.tokens = tokens
        self.joiner = joiner
        self.split = split
        self.pattern = pattern
        self.lowercase = bool(lowercase)
        self.pad_to = pad_to
        self.reverse = bool(reverse)
        self.max_tokens = max_tokens
        self.empty_as_unknown = bool(empty_as_unknown)
        try:
            self._regex = None if pattern is None else re.compile(pattern)
        except (re.error, TypeError) as err:
            raise ValueError(
                f"pattern must be a regular expression ({err}). Received: pattern={pattern!r}"
            ) from None
        self.index = {token: i for i, token in enumerate(tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    def __eq__(self, other) -> bool:
        return isinstance(other, Tokenizer) and self.to_config() == other.to_config()

    __hash__ = None  # mutable, like its config

    def __repr__(self) -> str:
        rules = {k: v for k, v in self.to_config().items() if k != "tokens"}
        return f"Tokenizer(<{len(self.tokens)} tokens>, {rules})"

    def tokenize(self, text: str) -> list[str]:
        """The tokens of `text`, before they become ids."""
        if self.pad_to:
            text = text.ljust(self.pad_to)
        if self.reverse:
            text = text[::-1]
        if self.lowercase:
            text = text.lower()
        if self.split == "whitespace":
            tokens = text.split()
        elif self.split == "regex":
            tokens = self._regex.findall(text)
        else:
            tokens = list(text)
        return tokens if self.max_tokens is None else tokens[: self.max_tokens]

    def token_ids(self, tokens: Iterable[str]) -> list[int]:
        """Ids of tokens made by `tokenize`: unknown ones `<unk>`, none `[<unk>]` with
        `empty_as_unknown`."""
        ids = [self.index.get(token, UNK) for token in tokens]
        if not ids and self.empty_as_unknown:
            ids = [UNK]
        return ids

    def encode(self, text: str) -> list[int]:
        """Ids of `text`: `token_ids(tokenize(text))`."""
        return self.token_ids(self.tokenize(text))

    def encode_extended(self, text: str, max_oov: int | None = None) -> Extended:
        """`text` encoded for copy attention: its ids, its extended ids and its unknown tokens
        (see `Extended`); with `max_oov`, unknown tokens past the first `max_oov` distinct
        ones stay `<unk>` in `extended` too and are left out of `oov`."""
        if max_oov is not None and (
            isinstance(max_oov, bool) or not isinstance(max_oov, int) or max_oov < 0
        ):
            raise ValueError(
                f"max_oov must be an integer >= 0 or None. Received: max_oov={max_oov!r}"
            )
        tokens = self.tokenize(text)
        ids = self.token_ids(tokens)
        if not tokens:  # no tokens: `ids` is [] or, with empty_as_unknown, [<unk>]
            return Extended(ids, list(ids), [])
        oov: dict[str, int] = {}
        extended = []
        for token, i in zip(tokens, ids):
            if i == UNK and token not in self.index:
                if token not in oov and (max_oov is None or len(oov) < max_oov):
                    oov[token] = len(self.tokens) + len(oov)
                i = oov.get(token, UNK)
            extended.append(i)
        return Extended(ids, extended, list(oov))

    def encode_target(self, text: str, oov: Sequence[str]) -> list[int]:
        """Extended ids of a target `text` against its source's unknown tokens `oov`: an
        unknown token that is `oov[k]` is `len(tokens) + k`, any other one `<unk>`."""
        position = {token: len(self.tokens) + k for k, token in enumerate(oov)}
        tokens = self.tokenize(text)
        ids = self.token_ids(tokens)
        if not tokens:  # `ids` is [] or, with empty_as_unknown, [<unk>]
            return ids
        return [
            position.get(token, UNK) if i == UNK and token not in self.index else i
            for token, i in zip(tokens, ids)
        ]

    def label(self, i: int, oov: Sequence[str] = ()) -> str:
        """The token of id `i`; an extended id `len(tokens) + k` is `oov[k]`, or `<unk>` past
        the end of `oov`."""
        i = int(i)
        if i < len(self.tokens):
            return self.tokens[i]
        return oov[i - len(self.tokens)] if i - len(self.tokens) < len(oov) else SPECIALS[UNK]

    def decode_extended(self, ids: Iterable[int], oov: Sequence[str]) -> str:
        """`decode` of extended ids: `len(tokens) + k` is `oov[k]`; an extended id past the
        end of `oov` is dropped, as `<unk>` is."""
        return self._decode(ids, oov)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids` up to the first `</s>`, without special tokens, un-reversed, unpadded."""
        return self._decode(ids, None)

    def _decode(self, ids: Iterable[int], oov: Sequence[str] | None) -> str:
        kept = []
        for i in ids:
            i = int(i)
            if i == END:
                break
            if oov is not None and i >= len(self.tokens):
                if i - len(self.tokens) < len(oov):
                    kept.append(oov[i - len(self.tokens)])
            elif i >= len(SPECIALS):
                kept.append(self.tokens[i])
        text = self.joiner.join(kept)
        if self.reverse:
            text = text[::-1]
        if self.pad_to:
            text = text.rstrip(" ")
        return text

    def replace(self, **changes) -> Tokenizer:
        """A copy with the arguments in `changes` replaced (e.g. a vocabulary: `tokens=`)."""
        return Tokenizer.from_config({**self.to_config(), **changes})

    def to_config(self) -> dict:
        """Every argument, as JSON (the text card's `input`)."""
        return {
            "tokens": list(self.tokens),
            "joiner": self.joiner,
            "split": self.split,
            "pattern": self.pattern,
            "lowercase": self.lowercase,
            "pad_to": self.pad_to,
            "reverse": self.reverse,
            "max_tokens": self.max_tokens,
            "empty_as_unknown": self.empty_as_unknown,
        }

    @classmethod
    def from_config(cls, config: dict) -> Tokenizer:
        """The tokenizer of `to_config`, or of a text card's `input`/`output` written by an
        earlier version (only the keys it set; the others take their defaults)."""
        unknown = sorted(set(config) - set(cls().to_config()))
        if unknown:
            raise ValueError(
                f"config has keys a Tokenizer does not take. Received: {', '.join(unknown)}"
            )
        return cls(**config)
