"""`pairs`: your own source -> target text pairs (translation, summarisation, any rewriting)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator
from sacrebleu.metrics import BLEU

from experiments import kinds, tasks
from experiments.data import records, units
from experiments.data.sections import MAX_SEQUENCE_LENGTH, TaskSection, existing_file
from experiments.data.split import Split, make_splits, pad
from experiments.data.task import Task
from experiments.data.vocab import END, START, Vocab
from experiments.errors import ConfigError


@tasks.register
class PairsTask(TaskSection):
    """Source/target text pairs from a TSV, CSV or JSONL file (split here, by source text),
    or from three files that are the training, validation and test splits."""

    name: Literal["pairs"]
    path: str | None = Field(
        None,
        description="One .tsv, .csv or .jsonl file of pairs, split here by source text (no "
        "source in two splits), deterministic from `task.seed`.",
    )
    train_path: str | None = Field(
        None, description="Instead of `path`: the training split as a file of its own."
    )
    val_path: str | None = Field(None, description="With `train_path`: the validation split.")
    test_path: str | None = Field(None, description="With `train_path`: the test split.")
    source_field: str | int = Field(
        "source",
        description="The source column (a header name, a JSONL key) or, in a TSV file "
        "without a header, its position (0).",
    )
    target_field: str | int = Field(
        "target", description="The target column, as `source_field` (position 1)."
    )
    units: str = Field(
        "subword",
        description="What a token is: a name of `keras_attn_rnn.tokenizers` (`char`, `word`, "
        "`subword`: SentencePiece, learnt on the training split).",
    )
    subword_model: Literal["unigram", "bpe"] = Field(
        "unigram", description="Subword units: SentencePiece's algorithm."
    )
    vocabulary_size: int = Field(
        8000,
        ge=16,
        description="The vocabulary's size (subword: SentencePiece's target, at least 300; "
        "char, word: the most kept).",
    )
    shared_vocabulary: bool = Field(
        True,
        description="One tokenizer for both sides (copy attention needs it), or one each.",
    )
    lowercase: bool = Field(False, description="Lower-case both sides before tokenizing.")
    max_source_length: int | None = Field(
        None,
        ge=1,
        le=MAX_SEQUENCE_LENGTH,
        description="The longest source, in tokens; unset: the training split's "
        "`length_percentile`-th percentile. Longer sources are cut (and counted); the served "
        "model cuts a request there too and says so.",
    )
    max_target_length: int | None = Field(
        None,
        ge=1,
        le=MAX_SEQUENCE_LENGTH,
        description="The longest target, in tokens, as `max_source_length`.",
    )
    length_percentile: float = Field(
        99.0, gt=0.0, le=100.0, description="The percentile the default lengths come from."
    )
    max_row_chars: int = Field(
        100_000,
        ge=16,
        description="The longest row of a file, in characters (a longer one is refused).",
    )
    bleu_tokenize: str = Field(
        "13a",
        description="sacrebleu's tokenisation for BLEU (`13a`; `zh`, `ja-mecab`, `char`, "
        "`intl`, ...).",
    )

    @field_validator("path", "train_path", "val_path", "test_path")
    @classmethod
    def _a_data_file(cls, value: str | None) -> str | None:
        if value is None:
            return value
        real = existing_file(value, "an existing .tsv, .csv or .jsonl file")
        if records.file_format(value) is None:
            raise ValueError(
                f"a file ending in {', '.join(sorted(records.FORMATS))}; got {Path(value).name}"
            )
        return real

    @field_validator("units")
    @classmethod
    def _registered_units(cls, value: str) -> str:
        return units.check_units(value)

    @field_validator("bleu_tokenize")
    @classmethod
    def _sacrebleu_tokenizer(cls, value: str) -> str:
        if value not in BLEU.TOKENIZERS:
            raise ValueError(f"one of sacrebleu's tokenizers: {', '.join(BLEU.TOKENIZERS)}")
        return value

    @model_validator(mode="after")
    def _one_source_of_data(self) -> PairsTask:
        files = [self.train_path, self.val_path, self.test_path]
        if (self.path is None) == all(f is None for f in files):
            raise ValueError(
                "either task.path (one file, split here) or task.train_path, task.val_path "
                "and task.test_path (the splits)"
            )
        if self.path is None and any(f is None for f in files):
            raise ValueError("task.train_path, task.val_path and task.test_path together")
        if isinstance(self.source_field, int) != isinstance(self.target_field, int):
            raise ValueError("task.source_field and task.target_field both names or both positions")
        if self.source_field == self.target_field:
            raise ValueError(f"two different fields, got {self.source_field!r} twice")
        if self.units == "subword" and self.vocabulary_size < units.SMALLEST_SUBWORD_VOCABULARY:
            raise ValueError(
                "task.vocabulary_size >= 300 with units: subword (256 byte pieces and the "
                f"special tokens come first), got {self.vocabulary_size}"
            )
        return self

    def build(self) -> Task:
        """Read the pairs, split them by source text (or take the given splits), learn the
        tokenizer(s) on the training split, cut examples past the lengths and encode."""
        if self.path is not None:
            pairs, duplicates = self._read("task.path", self.path)
            keys = [source for source, _ in pairs]
            if len(set(keys)) < 4:
                raise ConfigError(
                    f"task.path: {self.path} holds {len(set(keys))} distinct sources; expected "
                    "at least 4, for training, validation and test splits of their own"
                )
            order = np.arange(len(pairs))
            placeholder = Split(order[:, None], order)
            rng = np.random.default_rng(self.seed)
            parts = make_splits(placeholder, self, rng, keys)
            train, val, test = ([pairs[i] for i in part.y] for part in parts[:3])
        else:
            (train, a), (val, b), (test, c) = (
                self._read(key, path)
                for key, path in (
                    ("task.train_path", self.train_path),
                    ("task.val_path", self.val_path),
                    ("task.test_path", self.test_path),
                )
            )
            duplicates = a + b + c
        source_tokenizer, target_tokenizer = self._tokenizers(train)
        source_length = self.max_source_length or _percentile_length(
            source_tokenizer, [s for s, _ in train], self.length_percentile
        )
        target_length = self.max_target_length or _percentile_length(
            target_tokenizer, [t for _, t in train], self.length_percentile
        )
        cut = Counter()
        splits = [
            _encode(rows, source_tokenizer, target_tokenizer, source_length, target_length, cut)
            for rows in (train, val, test)
        ]
        probes = splits[2].take(slice(0, self.num_probes))
        source_vocab = Vocab(tokenizer=source_tokenizer)
        target_vocab = source_vocab if self.shared_vocabulary else Vocab(tokenizer=target_tokenizer)
        return Task(
            self.name,
            kinds.get("seq2seq"),
            source_vocab,
            *splits,
            probes,
            target_vocab=target_vocab,
            tokenizer=source_tokenizer,
            duplicate_rows=duplicates,
            data_counts={
                "truncated_sources": cut["sources"],
                "truncated_targets": cut["targets"],
                "max_source_length": int(source_length),
                "max_target_length": int(target_length),
            },
            max_input_tokens=int(source_length),
            bleu_tokenize=self.bleu_tokenize,
        )

    def _read(self, key: str, path: str) -> tuple[list[tuple[str, str]], int]:
        """The distinct (source, target) rows of `path` in file order, and how many rows
        repeated an earlier one (dropped)."""
        seen, pairs = set(), []
        rows = 0
        for row in records.read_rows(
            path, (self.source_field, self.target_field), self.max_row_chars, key
        ):
            rows += 1
            pair = (row.values[0], row.values[1])
            if pair not in seen:
                seen.add(pair)
                pairs.append(pair)
        if not pairs:
            raise ConfigError(f"{key}: {path} holds no rows; expected source/target pairs")
        return pairs, rows - len(pairs)

    def _tokenizers(self, train):
        """The source and target tokenizers, learnt on the training split only."""
        sources, targets = [s for s, _ in train], [t for _, t in train]
        size = self.vocabulary_size
        if self.shared_vocabulary:
            shared = self._tokenizer()
            units.adapt(shared, sources + targets, "task.vocabulary_size", size)
            return shared, shared
        source, target = self._tokenizer(), self._tokenizer()
        units.adapt(source, sources, "task.vocabulary_size", size)
        units.adapt(target, targets, "task.vocabulary_size", size)
        return source, target

    def _tokenizer(self):
        return units.tokenizer(self.units, self.vocabulary_size, self.lowercase, self.subword_model)


def _percentile_length(tokenizer, texts, percentile: float) -> int:
    """The `percentile`-th percentile of the texts' lengths in tokens (at least 1)."""
    lengths = [len(tokenizer.encode(text)) for text in texts]
    return max(1, int(np.ceil(np.percentile(lengths, percentile))))


def _encode(rows, source_tokenizer, target_tokenizer, source_length, target_length, cut) -> Split:
    """Teacher-forced arrays of `rows` (source, target), sources cut to `source_length` ids
    and targets to `target_length` (`cut` counts them), the texts kept as written."""
    sources, targets = [], []
    for source, target in rows:
        ids = source_tokenizer.encode(source)
        cut["sources"] += len(ids) > source_length
        sources.append(ids[:source_length])
        ids = target_tokenizer.encode(target)
        cut["targets"] += len(ids) > target_length
        targets.append(ids[:target_length] + [END])
    y = pad(targets)
    x_dec = pad([[START] + t[:-1] for t in targets], y.shape[1])
    return Split(pad(sources), y, x_dec, texts=list(rows))
