"""`textcls` reading a file of any size (issue 47): streamed into a cached token store, the
training rows fed in length-bucketed batches, the default length from the training texts
alone (issue 50, 5), reused by a second build, the memory not growing with the file."""

from __future__ import annotations

import tracemalloc

import numpy as np
from experiments_helpers import write_text_dataset

from experiments.config import validate
from experiments.data import corpus
from experiments.data.stored_classes import StoredClasses
from experiments.tasks import build_task
from experiments.training.batches import LengthBatches, epoch_batches


def _task(**task):
    return build_task(validate({"task": {"name": "textcls", **task}}).task)


def _graded_csv(folder, rows=120):
    """Row i: i + 1 distinct words (every length once), labels alternating."""
    lines = ["text,label"] + [
        " ".join(f"w{i}x{j}" for j in range(i + 1)) + f",{'ab'[i % 2]}" for i in range(rows)
    ]
    path = folder / "graded.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_training_rows_are_stored_and_fed_in_batches_of_their_own_width(tmp_path):
    task = _task(path=str(write_text_dataset(tmp_path, rows=200)), max_length=12)
    assert isinstance(task.train, StoredClasses)
    assert len(task.train) + len(task.val) + len(task.test) == 200
    assert task.val.x.shape[1] == 12  # validation and test in memory, padded to the length
    batches = epoch_batches(task.train, 16, seed=0, pad_to=1)
    assert isinstance(batches, LengthBatches)
    x, y = batches[0]
    dense = task.train.take(batches.batch_rows(0))
    assert x.shape[1] == max(task.train.lengths()[0][batches.batch_rows(0)])
    assert np.array_equal(y, dense.y) and set(y.tolist()) <= {0, 1}


def test_the_default_length_is_measured_on_the_training_texts_alone(tmp_path):
    # Every text a length of its own: at the 100th percentile the length is the longest
    # training text, so no training text is cut; the longer validation and test ones are.
    task = _task(path=str(_graded_csv(tmp_path)), length_percentile=100.0, seed=2)
    length = task.data_counts["max_length"]
    assert length == max(task.train.lengths()[0])
    assert length < 120  # the longest text of the file is not a training one
    assert task.data_counts["truncated_texts"] == 120 - length


def test_a_second_build_reads_the_cache(tmp_path, capsys):
    path = str(write_text_dataset(tmp_path, rows=40))
    first = _task(path=path, max_length=8)
    assert "the cached corpus" not in capsys.readouterr().err
    second = _task(path=path, max_length=8)
    assert "the cached corpus" in capsys.readouterr().err
    assert second.train.fingerprint == first.train.fingerprint
    assert np.array_equal(second.val.x, first.val.x)


def _peak_bytes(path) -> int:
    tracemalloc.start()
    try:
        _task(path=str(path), max_length=8, tokenizer_sample=200, max_eval_rows=20)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_file(tmp_path, monkeypatch):
    """20 times the rows, about the same peak: no row is kept but its hashes and the bounded
    sample (and one chunk being encoded, here 500 rows)."""
    monkeypatch.setattr(corpus, "CHUNK", 500)
    (tmp_path / "small").mkdir()
    (tmp_path / "large").mkdir()
    small = _peak_bytes(write_text_dataset(tmp_path / "small", rows=1_000))
    large = _peak_bytes(write_text_dataset(tmp_path / "large", rows=20_000))
    assert large - small < 1_500_000, (small, large)
