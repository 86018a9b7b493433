"""`charlm`: a character language model over any text file."""

from __future__ import annotations

from collections import Counter
from pydoc_data.topics import topics
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from experiments import kinds, tasks
from experiments.data.sections import MAX_SEQUENCE_LENGTH, TaskSection, existing_file
from experiments.data.split import Split
from experiments.data.task import Task
from experiments.data.vocab import Vocab
from experiments.errors import ConfigError


def default_corpus() -> str:
    """CPython's `pydoc_data.topics` help texts, always available offline."""
    return "\n\n".join(topics[key] for key in sorted(topics))


@tasks.register
class CharLMTask(TaskSection):
    """Character language model over a text file (default: `pydoc_data.topics`)."""

    name: Literal["charlm"]
    path: str | None = Field(
        None, description="A UTF-8 text file; unset: Python's `pydoc_data.topics`."
    )
    max_chars: int = Field(200000, ge=100, description="The most characters read.")
    seq_length: int = Field(
        64, ge=4, le=MAX_SEQUENCE_LENGTH, description="Characters in a training window."
    )
    stride: int | None = Field(
        None, ge=1, description="Characters between two windows' starts; unset: `seq_length`."
    )
    max_vocab: int = Field(
        96,
        ge=4,
        description="Vocabulary size, special tokens included: rarer characters are `<unk>`.",
    )

    @field_validator("path")
    @classmethod
    def _path_exists(cls, value: str | None) -> str | None:
        return value if value is None else existing_file(value, "an existing text file")

    def build(self) -> Task:
        """Windows of `seq_length + 1` characters; the model predicts each next one.

        The text is split by position (train, then val, then test) so that
        neighbouring windows never straddle splits.
        """
        text = (
            _read_text(self.path, self.max_chars, self.seq_length)
            if self.path
            else default_corpus()
        )
        text = text[: self.max_chars]
        counts = Counter(text)
        chars = [c for c, _ in counts.most_common(self.max_vocab - 4)]
        vocab = Vocab(sorted(chars))
        tokenizer = vocab.tokenizer()  # each character a token; the rarest are <unk>
        ids = np.array(tokenizer.encode(text), dtype="int32")
        n_val = int(len(ids) * self.val_fraction)
        n_test = int(len(ids) * self.test_fraction)
        if n_test < 2:  # no target to score: the test split must be text of its own
            raise ConfigError(
                f"task.test_fraction: {self.test_fraction} of {len(ids)} characters leaves "
                f"{n_test} for the test split; expected at least 2 (raise task.test_fraction "
                "or task.max_chars)"
            )
        n_train = len(ids) - n_val - n_test
        parts = {
            "train": ids[:n_train],
            "val": ids[n_train : n_train + n_val],
            "test": ids[n_train + n_val :],
        }
        stride = self.stride or self.seq_length
        splits = {name: _windows(part, self.seq_length, stride) for name, part in parts.items()}
        probes = splits["test"].take(slice(0, self.num_probes))
        rng = np.random.default_rng(self.seed)
        starts = rng.integers(0, max(1, n_train - 32), size=self.num_probes)
        prompts = [text[s : s + 16] for s in starts]
        return Task(
            self.name,
            kinds.get("lm"),
            vocab,
            splits["train"],
            splits["val"],
            splits["test"],
            probes,
            prompts=prompts,
            tokenizer=tokenizer,
        )


def _windows(ids: np.ndarray, length: int, stride: int) -> Split:
    """Inputs `ids[s:s+length]` and targets shifted by one, for every stride."""
    starts = range(0, max(1, len(ids) - length), stride)
    x = np.stack([_fit(ids[s : s + length], length) for s in starts])
    y = np.stack([_fit(ids[s + 1 : s + length + 1], length) for s in starts])
    return Split(x, y)


def _read_text(path: str, max_chars: int, seq_length: int) -> str:
    """At most `max_chars` characters of a UTF-8 text file, with a clear error otherwise."""
    try:
        with open(path, encoding="utf-8") as handle:
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
