"""A text file of any size for a language model, streamed into a cached token store.

Two passes over the file (at most `max_chars` characters of it, unset: all of it), nothing
kept but a bounded sample of lines and the evaluation text:

1. **Scan**: the characters counted; a random sample of lines (reservoir sampling,
   `sample_lines`, lines read in blocks so a file without newlines stays bounded) kept for
   the tokenizer. The text is split by position, as a language model's must be (windows
   of neighbouring text never straddle splits): training first, then validation, then
   test; `val_fraction` and `test_fraction` of the text, each at most `max_eval_chars`
   characters, so a large file keeps small evaluation splits.
2. **Encode**: the tokenizer is learnt on the sampled lines of the training part; the
   training part is encoded a block at a time (cut after a newline where the block has
   one, so a word is never split) into a one-field `TokenStore`, its ids one stream on
   disk; the validation and test parts are kept as text (small) and encoded whole.

The training windows are then taken from the memory-mapped stream as batches are made
(`StoredWindows`), never stacked. The cache is `corpus.cached`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from experiments.data import corpus, progress, records
from experiments.data.reservoir import Reservoir
from experiments.data.stored_windows import IDS, StoredWindows
from experiments.data.token_store import StoreWriter, TokenStore
from experiments.errors import ConfigError
from keras_attn_rnn import tokenizers

FORMAT = 1
# Characters read (and training text encoded) at once.
BLOCK = 1 << 20


@dataclass
class Settings:
    """Everything besides the file that decides a corpus's cache entry; `tokenizer(lines)`
    makes the task's tokenizer learnt on training lines, `tokenizer_key` identifies it."""

    max_chars: int | None
    val_fraction: float
    test_fraction: float
    max_eval_chars: int
    sample_lines: int
    min_chars: int
    seed: int
    tokenizer_key: dict
    tokenizer: Callable[[list[str]], tokenizers.Tokenizer]

    def key(self) -> dict:
        out = {k: v for k, v in vars(self).items() if k != "tokenizer"}
        return {"text_format": FORMAT, **out}


@dataclass
class TextCorpus:
    """A built (or cached) text: its tokenizer, the training ids (a memory-mapped stream),
    the validation and test texts, and what was counted (`meta`)."""

    folder: Path
    meta: dict
    tokenizer: tokenizers.Tokenizer
    store: TokenStore
    val: str
    test: str
    file: str
    file_sha256: str

    def windows(self, length: int, stride: int) -> StoredWindows:
        """The training part as windows of `length` tokens every `stride` (read from
        `file`, of SHA-256 `file_sha256` when this run opened it)."""
        return StoredWindows(
            self.store,
            self.meta["fingerprint"],
            self.file,
            self.file_sha256,
            length=length,
            stride=stride,
        )


def load_or_build(path: str, settings: Settings, key: str = "task.path") -> TextCorpus:
    """The text of `path` under `settings`, from the cache or built into it."""
    folder, digest = corpus.cached(
        path, settings.key(), lambda staging: _build(path, settings, key, staging)
    )
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    held = json.loads((folder / "eval.json").read_text(encoding="utf-8"))
    return TextCorpus(
        folder,
        meta,
        tokenizers.get(meta["tokenizer"]),
        TokenStore(folder / "train", (IDS,)),
        held["val"],
        held["test"],
        str(path),
        digest,
    )


def blocks(path: str, limit: int | None, key: str = "task.path") -> Iterator[str]:
    """The text of `path` (a byte order mark at its start dropped), `BLOCK` characters at a
    time, at most `limit` characters in all; a file that is not UTF-8 is refused."""
    left = limit
    try:
        with open(path, encoding=records.ENCODING, newline="") as handle:
            while left is None or left > 0:
                block = handle.read(BLOCK if left is None else min(BLOCK, left))
                if not block:
                    return
                if left is not None:
                    left -= len(block)
                yield block
    except UnicodeDecodeError as err:
        raise ConfigError(f"{key}: {path} is not UTF-8 text ({err})") from None


def _scan(path, settings: Settings, key: str) -> tuple[int, list[tuple[int, str]]]:
    """The characters read, and a sample of (end position, line) of every line."""
    sample, position = Reservoir(settings.sample_lines, settings.seed), 0
    with progress.Progress(f"reading {Path(path).name}", "chars") as counted:
        for block in blocks(path, settings.max_chars, key):
            for line in block.splitlines(keepends=True):
                position += len(line)
                if not line.strip():
                    continue
                sample.offer((position, line))
            counted.add(len(block))
    return position, sample.items


def parts(total: int, settings: Settings) -> tuple[int, int, int]:
    """Characters of the training, validation and test parts of a text of `total`."""
    n_val = min(int(total * settings.val_fraction), settings.max_eval_chars)
    n_test = min(int(total * settings.test_fraction), settings.max_eval_chars)
    return total - n_val - n_test, n_val, n_test


def _build(path, settings: Settings, key: str, folder: Path) -> dict:
    total, sample = _scan(path, settings, key)
    if total < settings.min_chars:
        raise ConfigError(
            f"{key}: {path} holds {total} characters; expected at least "
            f"{settings.min_chars} (twice task.seq_length + 1)"
        )
    n_train, n_val, _ = parts(total, settings)
    lines = [line.rstrip("\r\n") for end, line in sample if end <= n_train]
    del sample
    with progress.Progress("learning the tokenizer on the sample", "lines") as shown:
        tokenizer = settings.tokenizer(lines)
        shown.add(len(lines))
    writer = StoreWriter(folder / "train", (IDS,))
    held, position, carry = {"val": [], "test": []}, 0, ""
    try:
        with progress.Progress("encoding the text", "chars") as counted:
            for block in blocks(path, total, key):
                start, position = position, position + len(block)
                counted.add(len(block))
                train_end = max(0, n_train - start)
                val_end = max(0, n_train + n_val - start)
                held["val"].append(block[train_end:val_end])
                held["test"].append(block[max(train_end, val_end) :])
                train = block[:train_end]
                if not train:
                    continue
                # encode up to the block's last newline (a word is never cut), the rest with
                # the next block; the training part's end, whole
                newline = len(train) if position > n_train else train.rfind("\n") + 1
                carry, last = carry + train[: newline or len(train)], train[newline or len(train) :]
                writer.append({IDS: [tokenizer.encode(carry)]})
                carry = last
            if carry:
                writer.append({IDS: [tokenizer.encode(carry)]})
        if position != total:
            raise ConfigError(f"{key}: {path} changed while it was read; run again")
    except BaseException:
        writer.abort()
        raise
    writer.close()
    texts = {name: "".join(pieces) for name, pieces in held.items()}
    (folder / "eval.json").write_text(json.dumps(texts), encoding="utf-8")
    return {
        "format": FORMAT,
        "chars": total,
        "train_chars": n_train,
        "train_tokens": TokenStore(folder / "train", (IDS,)).tokens(IDS),
        "sample_lines": len(lines),
        "tokenizer": tokenizers.serialize(tokenizer),
    }
