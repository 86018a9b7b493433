"""`pairs`: your own source -> target text pairs (translation, summarisation, any rewriting)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from sacrebleu.metrics import BLEU

from experiments import kinds, tasks
from experiments.data import corpus, records, units
from experiments.data.sections import MAX_SEQUENCE_LENGTH, TaskSection, existing_file
from experiments.data.split import Split, pad
from experiments.data.task import Task
from experiments.data.vocab import END, START, Vocab
from experiments.errors import ConfigError
from keras_attn_rnn import tokenizers


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

    tokenizer_sample: int = Field(
        300_000,
        ge=100,
        description="The tokenizer (and the default lengths) is learnt from a random sample of "
        "this many training pairs (every pair of a smaller file): its time and memory do not "
        "grow with the file.",
    )
    subword_model_path: str | None = Field(
        None,
        description="A trained SentencePiece `.model` file to use for both sides instead of "
        "learning one (ids <pad> 0, <s> 1, </s> 2, <unk> 3; `units: subword`).",
    )
    max_eval_rows: int = Field(
        5_000,
        ge=1,
        description="The most rows of the validation split, and of the test split, of a file "
        "split here: for a large file `val_fraction` and `test_fraction` are lowered to keep "
        "about this many (they are scored whole, every epoch and at the end).",
    )

    @field_validator("subword_model_path")
    @classmethod
    def _a_model_file(cls, value: str | None) -> str | None:
        return None if value is None else existing_file(value, "a SentencePiece .model file")

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
        """Stream the pairs into the cached corpus (`experiments.data.corpus`: split by a hash
        of the source text, or the given splits; the tokenizer(s) learnt on a sample of the
        training rows; the training rows encoded into a token store), then encode the
        validation and test rows, cut past the lengths."""
        split_here = self.path is not None
        key, path = ("task.path", self.path) if split_here else ("task.train_path", self.train_path)
        built = corpus.load_or_build(
            path, self._corpus_settings(split_here), self._reader(key, path), key
        )
        meta = built.meta
        duplicates = meta["duplicate_rows"]
        if split_here:
            val_rows, test_rows = built.val, built.test
        else:
            (val_rows, a), (test_rows, b) = (
                self._read(key, path)
                for key, path in (
                    ("task.val_path", self.val_path),
                    ("task.test_path", self.test_path),
                )
            )
            duplicates += a + b
        source_length, target_length = meta["max_source_length"], meta["max_target_length"]
        cut = Counter(sources=meta["truncated_sources"], targets=meta["truncated_targets"])
        val, test = (
            _encode(
                rows,
                built.source_tokenizer,
                built.target_tokenizer,
                source_length,
                target_length,
                cut,
            )
            for rows in (val_rows, test_rows)
        )
        probes = test.take(slice(0, self.num_probes))
        source_vocab = Vocab(tokenizer=built.source_tokenizer)
        target_vocab = (
            source_vocab if self.shared_vocabulary else Vocab(tokenizer=built.target_tokenizer)
        )
        return Task(
            self.name,
            kinds.get("seq2seq"),
            source_vocab,
            built.train,
            val,
            test,
            probes,
            target_vocab=target_vocab,
            tokenizer=built.source_tokenizer,
            duplicate_rows=duplicates,
            data_counts={
                "truncated_sources": cut["sources"],
                "truncated_targets": cut["targets"],
                "max_source_length": int(source_length),
                "max_target_length": int(target_length),
                "tokenizer_sample_rows": meta["sample_rows"],
            },
            max_input_tokens=int(source_length),
            bleu_tokenize=self.bleu_tokenize,
        )

    def _reader(self, key: str, path: str):
        """What `corpus` reads the file with: its (source, target) rows, afresh each call."""
        fields = (self.source_field, self.target_field)

        def read():
            for row in records.read_rows(path, fields, self.max_row_chars, key):
                yield row.values[0], row.values[1]

        return read

    def _corpus_settings(self, split_here: bool) -> corpus.Settings:
        tokenizer_key = {
            "units": self.units,
            "vocabulary_size": self.vocabulary_size,
            "subword_model": self.subword_model,
            "shared_vocabulary": self.shared_vocabulary,
            "lowercase": self.lowercase,
            "subword_model_path": (
                corpus.file_digest(self.subword_model_path) if self.subword_model_path else None
            ),
        }
        return corpus.Settings(
            fields=(self.source_field, self.target_field),
            split_here=split_here,
            seed=self.seed,
            val_fraction=self.val_fraction,
            test_fraction=self.test_fraction,
            max_eval_rows=self.max_eval_rows,
            sample_rows=self.tokenizer_sample,
            max_row_chars=self.max_row_chars,
            max_source_length=self.max_source_length,
            max_target_length=self.max_target_length,
            length_percentile=self.length_percentile,
            tokenizer_key=tokenizer_key,
            tokenizers=self._tokenizers,
        )

    def _read(self, key: str, path: str) -> tuple[list[tuple[str, str]], int]:
        """The distinct (source, target) rows of `path` in file order, and how many rows
        repeated an earlier one (dropped)."""
        seen, pairs = set(), []
        rows = 0
        for pair in self._reader(key, path)():
            rows += 1
            if pair not in seen:
                seen.add(pair)
                pairs.append(pair)
        if not pairs:
            raise ConfigError(f"{key}: {path} holds no rows; expected source/target pairs")
        return pairs, rows - len(pairs)

    def _tokenizers(self, sources: list[str], targets: list[str]):
        """The source and target tokenizers, learnt on these training texts (or the given
        SentencePiece model, for both sides)."""
        if self.subword_model_path is not None:
            given = _given_subword_model(self.subword_model_path, self.lowercase)
            return given, given
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


def _given_subword_model(path: str, lowercase: bool):
    """The SentencePiece model in `path` as the task's tokenizer; refused (exit 2) when it is
    no model, or not one with the library's special ids."""
    try:
        return tokenizers.SentencePieceTokenizer(proto=Path(path).read_bytes(), lowercase=lowercase)
    except ValueError as err:
        raise ConfigError(
            f"task.subword_model_path: {path} cannot be used: {err} (train it with "
            "--pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3)"
        ) from None


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
