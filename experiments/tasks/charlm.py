"""`charlm`: a language model over any text file, of characters, words or subword units."""

from __future__ import annotations

from pydoc_data.topics import topics
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from experiments import kinds, tasks
from experiments.data import records, units
from experiments.data.sections import MAX_SEQUENCE_LENGTH, TaskSection, existing_file
from experiments.data.split import Split
from experiments.data.task import Task
from experiments.data.vocab import Vocab
from experiments.errors import ConfigError


def default_corpus() -> str:
    """CPython's `pydoc_data.topics` help texts, always available offline."""
    return "\n\n".join(topics[key] for key in sorted(topics))


# The words of a validation line a sample prompt takes.
PROMPT_WORDS = 3


@tasks.register
class CharLMTask(TaskSection):
    """Language model over a text file (default: `pydoc_data.topics`): of characters by
    default, or words or subword units (`task.units`)."""

    name: Literal["charlm"]
    path: str | None = Field(
        None, description="A UTF-8 text file; unset: Python's `pydoc_data.topics`."
    )
    max_chars: int = Field(200000, ge=100, description="The most characters read.")
    units: str = Field(
        "char",
        description="What a token is: a name of `keras_attn_rnn.tokenizers` (`char`, `word`, "
        "`subword`: SentencePiece), learnt on the training part of the text.",
    )
    seq_length: int = Field(
        64, ge=4, le=MAX_SEQUENCE_LENGTH, description="Tokens in a training window."
    )
    stride: int | None = Field(
        None, ge=1, description="Tokens between two windows' starts; unset: `seq_length`."
    )
    max_vocab: int = Field(
        96,
        ge=5,
        description="Vocabulary size, special tokens included: rarer tokens are `<unk>` "
        "(subword units: SentencePiece's target, at least 300).",
    )

    @field_validator("units")
    @classmethod
    def _registered_units(cls, value: str) -> str:
        return units.check_units(value)

    @model_validator(mode="after")
    def _room_for_subwords(self) -> CharLMTask:
        if self.units == "subword" and self.max_vocab < units.SMALLEST_SUBWORD_VOCABULARY:
            raise ValueError(
                "task.max_vocab >= 300 with units: subword (256 byte pieces and the special "
                f"tokens come first), got {self.max_vocab}"
            )
        return self

    @field_validator("path")
    @classmethod
    def _path_exists(cls, value: str | None) -> str | None:
        return value if value is None else existing_file(value, "an existing text file")

    def build(self) -> Task:
        """Windows of `seq_length + 1` tokens; the model predicts each next one.

        The text is split by position (train, then val, then test) so that
        neighbouring windows never straddle splits; the tokenizer learns its
        vocabulary on the training part alone. The sample prompts are the first
        words of the validation part's lines: your text's, not built in.
        """
        text = (
            _read_text(self.path, self.max_chars, self.seq_length)
            if self.path
            else default_corpus()
        )
        text = text[: self.max_chars]
        n_val = int(len(text) * self.val_fraction)
        n_test = int(len(text) * self.test_fraction)
        n_train = len(text) - n_val - n_test
        texts = {
            "train": text[:n_train],
            "val": text[n_train : n_train + n_val],
            "test": text[n_train + n_val :],
        }
        tokenizer = units.tokenizer(self.units, self.max_vocab)
        lines = [line for line in texts["train"].splitlines() if line.strip()]
        units.adapt(tokenizer, lines, "task.max_vocab", self.max_vocab)
        parts = {name: np.array(tokenizer.encode(t), "int32") for name, t in texts.items()}
        if len(parts["test"]) < 2:  # no target to score: the test split must be text of its own
            raise ConfigError(
                f"task.test_fraction: {self.test_fraction} of {len(text)} characters leaves "
                f"{len(parts['test'])} token(s) for the test split; expected at least 2 (raise "
                "task.test_fraction or task.max_chars)"
            )
        vocab = Vocab(tokenizer=tokenizer)
        stride = self.stride or self.seq_length
        splits = {name: _windows(part, self.seq_length, stride) for name, part in parts.items()}
        probes = splits["test"].take(slice(0, self.num_probes))
        return Task(
            self.name,
            kinds.get("lm"),
            vocab,
            splits["train"],
            splits["val"],
            splits["test"],
            probes,
            prompts=_prompts(texts["val"], self.num_probes),
            tokenizer=tokenizer,
        )


def _prompts(text: str, count: int) -> list[str]:
    """The first `PROMPT_WORDS` words of the first `count` whole lines of `text` that have a
    word, each ending in a space (the model continues the line); a text without a whole
    line gives its own first words."""
    prompts = []
    for line in text.splitlines()[1:]:  # the first line is cut where the part begins
        words = line.split()
        if words and len(prompts) < count:
            prompts.append(" ".join(words[:PROMPT_WORDS]) + " ")
    if not prompts and text.split():  # no whole line: the part's own first words
        prompts.append(" ".join(text.split()[:PROMPT_WORDS]) + " ")
    return prompts


def _windows(ids: np.ndarray, length: int, stride: int) -> Split:
    """Inputs `ids[s:s+length]` and targets shifted by one, for every stride."""
    starts = range(0, max(1, len(ids) - length), stride)
    x = np.stack([_fit(ids[s : s + length], length) for s in starts])
    y = np.stack([_fit(ids[s + 1 : s + length + 1], length) for s in starts])
    return Split(x, y)


def _read_text(path: str, max_chars: int, seq_length: int) -> str:
    """At most `max_chars` characters of a UTF-8 text file (a byte order mark at its start
    dropped), with a clear error otherwise."""
    try:
        with open(path, encoding=records.ENCODING) as handle:
            text = handle.read(max_chars)  # never more than asked, however big the file
    except UnicodeDecodeError as err:
        raise ConfigError(f"task.path: {path} is not UTF-8 text ({err})") from None
    if len(text) < 2 * (seq_length + 1):
        raise ConfigError(
            f"task.path: {path} holds {len(text)} characters; expected at least "
            f"{2 * (seq_length + 1)} (twice task.seq_length + 1)"
        )
    return text


def _fit(row: np.ndarray, length: int) -> np.ndarray:
    out = np.zeros(length, dtype="int32")
    out[: len(row)] = row
    return out
