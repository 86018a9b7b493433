"""`lm`: a language model over any text file, of characters, words or subword units (the
task was `charlm`, a name still accepted: `experiments.task_aliases`)."""

from __future__ import annotations

from pydoc_data.topics import topics
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from experiments import kinds, tasks
from experiments.data import text_corpus, units
from experiments.data.sections import MAX_SEQUENCE_LENGTH, TaskSection, existing_file
from experiments.data.split import Split
from experiments.data.task import Task
from experiments.data.vocab import Vocab
from experiments.errors import ConfigError


def default_corpus() -> str:
    """CPython's `pydoc_data.topics` help texts, always available offline."""
    return "\n\n".join(topics[key] for key in sorted(topics))


# Characters of the built-in text read without task.max_chars.
DEFAULT_CORPUS_CHARS = 200_000

# The words of a validation line a sample prompt takes.
PROMPT_WORDS = 3


@tasks.register
class LMTask(TaskSection):
    """Language model over a text file (default: `pydoc_data.topics`): of characters by
    default, or words or subword units (`task.units`)."""

    name: Literal["lm"]
    path: str | None = Field(
        None, description="A UTF-8 text file; unset: Python's `pydoc_data.topics`."
    )
    max_chars: int | None = Field(
        None,
        ge=100,
        description="At most this many characters of the text are read; unset: all of a "
        "file (`task.path`, streamed into a cached token store, so any size), and the first "
        f"{DEFAULT_CORPUS_CHARS:,} of the built-in text.",
    )
    max_eval_chars: int = Field(
        1_000_000,
        ge=100,
        description="The most characters of the validation part, and of the test part: for a "
        "large file `val_fraction` and `test_fraction` are lowered to keep about this many "
        "(they are scored whole).",
    )
    tokenizer_sample: int = Field(
        300_000,
        ge=100,
        description="The tokenizer is learnt on a random sample of this many lines of the "
        "training part (every line of a smaller text).",
    )
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
    def _room_for_subwords(self) -> LMTask:
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
        vocabulary on the training part alone. A file is streamed into a cached token
        store (`experiments.data.text_corpus`) and its training windows are cut from it
        as batches are made; the built-in text is small, and kept in memory. The sample
        prompts are the first words of the validation part's lines: your text's, not
        built in.
        """
        stride = self.stride or self.seq_length
        if self.path:
            built = text_corpus.load_or_build(self.path, self._text_settings())
            tokenizer, texts = built.tokenizer, {"val": built.val, "test": built.test}
            train = built.windows(self.seq_length, stride)
            chars = built.meta["chars"]
        else:
            text = default_corpus()[: self.max_chars or DEFAULT_CORPUS_CHARS]
            chars = len(text)
            n_train, n_val, _ = text_corpus.parts(len(text), self._text_settings())
            texts = {"val": text[n_train : n_train + n_val], "test": text[n_train + n_val :]}
            tokenizer = self._tokenizer([ln for ln in text[:n_train].splitlines() if ln.strip()])
            train = _windows(
                np.array(tokenizer.encode(text[:n_train]), "int32"), self.seq_length, stride
            )
        parts = {name: np.array(tokenizer.encode(t), "int32") for name, t in texts.items()}
        if len(parts["test"]) < 2:  # no target to score: the test split must be text of its own
            raise ConfigError(
                f"task.test_fraction: {self.test_fraction} of {chars} characters leaves "
                f"{len(parts['test'])} token(s) for the test split; expected at least 2 (raise "
                "task.test_fraction or task.max_chars)"
            )
        vocab = Vocab(tokenizer=tokenizer)
        splits = {name: _windows(part, self.seq_length, stride) for name, part in parts.items()}
        probes = splits["test"].take(slice(0, self.num_probes))
        return Task(
            self.name,
            kinds.get("lm"),
            vocab,
            train,
            splits["val"],
            splits["test"],
            probes,
            prompts=_prompts(texts["val"], self.num_probes),
            tokenizer=tokenizer,
        )

    def _tokenizer(self, lines: list[str]):
        """The task's tokenizer, learnt on these lines of the training part."""
        tokenizer = units.tokenizer(self.units, self.max_vocab)
        units.adapt(tokenizer, lines, "task.max_vocab", self.max_vocab)
        return tokenizer

    def _text_settings(self) -> text_corpus.Settings:
        return text_corpus.Settings(
            max_chars=self.max_chars,
            val_fraction=self.val_fraction,
            test_fraction=self.test_fraction,
            max_eval_chars=self.max_eval_chars,
            sample_lines=self.tokenizer_sample,
            min_chars=2 * (self.seq_length + 1),
            seed=self.seed,
            tokenizer_key={"units": self.units, "max_vocab": self.max_vocab},
            tokenizer=self._tokenizer,
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


def _fit(row: np.ndarray, length: int) -> np.ndarray:
    out = np.zeros(length, dtype="int32")
    out[: len(row)] = row
    return out
