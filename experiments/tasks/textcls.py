"""`textcls`: text classification from a CSV/JSONL file, or IMDB when online."""

from __future__ import annotations

import csv
import json
import unicodedata
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import keras
import numpy as np
from pydantic import Field, field_validator, model_validator

from experiments import kinds, tasks
from experiments.bounded_input import RecordLines
from experiments.data import records, units
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
) -> list[tuple[str, str]]:
    """(text, label) pairs from a CSV file with a header row, or a JSONL file, read a row at
    a time: a row longer than `max_row_chars` is refused once that many characters of it were
    read, as is a label that is not a class name (`_check_label`)."""
    try:
        return _read_rows(path, text_field, label_field, max_row_chars)
    except (UnicodeDecodeError, csv.Error, json.JSONDecodeError) as err:
        kind = "CSV" if Path(path).suffix.lower() == ".csv" else "JSONL"
        raise ConfigError(
            f"task.path: {path} is not a readable UTF-8 {kind} file ({type(err).__name__}: {err})"
        ) from None


def _read_rows(
    path: str, text_field: str, label_field: str, max_row_chars: int
) -> list[tuple[str, str]]:
    rows = []
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
            rows.append((str(record[text_field]), label))
    if len(rows) < 4:
        raise ConfigError(f"task.path: {path} holds {len(rows)} rows; expected at least 4")
    return rows


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
        "`truncated_texts`); unset: the `length_percentile`-th percentile of the file's texts "
        "(IMDB: 200).",
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
        """Tokenize, build the vocabulary on the training rows, encode and split.

        Rows are split by what the model is fed, their tokens cut to `max_length`:
        texts that read the same once tokenized ("good movie!", "Good  movie !", or
        two texts alike up to the cut) all go to one split, so no validation or test
        input is a training input.
        """
        if self.source == "imdb":
            return _imdb(self)
        rows = read_rows(self.path, self.text_field, self.label_field, self.max_row_chars)
        class_names = sorted({label for _, label in rows})
        if len(class_names) < 2:  # one class: test accuracy 1.000, whatever the model learns
            raise ConfigError(
                f"task.label_field: the {self.label_field!r} values of {self.path}; expected "
                "at least 2 classes (a classifier of one class scores 1.000 whatever it "
                f"learns; is task.label_field the label column?). Received: "
                f"{len(class_names)} class(es) {shown(class_names)} in {len(rows)} rows"
            )
        if len(class_names) > self.max_labels:
            raise ConfigError(
                f"task.max_labels: {self.path} holds {len(class_names)} distinct "
                f"{self.label_field!r} values (labels); expected at most task.max_labels="
                f"{self.max_labels} (raise it to train on them all, or check task.label_field)"
            )
        rules = tokenizer(self)
        whole = [rules.tokenize(text) for text, _ in rows]
        length = self.max_length or _percentile(whole, self.length_percentile)
        tokens = [t[:length] for t in whole]
        keys = [tuple(t) for t in tokens]
        if len(set(keys)) < 4:
            raise ConfigError(
                f"task.path: {self.path} holds {len(set(keys))} distinct texts (of {len(rows)} "
                f"rows, compared by their first {length} tokens); expected at least 4, "
                "for training, validation and test splits of their own"
            )
        index = {label: i for i, label in enumerate(class_names)}
        labels = np.array([index[label] for _, label in rows], dtype="int32")
        rng = np.random.default_rng(self.seed)
        order = np.arange(len(rows))
        placeholder = Split(order[:, None], labels)
        train, val, test, probes = make_splits(placeholder, self, rng, keys)
        counts = Counter(t for i in train.x[:, 0] for t in tokens[i])
        vocab = Vocab(
            [t for t, _ in counts.most_common(self.max_vocab - len(SPECIALS))], joiner=" "
        )
        words = rules.replace(vocabulary=vocab.tokens)
        # `words.encode` of each text
        x = pad([words.token_ids(t) for t in tokens], length)
        encoded = [Split(x[s.x[:, 0]], s.y) for s in (train, val, test, probes)]
        return Task(
            self.name,
            kinds.get("classification"),
            vocab,
            *encoded,
            class_names=class_names,
            tokenizer=words,
            duplicate_rows=duplicate_count(keys),
            data_counts={
                "truncated_texts": sum(len(t) > length for t in whole),
                "max_length": int(length),
            },
            max_input_tokens=int(length),
        )


def _percentile(tokens: list[list[str]], percentile: float) -> int:
    """The `percentile`-th percentile of the texts' token counts, in [2, MAX_SEQUENCE_LENGTH]
    (a text of no token is one `<unk>`)."""
    value = int(np.ceil(np.percentile([max(1, len(t)) for t in tokens], percentile)))
    return min(max(2, value), MAX_SEQUENCE_LENGTH)


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
