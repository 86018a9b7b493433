"""A file of source/target pairs of any size, read twice as a stream into a cached token
store.

1. **Scan** (one pass, nothing kept per row but 12 bytes): each row's split comes from a
   hash of its source text and the seed (`val` below `val_fraction`, `test` below
   `val_fraction + test_fraction`, else `train`), so a source is in one split, whichever
   its row, and no list of rows is needed; exact duplicate rows are found by a 64-bit
   hash of the pair; a bounded random sample of the training rows (reservoir sampling,
   `sample_rows` pairs) is kept for the tokenizer.
2. **Tokenizer** learnt on the sample (or a SentencePiece model the user gives), and the
   default lengths (the `length_percentile`-th percentile) measured on it.
3. **Encode** (the second pass): training rows a chunk at a time with the tokenizer's
   batch encoder, cut at the lengths, into a `TokenStore` (ragged, memory-mapped); the
   validation and test rows as texts (their fractions are lowered to at most
   `max_eval_rows` rows each for a large file, so they stay small).

Everything lands in a cache folder named by the file's SHA-256 and every setting that
changes the result (`fingerprint`), built under a temporary name and renamed when
complete: a second run, a sweep's trials, `tune`'s workers and `resume` on the same file
reuse it in seconds; a changed file or setting builds a new one. The folder is
`$ATTN_RNN_DATA_CACHE`, else `~/.cache/keras-attn-rnn/corpora`; deleting it (or any
entry in it) is always safe.
"""

from __future__ import annotations

import array
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.data import progress
from experiments.data.reservoir import Reservoir
from experiments.data.row_settings import RowSettings
from experiments.data.stored_split import SOURCE, TARGET, StoredSplit
from experiments.data.token_store import StoreWriter, TokenStore
from experiments.errors import ConfigError
from keras_attn_rnn import tokenizers

# Bump when the layout or the meaning of a cache entry changes: older entries are not used.
FORMAT = 1
CACHE_VARIABLE = "ATTN_RNN_DATA_CACHE"
# Training rows encoded and written at once.
CHUNK = 20_000
_HASH = 2**32  # the split hash's range (its top 32 bits)


def cache_root() -> Path:
    """Where corpora are cached: `$ATTN_RNN_DATA_CACHE`, else `~/.cache/keras-attn-rnn/corpora`."""
    given = os.environ.get(CACHE_VARIABLE)
    return Path(given) if given else Path.home() / ".cache" / "keras-attn-rnn" / "corpora"


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Settings(RowSettings):
    """Everything that decides a corpus's cache entry besides the file: `RowSettings`'s and
    these.

    `tokenizers` makes the unadapted `(source, target)` tokenizers (one object twice for
    a shared vocabulary); `tokenizer_key` is what identifies them (their settings, or the
    digest of a given model) in the fingerprint.
    """

    CACHE_FORMAT = ("format", FORMAT)
    UNKEYED = ("tokenizers",)

    split_here: bool
    max_source_length: int | None
    max_target_length: int | None
    tokenizers: Callable[[list[str], list[str]], tuple]


@dataclass
class Corpus:
    """A built (or cached) corpus: the tokenizers, the stored training split, the
    validation and test rows as texts, and what was counted (`meta`)."""

    folder: Path
    meta: dict
    source_tokenizer: tokenizers.Tokenizer
    target_tokenizer: tokenizers.Tokenizer
    train: StoredSplit
    val: list[tuple[str, str]]
    test: list[tuple[str, str]]


def load_or_build(
    path: str, settings: Settings, read: Callable[[], Iterator[tuple[str, str]]], key: str
) -> Corpus:
    """The corpus of `path` under `settings`, from the cache or built into it.

    `read()` gives the file's (source, target) rows afresh (it is called twice: the scan
    and the encoding); `key` is the config key errors name.
    """
    folder, digest = cached(
        path, settings.key(), lambda staging: _build(path, settings, read, key, staging)
    )
    return _load(folder, path, digest)


def cached(path: str, settings: dict, build: Callable[[Path], dict]) -> tuple[Path, str]:
    """The cache folder of `path` under `settings` (a dict of everything that changes the
    result), and the file's SHA-256: an existing entry, else one `build(folder)` fills
    (returning its `meta`, written last as `meta.json`) under a temporary name, renamed when
    complete."""
    digest = file_digest(path)
    fingerprint = hashlib.sha256(
        json.dumps({"file_sha256": digest, **settings}, sort_keys=True).encode()
    ).hexdigest()[:32]
    folder = cache_root() / fingerprint
    if (folder / "meta.json").is_file():
        progress.note(f"{Path(path).name}: the cached corpus {folder} (same file and settings)")
        return folder, digest
    staging = folder.with_name(f"{fingerprint}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        meta = build(staging)
        meta.update(file_sha256=digest, fingerprint=fingerprint, path=str(path))
        (staging / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
        try:
            staging.rename(folder)
        except OSError:  # another process finished the same entry first: theirs is used
            if not (folder / "meta.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder, digest


def _load(folder: Path, path, digest: str) -> Corpus:
    """The corpus in `folder`, its training split marked as read from `path` (of SHA-256
    `digest`) by this run."""
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    source = tokenizers.get(meta["tokenizers"]["source"])
    target = (
        source
        if meta["tokenizers"]["target"] is None
        else tokenizers.get(meta["tokenizers"]["target"])
    )
    store = TokenStore(folder / "train", (SOURCE, TARGET))
    texts = json.loads((folder / "eval.json").read_text(encoding="utf-8"))
    return Corpus(
        folder,
        meta,
        source,
        target,
        StoredSplit(store, meta["fingerprint"], str(path), digest),
        [tuple(pair) for pair in texts["val"]],
        [tuple(pair) for pair in texts["test"]],
    )


@dataclass
class _Scan:
    rows: int
    pair_hashes: np.ndarray  # uint64 (rows,)
    source_hashes: np.ndarray  # uint32 (rows,): the split hash
    sample: list[tuple[int, int, str, str]]  # (row, split hash, source, target), training rows


def _scan(path, settings: Settings, read) -> _Scan:
    """The first pass: hashes of every row, and the tokenizer's sample of training rows
    (every row of a training file, `split_here` false)."""
    pairs, sources = array.array("Q"), array.array("I")
    key = settings.seed.to_bytes(8, "little", signed=True)
    floor = int((settings.val_fraction + settings.test_fraction) * _HASH) * settings.split_here
    sample = Reservoir(settings.sample_rows, settings.seed)
    blake = hashlib.blake2b
    with progress.Progress(f"reading {Path(path).name}") as shown:
        for source, target in read():
            split_hash = int.from_bytes(blake(source.encode(), key=key, digest_size=4).digest())
            sources.append(split_hash)
            pair = f"{len(source)}:{source}{target}".encode()
            pairs.append(int.from_bytes(blake(pair, digest_size=8).digest()))
            if split_hash >= floor:  # a training row whatever the lowered fractions
                sample.offer((len(sources) - 1, split_hash, source, target))
            shown.add()
    return _Scan(
        len(pairs),
        np.frombuffer(pairs, "uint64") if len(pairs) else np.zeros(0, "uint64"),
        np.frombuffer(sources, "uint32") if len(sources) else np.zeros(0, "uint32"),
        sample.items,
    )


def first_occurrences(hashes: np.ndarray) -> np.ndarray:
    """A mask of the rows whose hash no earlier row has (exact duplicates are the others)."""
    order = np.argsort(hashes, kind="stable")
    ordered = hashes[order]
    first = np.ones(len(hashes), bool)
    first[1:] = ordered[1:] != ordered[:-1]
    keep = np.zeros(len(hashes), bool)
    keep[order[first]] = True
    return keep


def split_bounds(source_hashes: np.ndarray, settings: Settings, key: str, path) -> tuple[int, int]:
    """The split hash below which a row is validation, and below which test (the rest:
    training). From the fractions, each lowered so the split holds at most `max_eval_rows`
    rows (expected), and raised so that each of validation, test and training gets at
    least one source."""
    distinct = np.unique(source_hashes)
    if len(distinct) < 4:
        raise ConfigError(
            f"{key}: {path} holds {len(distinct)} distinct sources; expected at least 4, for "
            "training, validation and test splits of their own"
        )
    rows = len(source_hashes)
    val = min(settings.val_fraction, settings.max_eval_rows / rows)
    test = min(settings.test_fraction, settings.max_eval_rows / rows)
    # at least the smallest hash in validation, and two sources left for test and training
    val_bound = min(max(int(val * _HASH), int(distinct[0]) + 1), int(distinct[-2]))
    first_test = int(distinct[np.searchsorted(distinct, val_bound)])
    # at least that one in test, and the largest hash in training
    test_bound = min(max(val_bound + int(test * _HASH), first_test + 1), int(distinct[-1]))
    return val_bound, test_bound


def _build(path, settings: Settings, read, key: str, folder: Path) -> dict:
    scan = _scan(path, settings, read)
    if scan.rows == 0:
        raise ConfigError(f"{key}: {path} holds no rows; expected source/target pairs")
    keep = first_occurrences(scan.pair_hashes)
    del scan.pair_hashes
    val_bound, test_bound = 0, 0  # a training file: every row is training
    if settings.split_here:
        val_bound, test_bound = split_bounds(scan.source_hashes[keep], settings, key, path)
    sample = [(s, t) for row, h, s, t in scan.sample if h >= test_bound and keep[row]]
    scan.sample = None
    sample_rows = len(sample)
    progress.note(
        f"{Path(path).name}: {scan.rows:,} rows, {scan.rows - int(keep.sum()):,} exact "
        f"repeats dropped; tokenizer and lengths from a sample of {len(sample):,} training "
        f"pairs (task.tokenizer_sample)"
    )
    with progress.Progress("learning the tokenizer on the sample", "pairs") as shown:
        source_tokenizer, target_tokenizer = settings.tokenizers(
            [s for s, _ in sample], [t for _, t in sample]
        )
        shown.add(len(sample))
    source_length = settings.max_source_length or _percentile_length(
        source_tokenizer, [s for s, _ in sample], settings.length_percentile
    )
    target_length = settings.max_target_length or _percentile_length(
        target_tokenizer, [t for _, t in sample], settings.length_percentile
    )
    del sample
    splits = np.where(
        scan.source_hashes < val_bound, 0, np.where(scan.source_hashes < test_bound, 1, 2)
    ).astype("uint8")
    splits[~keep] = 3  # dropped
    del scan.source_hashes, keep
    val, test, cut = [], [], {"sources": 0, "targets": 0}
    writer = StoreWriter(folder / "train", (SOURCE, TARGET))
    chunk: list[tuple[str, str]] = []

    def flush():
        columns = {
            SOURCE: source_tokenizer.encode_batch([s for s, _ in chunk]),
            TARGET: target_tokenizer.encode_batch([t for _, t in chunk]),
        }
        counted = writer.append(columns, {SOURCE: source_length, TARGET: target_length})
        cut["sources"] += counted[SOURCE]
        cut["targets"] += counted[TARGET]
        chunk.clear()

    try:
        with progress.Progress("encoding the training split", "rows") as shown:
            row = -1
            for row, pair in enumerate(read()):  # noqa: B007 - counted after the loop
                if row >= len(splits):
                    raise ConfigError(f"{key}: {path} changed while it was read; run again")
                where = splits[row]
                if where == 2:
                    chunk.append(pair)
                    if len(chunk) == CHUNK:
                        flush()
                        shown.add(CHUNK)
                elif where == 0:
                    val.append(pair)
                elif where == 1:
                    test.append(pair)
            if chunk:
                shown.add(len(chunk))
                flush()
            if row + 1 != len(splits):
                raise ConfigError(f"{key}: {path} changed while it was read; run again")
    except BaseException:
        writer.abort()
        raise
    writer.close()
    (folder / "eval.json").write_text(json.dumps({"val": val, "test": test}), encoding="utf-8")
    shared = source_tokenizer is target_tokenizer
    return {
        "format": FORMAT,
        "rows_read": scan.rows,
        "duplicate_rows": int((splits == 3).sum()),
        "rows": {"train": writer.rows, "val": len(val), "test": len(test)},
        "sample_rows": sample_rows,
        "max_source_length": int(source_length),
        "max_target_length": int(target_length),
        "truncated_sources": cut["sources"],
        "truncated_targets": cut["targets"],
        "tokenizers": {
            "source": tokenizers.serialize(source_tokenizer),
            "target": None if shared else tokenizers.serialize(target_tokenizer),
        },
    }


def _percentile_length(tokenizer, texts: list[str], percentile: float) -> int:
    """The `percentile`-th percentile of the texts' lengths in tokens (at least 1)."""
    lengths = [len(ids) for ids in tokenizer.encode_batch(texts)] or [1]
    return max(1, int(np.ceil(np.percentile(lengths, percentile))))
