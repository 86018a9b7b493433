"""The language-model task reading a file of any size (issue 47): the whole file (or
`task.max_chars` of it) streamed a block at a time into a cached token store, split by
position, the training windows cut from the memory-mapped ids as batches are made."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from experiments_helpers import runs, use_store, write_config

from experiments.commands import main
from experiments.config import validate
from experiments.data import text_corpus
from experiments.data.stored_windows import IDS, StoredWindows
from experiments.tasks import build_task, lm


def _task(path, **task):
    return build_task(validate({"task": {"name": "lm", "path": str(path), **task}}).task)


def _text(tmp_path, lines=400):
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta"]
    text = "\n".join(" ".join(rng.choice(words, rng.integers(3, 9))) for _ in range(lines)) + "\n"
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    return path, text


@pytest.mark.parametrize("units", ["char", "word"])
def test_blocks_encode_as_the_whole_training_part_would(tmp_path, monkeypatch, units):
    # blocks of 64 characters: each is cut after its last newline, the rest carried on
    monkeypatch.setattr(text_corpus, "BLOCK", 64)
    path, text = _text(tmp_path)
    task = _task(path, units=units, seq_length=16, max_vocab=96)
    n_train = len(text) - int(len(text) * 0.1) * 2
    stream = np.asarray(task.train.store.flat(IDS))
    assert stream.tolist() == task.tokenizer.encode(text[:n_train])


def test_the_windows_are_cut_from_the_stream_as_stacked_windows_were(tmp_path):
    path, _ = _text(tmp_path)
    task = _task(path, seq_length=16, stride=8)
    assert isinstance(task.train, StoredWindows)
    expected = lm._windows(np.asarray(task.train.store.flat(IDS)), 16, 8)
    got = task.train.take(slice(None))
    assert len(task.train) == len(expected)
    assert np.array_equal(got.x, expected.x) and np.array_equal(got.y, expected.y)
    assert task.train.count_tokens("x") == expected.count_tokens("x")
    assert task.train.count_tokens("y") == expected.count_tokens("y")
    rows = [3, 0, len(expected) - 1]
    assert np.array_equal(task.train.take(rows).y, expected.take(rows).y)


def test_the_whole_file_is_read_unless_max_chars_says_less(tmp_path):
    path, text = _text(tmp_path, lines=8000)  # past the old 200,000-character default
    assert len(text) > 200_000
    whole = _task(path, seq_length=16)
    tokens = whole.train.store.tokens(IDS) + len(whole.val.x) + len(whole.test.x)
    assert whole.train.store.tokens(IDS) > 0.75 * len(text)  # characters: a token each
    part = _task(path, seq_length=16, max_chars=1000)
    assert part.train.store.tokens(IDS) == 800
    assert tokens > part.train.store.tokens(IDS)


def test_a_run_trains_on_the_stored_windows(tmp_path, monkeypatch):
    store = use_store(tmp_path, monkeypatch)
    path, _ = _text(tmp_path)
    task = {"name": "lm", "path": str(path), "seq_length": 16, "num_probes": 1}
    assert main(["run", str(write_config(tmp_path, task))]) == 0
    (run,) = runs(store)
    assert run.info.status == "FINISHED" and "val_perplexity" in run.data.metrics


def _peak_bytes(path) -> int:
    tracemalloc.start()
    try:
        _task(path, seq_length=16, max_eval_chars=2000, tokenizer_sample=200)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_file(tmp_path, monkeypatch):
    """20 times the text, about the same peak: a block, the bounded sample of lines and the
    bounded evaluation text are kept, never the text or its ids (here blocks of 64 KB)."""
    monkeypatch.setattr(text_corpus, "BLOCK", 1 << 16)
    (tmp_path / "small").mkdir()
    (tmp_path / "large").mkdir()
    small = _peak_bytes(_text(tmp_path / "small", lines=2_000)[0])
    large = _peak_bytes(_text(tmp_path / "large", lines=40_000)[0])
    assert large - small < 1_500_000, (small, large)
