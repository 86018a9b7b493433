"""The linear baseline beside every classifier: TF-IDF + logistic regression on the run's splits."""

import numpy as np
import pytest

from experiments.data import baseline
from experiments.data.split import Split


def split_of(rows, labels):
    width = max(len(r) for r in rows)
    x = np.zeros((len(rows), width), dtype="int32")
    for i, row in enumerate(rows):
        x[i, : len(row)] = row
    return Split(x=x, y=np.asarray(labels, dtype="int32"))


def test_documents_drop_padding_and_keep_order():
    assert baseline.documents(split_of([[5, 7, 5], [9]], [0, 1])) == ["5 7 5", "9"]


def test_a_class_given_away_by_a_word_is_learned():
    rng = np.random.default_rng(0)
    rows, labels = [], []
    for i in range(120):
        label = i % 3
        rows.append(list(rng.integers(10, 40, size=6)) + [100 + label])  # noise, then the clue
        labels.append(label)
    train, test = split_of(rows[:90], labels[:90]), split_of(rows[90:], labels[90:])
    got = baseline.linear_baseline(train, test, num_classes=3)
    assert got == {"accuracy": 1.0, "macro_f1": 1.0}


def test_a_bigram_carries_the_class_when_no_word_does():
    # both classes use words 4 and 5 equally; only their order (the bigram) differs
    rows = [[4, 5, 6], [5, 4, 6]] * 40
    labels = [0, 1] * 40
    got = baseline.linear_baseline(
        split_of(rows[:60], labels[:60]), split_of(rows[60:], labels[60:]), 2
    )
    assert got["accuracy"] == 1.0


def test_labels_unrelated_to_the_text_give_chance():
    rng = np.random.default_rng(1)
    rows = [list(rng.integers(4, 60, size=8)) for _ in range(400)]
    labels = rng.integers(0, 2, size=400)
    got = baseline.linear_baseline(
        split_of(rows[:300], labels[:300]), split_of(rows[300:], labels[300:]), 2
    )
    assert 0.3 < got["accuracy"] < 0.7


def test_one_class_in_training_predicts_it():
    got = baseline.linear_baseline(split_of([[4], [5]], [1, 1]), split_of([[4], [6]], [1, 0]), 2)
    assert got["accuracy"] == pytest.approx(0.5)


def test_past_its_bounds_it_fits_on_a_sample_and_predicts_in_blocks(monkeypatch):
    monkeypatch.setattr(baseline, "MAX_ROW_CLASSES", 3 * 40)  # 40 training rows of 300
    monkeypatch.setattr(baseline, "MAX_WEIGHTS", 3 * 10)  # the 10 most frequent features
    real, sizes = baseline.documents, []

    def documents(split):
        sizes.append(len(split))
        return real(split)

    monkeypatch.setattr(baseline, "documents", documents)
    rng = np.random.default_rng(0)
    rows = [list(rng.integers(10, 40, size=2)) + [100 + i % 3] for i in range(420)]  # the clue
    labels = [i % 3 for i in range(420)]
    train, test = split_of(rows[:300], labels[:300]), split_of(rows[300:], labels[300:])
    assert baseline.linear_baseline(train, test, 3) == {"accuracy": 1.0, "macro_f1": 1.0}
    assert sizes == [40, 40, 40, 40]  # fitted on 40 rows; 120 test rows predicted 40 at a time
