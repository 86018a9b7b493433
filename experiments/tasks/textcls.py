"""`textcls`: text classification from a CSV/JSONL file, or IMDB when online."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import keras
import numpy as np

from experiments.errors import ConfigError
from experiments.tasks.split import Split, duplicate_count, make_splits, pad, row_keys
from experiments.tasks.task import Task
from experiments.tasks.vocab import SPECIALS, UNK, Vocab
from text_tokenizer import Tokenizer

# Words and single punctuation marks.
TOKEN_PATTERN = r"\w+|[^\w\s]"


def tokenizer(cfg, vocab: Vocab | None = None) -> Tokenizer:
    """How `build` turns a text into ids (`Task.tokenizer`): its words and single punctuation
    marks (lower-cased with `cfg.lowercase`), the first `cfg.max_length` of them, never none;
    over `vocab` (without one, every token is `<unk>`: the rules alone)."""
    tokens = SPECIALS if vocab is None else vocab.tokens
    return Tokenizer(
        tokens,
        joiner=" ",
        split="regex",
        pattern=TOKEN_PATTERN,
        lowercase=cfg.lowercase,
        max_tokens=cfg.max_length,
        empty_as_unknown=True,
    )


def read_rows(path: str, text_field: str, label_field: str) -> list[tuple[str, str]]:
    """(text, label) pairs from a CSV file with a header row, or a JSONL file."""
    try:
        return _read_rows(path, text_field, label_field)
    except (UnicodeDecodeError, csv.Error, json.JSONDecodeError) as err:
        kind = "CSV" if Path(path).suffix.lower() == ".csv" else "JSONL"
        raise ConfigError(
            f"task.path: {path} is not a readable UTF-8 {kind} file ({type(err).__name__}: {err})"
        ) from None


def _read_rows(path: str, text_field: str, label_field: str) -> list[tuple[str, str]]:
    rows = []
    with open(path, encoding="utf-8", newline="") as handle:
        if Path(path).suffix.lower() == ".csv":
            records = csv.DictReader(handle)
        else:
            records = (json.loads(line) for line in handle if line.strip())
        for number, record in enumerate(records, start=1):
            if not isinstance(record, dict):
                raise ConfigError(
                    f"task.path: row {number} of {path} is not an object with "
                    f"{text_field!r} and {label_field!r} fields. Received: {str(record)[:80]!r}"
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
            rows.append((str(record[text_field]), str(record[label_field])))
    if len(rows) < 4:
        raise ConfigError(f"task.path: {path} holds {len(rows)} rows; expected at least 4")
    return rows


def build(cfg) -> Task:
    """Tokenize, build the vocabulary on the training rows, encode and split.

    Rows are split by what the model is fed, their tokens cut to `max_length`:
    texts that read the same once tokenized ("good movie!", "Good  movie !", or
    two texts alike up to the cut) all go to one split, so no validation or test
    input is a training input.
    """
    if cfg.source == "imdb":
        return _imdb(cfg)
    rows = read_rows(cfg.path, cfg.text_field, cfg.label_field)
    rules = tokenizer(cfg)
    tokens = [rules.tokenize(text) for text, _ in rows]
    keys = [tuple(t) for t in tokens]
    if len(set(keys)) < 4:
        raise ConfigError(
            f"task.path: {cfg.path} holds {len(set(keys))} distinct texts (of {len(rows)} "
            f"rows, compared by their first {cfg.max_length} tokens); expected at least 4, "
            "for training, validation and test splits of their own"
        )
    class_names = sorted({label for _, label in rows})
    labels = np.array([class_names.index(label) for _, label in rows], dtype="int32")
    rng = np.random.default_rng(cfg.seed)
    order = np.arange(len(rows))
    placeholder = Split(order[:, None], labels)
    train, val, test, probes = make_splits(placeholder, cfg, rng, keys)
    counts = Counter(t for i in train.x[:, 0] for t in tokens[i])
    vocab = Vocab([t for t, _ in counts.most_common(cfg.max_vocab - len(SPECIALS))], joiner=" ")
    words = rules.replace(tokens=vocab.tokens)
    x = pad([words.token_ids(t) for t in tokens], cfg.max_length)  # `words.encode` of each text
    encoded = [Split(x[s.x[:, 0]], s.y) for s in (train, val, test, probes)]
    return Task(
        "textcls",
        "classification",
        vocab,
        *encoded,
        class_names=class_names,
        tokenizer=words,
        duplicate_rows=duplicate_count(keys),
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
    x = pad(list(x_train) + list(x_test), cfg.max_length)
    y = np.concatenate([y_train, y_test]).astype("int32")
    data = Split(x, y)
    rng = np.random.default_rng(cfg.seed)
    train, val, test, probes = make_splits(data, cfg, rng)
    return Task(
        "textcls",
        "classification",
        vocab,
        train,
        val,
        test,
        probes,
        class_names=["neg", "pos"],
        tokenizer=tokenizer(cfg, vocab),
        duplicate_rows=duplicate_count(row_keys(x)),
    )
