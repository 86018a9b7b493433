"""What a token is in a task that reads your text: the one place a task's `units` becomes a
tokenizer of `keras_attn_rnn.tokenizers` (`char`, `word`, `subword`)."""

from __future__ import annotations

import warnings

from experiments.data import progress
from experiments.errors import ConfigError
from keras_attn_rnn import tokenizers
from keras_attn_rnn.tokenizers.sentence_piece_tokenizer import MostlyBytesWarning

# Words and single punctuation marks (`units: word`; the classifier's file task too).
WORD_PATTERN = r"\w+|[^\w\s]"
# With byte fallback SentencePiece needs room for 256 byte pieces and the special tokens.
SMALLEST_SUBWORD_VOCABULARY = 300


def check_units(value: str) -> str:
    """A task section's `units` validator: a registered tokenizer name."""
    tokenizers.REGISTRY.check_name(value, "units")
    return value


def tokenizer(units: str, vocabulary_size: int, lowercase: bool = False, subword_model="unigram"):
    """An unadapted tokenizer of `units` with at most `vocabulary_size` tokens (subword:
    SentencePiece's target): `adapt` it on the training split."""
    if units == "subword":
        return tokenizers.get(
            "subword",
            vocabulary_size=vocabulary_size,
            model_type=subword_model,
            lowercase=lowercase,
            byte_fallback=True,  # a served model never meets <unk>: room for 256 bytes
        )
    options = {"lowercase": lowercase, "vocabulary_size": vocabulary_size}
    if units == "word":
        options["pattern"] = WORD_PATTERN
    return tokenizers.get(units, **options)


def adapt(tokenizer, texts, key: str, size: int) -> None:
    """`tokenizer.adapt(texts)`, its refusal (SentencePiece's: a vocabulary too small for the
    text's characters) a `ConfigError` naming `key`, the task's vocabulary size (`size`)."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tokenizer.adapt(texts)
    except ValueError as err:
        reason = str(err).split(" Received: ")[0].removesuffix(".")
        raise ConfigError(
            f"{key}: the tokenizer could not learn a vocabulary of at most {size} tokens from "
            f"the training split: {reason} (raise {key}). Received: {key}={size}"
        ) from None
    for warning in caught:
        if issubclass(warning.category, MostlyBytesWarning):
            # The library's advice names its own arguments; the runner keeps byte fallback
            # (a served model never meets <unk>), so only the vocabulary size is the user's.
            progress.note(
                f"{key}: {size} subword units, 256 of them byte pieces: text is mostly spelt "
                f"one character at a time (raise {key} to 1000 or more for subwords)"
            )
        else:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
