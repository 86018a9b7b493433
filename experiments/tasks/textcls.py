"""`textcls`: text classification from a CSV/JSONL file, or IMDB when online."""

from __future__ import annotations

import csv
import json
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import keras
import numpy as np
from pydantic import Field, field_validator, model_validator

from experiments import kinds, tasks
from experiments.bounded_input import RecordLines
from experiments.data import label_corpus, records, units
from experiments.data.sections import MAX_SEQUENCE_LENGTH, TaskSection, existing_file
from experiments.data.split import Split, duplicate_count, make_splits, pad, row_keys
from experiments.data.task import Task
from experiments.data.vocab import SPECIALS, UNK, Vocab
from experiments.errors import ConfigError, shown
from keras_attn_rnn.tokenizers import VocabularyTokenizer

# Words and single punctuation marks.
TOKEN_PATTERN = units.WORD_PATTERN

# Tokens of an IMDB review fed to the model, without task.max_length.
IMDB_LENGTH = 200

# The longest label: a class name (a longer value is another column, or text).
MAX_LABEL_CHARS = 200


def tokenizer(cfg, vocab: Vocab | None = None) -> VocabularyTokenizer:
    """How `build` turns a text into ids (`Task.tokenizer`): its words and single punctuation
    marks (lower-cased with `cfg.lowercase`), never none; over `vocab` (without one, every
    token is `<unk>`: the rules alone). Where a text is cut is the task's
    `max_input_tokens` (the served model cuts there too, and says so)."""
    tokens = SPECIALS if vocab is None else vocab.tokens
    return VocabularyTokenizer(
        tokens,
        joiner=" ",
        split="regex",
        pattern=TOKEN_PATTERN,
        lowercase=cfg.lowercase,
        empty_as_unknown=True,
    )


def read_rows(
    path: str, text_field: str, label_field: str, max_row_chars: int
) -> Iterator[tuple[str, str]]:
    """(text, label) pairs from a CSV file with a header row, or a JSONL file, read a row at
    a time (a stream: nothing is kept): a row longer than `max_row_chars` is refused once
    that many characters of it were read, as is a label that is not a class name
    (`_check_label`)."""
    try:
        yield from _read_rows(path, text_field, label_field, max_row_chars)
    except (UnicodeDecodeError, csv.Error, json.JSONDecodeError) as err:
        kind = "CSV" if Path(path).suffix.lower() == ".csv" else "JSONL"
        raise ConfigError(
            f"task.path: {path} is not a readable UTF-8 {kind} file ({type(err).__name__}: {err})"
        ) from None


def _read_rows(
    path: str, text_field: str, label_field: str, max_row_chars: int
) -> Iterator[tuple[str, str]]:
    with (
        open(path, encoding=records.ENCODING, newline="") as handle,
        records.csv_fields_up_to(max_row_chars),
    ):
        lines = RecordLines(handle, path, max_row_chars, "task.max_row_chars")
        for number, record in _records(lines, Path(path).suffix.lower() == ".csv", path):
            if not isinstance(record, dict):
                raise ConfigError(
                    f"task.path: row {number} of {path} is not an object with "
                    f"{text_field!r} and {label_field!r} fields. Received: {shown(record)}"
                )
            if text_field not in record or label_field not in record:
                raise ConfigError(
                    f"task.path: row {number} of {path} lacks the field "
                    f"{text_field!r} or {label_field!r} (set task.text_field / task.label_field)"
                )
            if record[label_field] in (None, "") or record[text_field] is None:
                raise ConfigError(
                    f"task.path: row {number} of {path} has no {label_field!r} or no "
                    f"{text_field!r} value"
                )
            label = str(record[label_field])
            _check_label(label, f"row {number} (line {lines.line}) of {path}", label_field)
            yield str(record[text_field]), label


def _records(lines: RecordLines, is_csv: bool, path: str) -> Iterator[tuple[int, object]]:
    """(row number, record) of each row: a CSV row as a dict by the header, a JSONL line as
    what it holds (blank lines skipped); each row bounded by `lines`."""
    if not is_csv:
        number = 0
        for line in lines:
            lines.next_record()
            if line.strip():
                number += 1
                where = f"row {number} (line {lines.line}) of {path}"
                yield number, records.json_value(line, "task.path", where)
        return
    rows = csv.DictReader(lines)
    rows.fieldnames  # noqa: B018 - reads the header row, a record of its own
    lines.next_record()
    for number, record in enumerate(rows, start=1):
        lines.next_record()
        yield number, record


def _check_label(label: str, where: str, label_field: str) -> None:
    """Refuse a label that is no class name: one with a control character (a NUL would make
    `negative` and `negative\\x00` two classes that print alike) or over `MAX_LABEL_CHARS`."""
    control = next((c for c in label if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        raise ConfigError(
            f"task.path: {where}: the {label_field!r} value {shown(label)} holds the control "
            f"character U+{ord(control):04X}; expected a label of printable characters"
        )
    if len(label) > MAX_LABEL_CHARS:
        raise ConfigError(
            f"task.path: {where}: the {label_field!r} value is {len(label)} characters long "
            f"({shown(label)}); expected a class name of at most {MAX_LABEL_CHARS} (is "
            "task.label_field the label column?)"
        )


@tasks.register
class TextClsTask(TaskSection):
    """A CSV/JSONL file of `text,label` rows, or IMDB via `keras.datasets`."""

    name: Literal["textcls"]
    path: str | None = Field(
        None, description="A .csv or .jsonl file of `text,label` rows (`source: file`)."
    )
    source: Literal["file", "imdb"] = Field(
        "file", description="file: `path`; imdb: IMDB reviews through `keras.datasets`."
    )
    text_field: str = Field("text", description="The column or key of the texts.")
    label_field: str = Field("label", description="The column or key of the labels.")
    max_vocab: int = Field(20000, ge=10, description="Vocabulary size (the commonest words).")
    max_length: int | None = Field(
        None,
        ge=2,
        le=MAX_SEQUENCE_LENGTH,
        description="Tokens of a text fed to the model (longer texts are cut, and counted: "
        "`truncated_texts`); unset: the `length_percentile`-th percentile of the training "
        "texts' (IMDB: 200).",
    )
    length_percentile: float = Field(
        99.0, gt=0.0, le=100.0, description="The percentile the default length comes from."
    )
    lowercase: bool = Field(True, description="Lower-case the texts before tokenizing.")
    max_row_chars: int = Field(
        1_000_000,
        ge=100,
        description="The longest row of the file, in characters: a longer one is refused "
        "after reading this many.",
    )
    max_labels: int = Field(
        1000,
        ge=2,
        description="The most distinct labels (classes): past it the file is refused "
        "before training.",
    )
    tokenizer_sample: int = Field(
        300_000,
        ge=100,
        description="The vocabulary (and the default length) is learnt from a random sample "
        "of this many training rows (every row of a smaller file): its time and memory do not "
        "grow with the file.",
    )
    max_eval_rows: int = Field(
        5_000,
        ge=1,
        description="The most rows of the validation split, and of the test split: for a "
        "large file `val_fraction` and `test_fraction` are lowered to keep about this many.",
    )

    @field_validator("path")
    @classmethod
    def _path_exists(cls, value: str | None) -> str | None:
        if value is None:
            return value
        real = existing_file(value, "an existing .csv or .jsonl file")
        if Path(value).suffix.lower() not in (".csv", ".jsonl", ".json"):
            raise ValueError("a file ending in .csv or .jsonl")
        if Path(real).suffix.lower() not in (".csv", ".jsonl", ".json"):
            raise ValueError(f"a .csv or .jsonl file; {value} links to {real}, which is not one")
        return real

    @model_validator(mode="after")
    def _needs_path(self) -> TextClsTask:
        if self.source == "file" and self.path is None:
            raise ValueError("a task.path to a .csv or .jsonl file when task.source is 'file'")
        return self

    def build(self) -> Task:
        """Stream the file into the cached corpus (`experiments.data.label_corpus`): rows
        split by what the model is fed, their tokens cut to `max_length` (texts that read
        the same once tokenized, "good movie!", "Good  movie !", or two texts alike up to
        the cut, all go to one split, so no validation or test input is a training input);
        the vocabulary and the default length from the training rows (a bounded sample of
        them); the training rows in a token store, fed in length-bucketed batches."""
        if self.source == "imdb":
            return _imdb(self)
        rules = tokenizer(self)
        fields = (self.text_field, self.label_field)
        built = label_corpus.load_or_build(
            self.path,
            label_corpus.Settings(
                fields=fields,
                seed=self.seed,
                val_fraction=self.val_fraction,
                test_fraction=self.test_fraction,
                max_eval_rows=self.max_eval_rows,
                sample_rows=self.tokenizer_sample,
                max_row_chars=self.max_row_chars,
                max_length=self.max_length,
                length_percentile=self.length_percentile,
                max_vocab=self.max_vocab,
                max_labels=self.max_labels,
                tokenizer_key={"pattern": TOKEN_PATTERN, "lowercase": self.lowercase},
                tokenize=rules.tokenize,
                encoder=lambda vocab: rules.replace(vocabulary=vocab.tokens),
            ),
            lambda: read_rows(self.path, *fields, self.max_row_chars),
            "task.path",
        )
        meta, length = built.meta, built.meta["max_length"]
        words = rules.replace(vocabulary=built.vocab.tokens)
        return Task(
            self.name,
            kinds.get("classification"),
            built.vocab,
            built.train,
            built.val,
            built.test,
            built.test.take(slice(0, self.num_probes)),
            class_names=built.class_names,
            tokenizer=words,
            duplicate_rows=meta["duplicate_rows"],
            data_counts={
                "truncated_texts": meta["truncated_texts"],
                "max_length": int(length),
                "tokenizer_sample_rows": meta["sample_rows"],
            },
            max_input_tokens=int(length),
        )


def _imdb(cfg) -> Task:
    """IMDB reviews through `keras.datasets` (needs the network on first use)."""
    try:
        (x_train, y_train), (x_test, y_test) = keras.datasets.imdb.load_data(
            num_words=cfg.max_vocab, start_char=None, oov_char=UNK, index_from=3
        )
    except Exception as err:  # noqa: BLE001 - any download failure means offline
        raise ConfigError(
            "task.source: 'imdb' needs network access to download the IMDB dataset "
            f"({type(err).__name__}: {err}). Offline, set task.source=file and task.path "
            "to a local .csv or .jsonl file with text,label fields."
        ) from None
    try:
        index = keras.datasets.imdb.get_word_index()
        words = {i + 3: w for w, i in index.items() if i + 3 < cfg.max_vocab}
    except Exception:  # noqa: BLE001 - names are cosmetic
        words = {}
    vocab = Vocab([words.get(i, f"w{i}") for i in range(4, cfg.max_vocab)], joiner=" ")
    length = cfg.max_length or IMDB_LENGTH
    x = pad(list(x_train) + list(x_test), length)
    y = np.concatenate([y_train, y_test]).astype("int32")
    data = Split(x, y)
    rng = np.random.default_rng(cfg.seed)
    train, val, test, probes = make_splits(data, cfg, rng)
    return Task(
        cfg.name,
        kinds.get("classification"),
        vocab,
        train,
        val,
        test,
        probes,
        class_names=["neg", "pos"],
        tokenizer=tokenizer(cfg, vocab),
        max_input_tokens=length,
        duplicate_rows=duplicate_count(row_keys(x)),
    )
