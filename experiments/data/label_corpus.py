"""A file of (text, label) rows of any size, read as a stream into a cached token store
(`textcls`): `experiments.data.corpus` for texts with a class.

Three passes over the file, nothing kept per row but a few hashes:

1. **Scan**: the rows counted, the labels found (the class names; a 64-bit hash of each
   row's label counts them past `max_labels`), and a bounded random sample of rows
   (reservoir sampling, `sample_rows`).
2. **Keys**: each text tokenized and cut at the length (`max_length`, else the
   `length_percentile`-th percentile of the sampled training texts), then hashed with the
   seed: what splits the rows (`val` below the first bound, `test` below the second, else
   `train`; `corpus.split_bounds`), so texts the model is fed alike ("Good  movie !",
   "good movie!", two texts alike up to the cut) are in one split; rows whose key repeats
   an earlier one are counted (`duplicate_rows`), and kept.
3. **Encode**: the vocabulary is the commonest tokens of the sampled training texts; the
   training rows are written a chunk at a time into a `TokenStore` (the ids of each text
   and its class), the validation and test rows into arrays padded to the length
   (`val_fraction` and `test_fraction` lowered to at most `max_eval_rows` rows each).

The default length is measured before the split by cut texts is known: on the sampled
rows whose whole text the seed's hash puts in training (the same rows but for the few
texts longer than the length). Everything lands in a cache folder as `corpus.cached`
describes (a file changed between passes is refused).
"""

from __future__ import annotations

import array
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.data import corpus, progress
from experiments.data.reservoir import Reservoir
from experiments.data.row_settings import RowSettings
from experiments.data.sections import MAX_SEQUENCE_LENGTH
from experiments.data.split import Split, pad
from experiments.data.stored_classes import LABEL, TEXT, StoredClasses
from experiments.data.token_store import StoreWriter, TokenStore
from experiments.data.vocab import SPECIALS, Vocab
from experiments.errors import ConfigError, shown

FORMAT = 1
_HASH = 2**32


@dataclass
class Settings(RowSettings):
    """Everything besides the file that decides a corpus's cache entry: `RowSettings`'s and
    these; `tokenize` (a text's tokens) and `encoder` (the tokenizer over a `Vocab`) are the
    task's, `tokenizer_key` identifies them."""

    CACHE_FORMAT = ("labels_format", FORMAT)
    UNKEYED = ("tokenize", "encoder")

    max_length: int | None
    max_vocab: int
    max_labels: int
    tokenize: Callable[[str], list[str]]
    encoder: Callable


@dataclass
class LabelCorpus:
    """A built (or cached) corpus: the vocabulary, the class names, the stored training
    split, the validation and test splits in memory, and what was counted (`meta`)."""

    folder: Path
    meta: dict
    vocab: Vocab
    class_names: list[str]
    train: StoredClasses
    val: Split
    test: Split


def load_or_build(
    path: str, settings: Settings, read: Callable[[], Iterator[tuple[str, str]]], key: str
) -> LabelCorpus:
    """The corpus of `path` under `settings`, from the cache or built into it; `read()`
    gives the file's (text, label) rows afresh (called three times), `key` is the config
    key errors name."""
    folder, digest = corpus.cached(
        path, settings.key(), lambda staging: _build(path, settings, read, key, staging)
    )
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    held = np.load(folder / "eval.npz")
    return LabelCorpus(
        folder,
        meta,
        Vocab(meta["vocabulary"], joiner=" "),
        meta["class_names"],
        StoredClasses(
            TokenStore(folder / "train", (TEXT, LABEL)), meta["fingerprint"], str(path), digest
        ),
        Split(held["val_x"], held["val_y"]),
        Split(held["test_x"], held["test_y"]),
    )


def _hash(data: bytes, size: int, key: bytes = b"") -> int:
    return int.from_bytes(hashlib.blake2b(data, key=key, digest_size=size).digest())


def _utf8(text: str) -> bytes:
    """`text` as bytes, a lone surrogate (a JSON `"\\ud800"`) included."""
    return text.encode("utf-8", "surrogatepass")


def _token_key(tokens: list[str]) -> bytes:
    return _utf8("\x00".join(tokens))


def _scan(path, settings: Settings, read):
    """The first pass: the rows, the label hashes, the class names (up to one past
    `max_labels`), a sample of (row, text, label)."""
    labels, names = array.array("Q"), set()
    sample = Reservoir(settings.sample_rows, settings.seed)
    with progress.Progress(f"reading {Path(path).name}") as counted:
        for row, (text, label) in enumerate(read()):
            labels.append(_hash(_utf8(label), 8))
            if len(names) <= settings.max_labels:
                names.add(label)
            sample.offer((row, text, label))
            counted.add()
    return len(labels), labels, sorted(names), sample.items


def _check_rows(path, settings: Settings, rows: int, labels, names: list[str]) -> None:
    label_field = settings.fields[1]
    if rows < 4:
        raise ConfigError(f"task.path: {path} holds {rows} rows; expected at least 4")
    if len(names) < 2:  # one class: test accuracy 1.000, whatever the model learns
        raise ConfigError(
            f"task.label_field: the {label_field!r} values of {path}; expected "
            "at least 2 classes (a classifier of one class scores 1.000 whatever it "
            f"learns; is task.label_field the label column?). Received: "
            f"{len(names)} class(es) {shown(names)} in {rows} rows"
        )
    if len(names) > settings.max_labels:
        distinct = len(np.unique(np.frombuffer(labels, "uint64")))
        raise ConfigError(
            f"task.max_labels: {path} holds {distinct} distinct "
            f"{label_field!r} values (labels); expected at most task.max_labels="
            f"{settings.max_labels} (raise it to train on them all, or check task.label_field)"
        )


def _default_length(settings: Settings, sample, rows: int) -> int:
    """The `length_percentile`-th percentile of the token counts of the sampled texts the
    seed's hash of their whole text puts in training (every sampled text if none), in
    [2, MAX_SEQUENCE_LENGTH] (a text of no token is one `<unk>`)."""
    seed = settings.seed.to_bytes(8, "little", signed=True)
    held = min(settings.val_fraction, settings.max_eval_rows / rows) + min(
        settings.test_fraction, settings.max_eval_rows / rows
    )
    counts, training = [], []
    for _, text, _ in sample:
        tokens = settings.tokenize(text)
        counts.append(max(1, len(tokens)))
        training.append(_hash(_token_key(tokens), 4, seed) >= held * _HASH)
    counts = np.asarray(counts)
    chosen = counts[np.asarray(training)] if any(training) else counts
    value = int(np.ceil(np.percentile(chosen, settings.length_percentile)))
    return min(max(2, value), MAX_SEQUENCE_LENGTH)


def _keys(path, settings: Settings, read, key: str, rows: int, length: int):
    """The second pass: each row's split hash (32 bits, seeded) and key hash (64 bits) of its
    tokens cut at `length`, and how many texts were cut."""
    seed = settings.seed.to_bytes(8, "little", signed=True)
    splits, keys, cut = array.array("I"), array.array("Q"), 0
    with progress.Progress("splitting the rows by their cut texts") as counted:
        for text, _ in read():
            tokens = settings.tokenize(text)
            cut += len(tokens) > length
            data = _token_key(tokens[:length])
            splits.append(_hash(data, 4, seed))
            keys.append(_hash(data, 8))
            counted.add()
    if len(splits) != rows:
        raise ConfigError(f"{key}: {path} changed while it was read; run again")
    return np.frombuffer(splits, "uint32"), np.frombuffer(keys, "uint64"), cut


def _build(path, settings: Settings, read, key: str, folder: Path) -> dict:
    rows, labels, names, sample = _scan(path, settings, read)
    _check_rows(path, settings, rows, labels, names)
    del labels
    length = settings.max_length or _default_length(settings, sample, rows)
    split_hashes, key_hashes, cut = _keys(path, settings, read, key, rows, length)
    distinct = len(np.unique(key_hashes))
    if distinct < 4 or len(np.unique(split_hashes)) < 4:
        raise ConfigError(
            f"task.path: {path} holds {distinct} distinct texts (of {rows} "
            f"rows, compared by their first {length} tokens); expected at least 4, "
            "for training, validation and test splits of their own"
        )
    duplicates = rows - distinct
    del key_hashes
    val_bound, test_bound = corpus.split_bounds(split_hashes, settings, key, path)
    where = np.where(split_hashes < val_bound, 0, np.where(split_hashes < test_bound, 1, 2))
    where = where.astype("uint8")
    del split_hashes
    counts = Counter(
        t for row, text, _ in sample if where[row] == 2 for t in settings.tokenize(text)[:length]
    )
    sample_rows = sum(where[row] == 2 for row, _, _ in sample)
    del sample
    vocab = Vocab(
        [t for t, _ in counts.most_common(settings.max_vocab - len(SPECIALS))], joiner=" "
    )
    words = settings.encoder(vocab)
    index = {name: i for i, name in enumerate(names)}
    held = {0: ([], []), 1: ([], [])}
    writer = StoreWriter(folder / "train", (TEXT, LABEL))
    chunk: tuple[list, list] = ([], [])

    def flush():
        writer.append({TEXT: chunk[0], LABEL: chunk[1]})
        chunk[0].clear()
        chunk[1].clear()

    try:
        with progress.Progress("encoding the rows") as counted:
            row = -1
            for row, (text, label) in enumerate(read()):
                if row >= rows:
                    raise ConfigError(f"{key}: {path} changed while it was read; run again")
                ids = words.token_ids(settings.tokenize(text)[:length])
                part = held.get(int(where[row]), chunk)
                part[0].append(ids)
                part[1].append([index[label]] if part is chunk else index[label])
                if len(chunk[0]) == corpus.CHUNK:
                    flush()
                counted.add()
            if chunk[0]:
                flush()
            if row + 1 != rows:
                raise ConfigError(f"{key}: {path} changed while it was read; run again")
    except BaseException:
        writer.abort()
        raise
    writer.close()
    arrays = {}
    for name, (x, y) in zip(("val", "test"), held.values()):
        arrays[f"{name}_x"] = pad(x, length)
        arrays[f"{name}_y"] = np.asarray(y, "int32")
    np.savez(folder / "eval.npz", **arrays)
    return {
        "format": FORMAT,
        "rows_read": rows,
        "duplicate_rows": int(duplicates),
        "rows": {"train": writer.rows, "val": len(held[0][0]), "test": len(held[1][0])},
        "sample_rows": int(sample_rows),
        "max_length": int(length),
        "truncated_texts": int(cut),
        "class_names": names,
        "vocabulary": vocab.tokens[len(SPECIALS) :],
    }
