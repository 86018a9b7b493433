"""A file of pairs streamed into a cached corpus: split by source hash, repeats found by
hashes, the tokenizer learnt on a bounded sample, the training rows in a token store,
reused by a second run, rebuilt for a changed file or setting, never left half-built; the
memory does not grow with the file."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from test_pairs_task import task_of, toy_pairs, train_texts, write_tsv

from experiments.data import corpus, records
from experiments.data.stored_split import StoredSplit
from experiments.errors import ConfigError


def distinct_pairs(count, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(50)]
    return [
        (" ".join(rng.choice(words, 4)) + f" {i}", " ".join(rng.choice(words, 5)) + f" {i}")
        for i in range(count)
    ]


def reads(monkeypatch) -> list:
    """Each call of `records.read_rows` from now on (a pass over a file)."""
    calls, real = [], records.read_rows
    monkeypatch.setattr(records, "read_rows", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    return calls


def test_a_second_build_of_the_same_file_and_settings_reads_the_cache(
    tmp_path, monkeypatch, capsys
):
    path = write_tsv(tmp_path / "pairs.tsv", toy_pairs(300))
    calls = reads(monkeypatch)
    first = task_of(path=str(path), units="word")
    assert len(calls) == 2  # the scan and the encoding
    assert isinstance(first.train, StoredSplit)
    again = task_of(path=str(path), units="word")
    assert len(calls) == 2  # nothing read again
    assert "the cached corpus" in capsys.readouterr().err
    assert again.train.fingerprint == first.train.fingerprint
    assert train_texts(again) == train_texts(first) and again.test.texts == first.test.texts
    assert again.tokenizer.vocabulary == first.tokenizer.vocabulary
    task_of(path=str(path), units="word", vocabulary_size=50)  # another setting: built anew
    assert len(calls) == 4
    write_tsv(path, toy_pairs(300, seed=1))  # another file at the same path: built anew
    changed = task_of(path=str(path), units="word")
    assert len(calls) == 6 and changed.train.fingerprint != first.train.fingerprint


def test_a_build_that_fails_leaves_nothing_half_made(tmp_path, monkeypatch):
    path = write_tsv(tmp_path / "pairs.tsv", toy_pairs(300))
    real, passes = records.read_rows, []

    def failing(*args, **kwargs):
        passes.append(1)
        for number, row in enumerate(real(*args, **kwargs)):
            if len(passes) == 2 and number == 100:
                raise KeyboardInterrupt  # killed while encoding
            yield row

    monkeypatch.setattr(records, "read_rows", failing)
    with pytest.raises(KeyboardInterrupt):
        task_of(path=str(path), units="word")
    assert list(corpus.cache_root().iterdir()) == []  # no entry, no staging folder
    monkeypatch.setattr(records, "read_rows", real)
    task = task_of(path=str(path), units="word")
    assert [p.name for p in corpus.cache_root().iterdir()] == [task.train.fingerprint]


@pytest.mark.parametrize("second_pass", [slice(0, 250), slice(None), list(range(300)) * 2])
def test_a_file_that_changes_between_the_two_passes_is_refused(tmp_path, monkeypatch, second_pass):
    path = write_tsv(tmp_path / "pairs.tsv", toy_pairs(300))
    real, passes = records.read_rows, []

    def changing(*args, **kwargs):
        rows = list(real(*args, **kwargs))
        passes.append(1)
        if len(passes) == 1:
            return iter(rows)
        return iter(
            rows[second_pass] if isinstance(second_pass, slice) else [rows[i] for i in second_pass]
        )

    monkeypatch.setattr(records, "read_rows", changing)
    if second_pass == slice(None):  # unchanged: built
        assert len(task_of(path=str(path), units="word").train) > 0
        return
    with pytest.raises(ConfigError, match="pairs.tsv changed while it was read; run again"):
        task_of(path=str(path), units="word")
    assert list(corpus.cache_root().iterdir()) == []


def test_repeats_are_found_by_hash_and_each_split_gets_a_source(tmp_path):
    hashes = np.array([5, 3, 5, 9, 3, 3, 1], "uint64")
    np.testing.assert_array_equal(corpus.first_occurrences(hashes), [1, 1, 0, 1, 0, 0, 1])
    for seed in range(8):  # four distinct sources: one each for validation and test
        pairs = [(f"s{i}", f"t{i}") for i in range(4)] * 2
        task = task_of(
            path=str(write_tsv(tmp_path / f"{seed}.tsv", pairs)), units="word", seed=seed
        )
        sizes = (len(task.train), len(task.val), len(task.test))
        assert min(sizes) >= 1 and sum(sizes) == 4, sizes
        assert task.duplicate_rows == 4
    with pytest.raises(ConfigError, match="holds 3 distinct sources; expected at least 4"):
        task_of(path=str(write_tsv(tmp_path / "3.tsv", pairs[:3])), units="word")


def test_a_large_file_keeps_small_evaluation_splits_and_a_bounded_sample(tmp_path):
    pairs = distinct_pairs(3000)
    path = write_tsv(tmp_path / "pairs.tsv", pairs)
    task = task_of(path=str(path), units="word", max_eval_rows=50, tokenizer_sample=400)
    assert 25 <= len(task.val) <= 80 and 25 <= len(task.test) <= 80  # ~50 of 3000 rows each
    assert len(task.train) + len(task.val) + len(task.test) == 3000
    assert 300 <= task.data_counts["tokenizer_sample_rows"] <= 400  # training rows only
    # the word vocabulary comes from the sample: row numbers outside it are unknown words
    numbers = {t for t in task.tokenizer.vocabulary if t.isdigit()}
    assert 300 <= len(numbers) <= 400


def test_a_given_subword_model_is_used_and_a_foreign_one_refused(tmp_path):
    path = write_tsv(tmp_path / "pairs.tsv", toy_pairs(300))
    learnt = task_of(path=str(path), vocabulary_size=300)
    model = tmp_path / "spm.model"
    model.write_bytes(learnt.tokenizer.proto)
    other = write_tsv(tmp_path / "other.tsv", toy_pairs(300, seed=5))
    given = task_of(path=str(other), subword_model_path=str(model))
    assert given.tokenizer.vocabulary == learnt.tokenizer.vocabulary
    assert given.output_vocab.tokens == learnt.tokenizer.vocabulary
    model.write_bytes(b"not a model")
    with pytest.raises(ConfigError, match=r"task.subword_model_path: .*spm.model cannot be used"):
        task_of(path=str(other), subword_model_path=str(model), seed=1)


def _peak_bytes(path: Path) -> int:
    tracemalloc.start()
    try:
        task_of(path=str(path), units="word", max_eval_rows=20, tokenizer_sample=200)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_file(tmp_path, monkeypatch):
    """20 times the rows, the same peak (Python and NumPy allocations, traced): no row is
    kept in memory but its hashes and the bounded sample (and one chunk of rows being
    encoded, here 500). Reading every row into lists, as before, costs about 350 bytes a row
    here (7 MB more for the larger file)."""
    monkeypatch.setattr(corpus, "CHUNK", 500)
    small = _peak_bytes(write_tsv(tmp_path / "small.tsv", distinct_pairs(1_000)))
    large = _peak_bytes(write_tsv(tmp_path / "large.tsv", distinct_pairs(20_000, seed=1)))
    assert large - small < 1_500_000, (small, large)


@pytest.mark.parametrize(
    "hashes",
    [
        [1, 2, 3, 4],  # all at the bottom of the range: the fractions would take every one
        [2**32 - 4, 2**32 - 3, 2**32 - 2, 2**32 - 1],  # all at the top: none
        [5, 5, 6, 6, 7, 8, 2**31],
        list(range(0, 2**32, 2**20)),
    ],
)
@pytest.mark.parametrize("fractions", [(0.1, 0.1), (0.49, 0.49), (0.01, 0.3)])
def test_the_split_bounds_leave_every_split_a_source(hashes, fractions):
    settings = corpus.Settings(
        fields=("source", "target"),
        split_here=True,
        seed=0,
        val_fraction=fractions[0],
        test_fraction=fractions[1],
        max_eval_rows=10**9,
        sample_rows=10,
        max_row_chars=100,
        max_source_length=None,
        max_target_length=None,
        length_percentile=99.0,
        tokenizer_key={},
        tokenizers=None,
    )
    hashes = np.asarray(hashes, "uint32")
    val, test = corpus.split_bounds(hashes, settings, "task.path", "f.tsv")
    assert (hashes < val).any() and ((hashes >= val) & (hashes < test)).any()
    assert (hashes >= test).any()
    if len(hashes) > 1000:  # many sources: the fractions, to within a few sources
        assert abs(val / 2**32 - fractions[0]) < 1e-3 and abs(test / 2**32 - sum(fractions)) < 1e-3


def test_the_stored_training_split_is_described_to_mlflow_without_being_read(tmp_path, monkeypatch):
    from experiments.config import validate
    from experiments.training import datasets

    path = write_tsv(tmp_path / "pairs.tsv", toy_pairs(300))
    cfg = validate({"task": {"name": "pairs", "path": str(path), "units": "word"}})
    task = task_of(path=str(path), units="word")
    # the corpus digested the file when it opened it: not read again for the inputs
    monkeypatch.setattr(datasets, "file_digest", lambda p: pytest.fail(f"digested {p} again"))
    inputs = {i.tags[0].value: i for i in datasets.dataset_inputs(cfg, task)}
    train = inputs["training"]
    tags = {t.key: t.value for t in train.tags}
    assert tags["rows"] == str(len(task.train))
    assert tags["store_fingerprint"] == task.train.fingerprint
    assert tags["file_sha256"] == corpus.file_digest(path)
    assert train.dataset.digest == task.train.fingerprint[:8]
    assert train.dataset.profile is None or "num_rows" not in train.dataset.profile
    validation = {t.key: t.value for t in inputs["validation"].tags}
    assert "store_fingerprint" not in validation  # in memory: its arrays, as before
