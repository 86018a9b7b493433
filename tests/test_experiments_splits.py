"""Leak-free splits (issue 21): duplicates never straddle splits, generated tasks keep
training sources out of validation and test, the generalisation split has its own random
stream, and length-generalisation answers read as the training answers do."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from experiments_helpers import TINY_TASKS, migrated_store, runs, write_config

from experiments.commands import main
from experiments.config import validate
from experiments.data import length_buckets, metrics
from experiments.data.split import pad
from experiments.data.vocab import END
from experiments.tasks import build_task


def _task(**task):
    return build_task(validate({"task": task}).task)


def _dense(split):
    """A split in memory: a stored training split's rows, each padded to its own longest."""
    return split.take(slice(None)) if hasattr(split, "store") else split


def _rows(split) -> set[bytes]:
    """Each row's ids, the padding after them dropped (a stored split pads a batch to its
    own longest row, validation and test to the task's length)."""
    return {np.trim_zeros(row, "b").tobytes() for row in _dense(split).x}


# Tokens a `_duplicated_csv` text is cut to: "review", eight words and "!".
CUT = 10


def _duplicated_csv(folder, texts: int = 200, copies: int = 3):
    """Every text `copies` times, each text with one random label. The copies differ in
    case, spacing, the space before "!" and a tail past the first `CUT` tokens: with
    `max_length=CUT` the model is fed the same ids for each.

    A text spells its number in binary words, so every split's texts use the training
    vocabulary and stay distinct once encoded.
    """
    rng = random.Random(3)
    lines = ["text,label"]
    for i in range(texts):
        label = rng.choice(["pos", "neg"])
        words = " ".join("one" if bit == "1" else "zero" for bit in f"{i:08b}")
        variants = [
            f"review {words}!",
            f"  Review {words.upper()} !  ",
            f"REVIEW  {words}! and a tail past the cut",
        ]
        lines += [f"{variants[c % 3]},{label}" for c in range(copies)]
    path = folder / "dup.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_textcls_copies_of_a_text_stay_in_one_split(tmp_path):
    # "review ...!" and "Review ... !" tokenize alike, and the tail past the cut is never fed.
    task = _task(name="textcls", path=str(_duplicated_csv(tmp_path)), max_length=CUT)
    assert task.duplicate_rows == 400
    train = _rows(task.train)
    assert not train & _rows(task.val)
    assert not train & _rows(task.test)
    assert not _rows(task.val) & _rows(task.test)
    assert len(task.train) + len(task.val) + len(task.test) == 600


def test_a_memorising_model_scores_chance_on_random_labels_of_a_duplicated_csv(tmp_path):
    # The best a model can do with random labels is remember the training rows: with the
    # copies of a test text in training it scored near 1.0; it must score near chance.
    task = _task(name="textcls", path=str(_duplicated_csv(tmp_path)), max_length=CUT)
    train = _dense(task.train)
    memory = {np.trim_zeros(row, "b").tobytes(): int(y) for row, y in zip(train.x, train.y)}
    majority = Counter(train.y.tolist()).most_common(1)[0][0]
    predictions = np.array(
        [memory.get(np.trim_zeros(row, "b").tobytes(), majority) for row in task.test.x]
    )
    assert abs(metrics.accuracy(task.test.y, predictions) - 0.5) < 0.2


def test_textcls_with_too_few_distinct_texts_is_refused(tmp_path):
    path = tmp_path / "same.csv"
    path.write_text("text,label\n" + "same text,a\nSame  text,b\n" * 5, encoding="utf-8")
    with pytest.raises(Exception, match="task.path: .* 1 distinct texts"):
        _task(name="textcls", path=str(path))


@pytest.mark.parametrize(
    "task",
    [
        {
            "name": "reverse",
            "num_examples": 300,
            "alphabet_size": 2,
            "min_length": 1,
            "max_length": 4,
        },
        {"name": "dates", "num_examples": 600, "min_year": 2000, "max_year": 2000},
        {
            "name": "needle",
            "num_examples": 300,
            "num_classes": 2,
            "num_fillers": 2,
            "min_length": 2,
            "max_length": 3,
        },
        {"name": "addition", "num_examples": 300, "digits": 2},
    ],
    ids=lambda t: t["name"],
)
def test_generated_tasks_keep_training_sources_out_of_val_and_test(task):
    built = _task(**task)
    train = _rows(built.train)
    assert not train & _rows(built.val)
    assert not train & _rows(built.test)
    assert len(built.val) and len(built.test)


def test_generalisation_split_does_not_depend_on_num_examples():
    common = {"name": "reverse", "min_length": 2, "max_length": 4}
    longer = {"test_min_length": 5, "test_max_length": 8}
    small = _task(num_examples=100, **common, **longer).generalization
    large = _task(num_examples=300, **common, **longer).generalization
    n = min(len(small), len(large))
    assert np.array_equal(small.x[:n], large.x[:n])
    small = _task(name="addition", num_examples=100, digits=2, test_digits=4).generalization
    large = _task(name="addition", num_examples=300, digits=2, test_digits=4).generalization
    n = min(len(small), len(large))
    assert np.array_equal(small.x[:n], large.x[:n])


def test_an_addition_oracle_scores_one_on_every_length_bucket():
    task = _task(name="addition", num_examples=300, digits=2, test_digits=4)
    vocab = task.output_vocab
    # The answers the model is trained on: what a correct model outputs.
    (width,) = {len(vocab.decode(row)) for row in task.train.y}
    buckets = length_buckets.buckets(task)
    assert set(buckets) == {"len_1_2", "len_3_3", "len_4_4"}
    for name, split in buckets.items():
        answers = []
        for row in split.x:
            a, b = vocab.decode(row)[::-1].strip().split("+")
            answers.append(vocab.encode(str(int(a) + int(b)).ljust(width)) + [END])
        decoded = pad(answers, split.y.shape[1])
        assert metrics.exact_match(split.y, decoded) == 1.0, name


@pytest.mark.slow
def test_random_labels_on_a_duplicated_csv_score_chance_and_the_copies_are_logged(
    tmp_path, monkeypatch, capsys
):
    # One word of its own per text, so a model can learn each training text's label by heart.
    rng = random.Random(5)
    lines = ["text,label"]
    for i in range(100):
        label = rng.choice(["pos", "neg"])
        lines += [
            f"item{i} was seen,{label}",
            f"Item{i}  was SEEN ,{label}",
            f"item{i} was seen,{label}",
        ]
    path = tmp_path / "dup.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    uri = migrated_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    config = write_config(
        tmp_path,
        {**TINY_TASKS["textcls"], "path": str(path), "test_fraction": 0.3},
        model={"embedding_dim": 16, "units": 16, "rnn": "gru", "bidirectional": False},
        train={"epochs": 6, "batch_size": 64, "learning_rate": 0.05, "eval_examples": 64},
        tracking={"log_model": False},
    )
    assert main(["run", str(config)]) == 0
    assert "200 rows repeat an earlier row's input" in capsys.readouterr().out
    (run,) = runs(uri)
    metrics = run.data.metrics
    assert metrics["duplicate_rows"] == 200
    assert metrics["train_accuracy"] > 0.9  # it did learn the training texts by heart
    assert abs(metrics["test_accuracy"] - 0.5) < 0.2, metrics["test_accuracy"]
