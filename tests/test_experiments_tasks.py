"""Task data and metric functions (pure NumPy, no training)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys

import keras
import numpy as np
import pytest
from experiments_helpers import write_text_dataset

from experiments import kinds
from experiments.config import validate
from experiments.data import confusion, metrics
from experiments.data.vocab import END, PAD, START
from experiments.errors import ConfigError
from experiments.tasks import build_task


def _task(**task):
    return build_task(validate({"task": task}).task)


def test_needle_alignment_points_at_the_label_token():
    task = _task(name="needle", num_examples=200, num_classes=3)
    for split in (task.train, task.val, task.test):
        picked = split.x[np.arange(len(split)), split.alignment]
        names = [task.vocab.tokens[i] for i in picked]
        assert names == [task.class_names[y] for y in split.y]
    assert len(task.probes) == 4


def test_reverse_targets_and_alignment():
    task = _task(name="reverse", num_examples=100, min_length=3, max_length=7)
    s = task.train
    for i in range(20):
        source = task.vocab.decode(s.x[i])
        assert task.output_vocab.decode(s.y[i]) == source[::-1]
        steps = np.flatnonzero(s.alignment[i] >= 0)
        assert len(steps) == len(source)
        assert np.array_equal(s.y[i, steps], s.x[i, s.alignment[i, steps]])
        n = len(source)
        assert s.x_dec[i, 0] == START and np.array_equal(s.x_dec[i, 1 : n + 1], s.y[i, :n])
        assert s.y[i, len(source)] == END


def test_addition_answers_are_right_and_questions_reversed():
    task = _task(name="addition", num_examples=300, digits=3)
    assert len(task.train) + len(task.val) + len(task.test) == 300
    for i in range(50):
        question = task.vocab.decode(task.train.x[i])[::-1]
        assert len(question) == 7
        a, b = question.strip().split("+")
        answer = task.output_vocab.decode(task.train.y[i])
        assert len(answer) == 4 and int(answer) == int(a) + int(b)


def test_dates_targets_are_iso():
    task = _task(name="dates", num_examples=100, min_year=2000, max_year=2001)
    for i in range(30):
        iso = task.output_vocab.decode(task.train.y[i])
        assert dt.date.fromisoformat(iso).year in (2000, 2001)
        assert task.vocab.decode(task.train.x[i])


def test_lm_targets_are_inputs_shifted():
    task = _task(name="lm", max_chars=3000, seq_length=20)
    x, y = task.train.x, task.train.y
    assert np.array_equal(x[0, 1:], y[0, :-1])
    assert task.prompts and len(task.vocab) <= 96


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_textcls_reads_csv_and_jsonl(tmp_path, suffix):
    path = write_text_dataset(tmp_path, suffix=suffix)
    task = _task(name="textcls", path=str(path), max_length=8)
    assert task.class_names == ["bad", "good"]
    assert task.val.x.shape[1] == 8
    assert max(task.train.lengths()[0]) <= 8  # stored, each batch padded to its own longest
    assert len(task.train) + len(task.val) + len(task.test) == 64


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_textcls_drops_a_byte_order_mark(tmp_path, suffix):
    path = write_text_dataset(tmp_path, rows=16, suffix=suffix)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # the first header: "\ufefftext"
    task = _task(name="textcls", path=str(path), max_length=12)
    assert task.class_names == ["bad", "good"]


def test_lm_drops_a_byte_order_mark(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("\ufeff" + "ab cd\n" * 40, encoding="utf-8")
    task = _task(name="lm", path=str(path), seq_length=8)
    assert "\ufeff" not in task.vocab.tokens and "a" in task.vocab.tokens


def test_imdb_offline_error_is_clear(monkeypatch):
    import keras

    def offline(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(keras.datasets.imdb, "load_data", offline)
    with pytest.raises(ConfigError, match="network access.*task.path"):
        _task(name="textcls", source="imdb")


def _write_imdb(folder):
    """A tiny stand-in for the two files `keras.datasets.imdb` downloads."""
    rng = np.random.default_rng(0)

    def reviews(n):
        out = np.empty(n, dtype=object)  # ragged word-index lists, as in the real file
        for i in range(n):
            out[i] = [int(w) for w in rng.integers(1, 30, size=int(rng.integers(3, 9)))]
        return out

    labels = np.array([0, 1] * 12)
    np.savez(
        folder / "imdb.npz", x_train=reviews(24), y_train=labels, x_test=reviews(24), y_test=labels
    )
    index = {f"word{i}": i for i in range(1, 30)}
    (folder / "imdb_word_index.json").write_text(json.dumps(index), encoding="utf-8")


def test_imdb_builds_a_task_and_a_model_from_keras_datasets(tmp_path, monkeypatch):
    # keras.datasets.imdb downloads through the `get_file` of its own module: point that at
    # the local files, so the rest of load_data and get_word_index runs for real.
    module = sys.modules[keras.datasets.imdb.load_data.__module__]
    assert hasattr(module, "get_file"), f"{module.__name__} no longer downloads via get_file"
    _write_imdb(tmp_path)
    monkeypatch.setattr(module, "get_file", lambda fname, origin, **kw: str(tmp_path / fname))
    cfg = validate(
        {"task": {"name": "textcls", "source": "imdb", "max_vocab": 40, "max_length": 8}}
    )

    task = build_task(cfg.task)

    assert task.kind.name == "classification" and task.class_names == ["neg", "pos"]
    assert len(task.train) + len(task.val) + len(task.test) == 48
    assert task.vocab.tokens[4:6] == ["word1", "word2"]  # index_from=3: word i has id i + 3
    model = task.kind.build_model(cfg, task)
    assert model(task.probes.x).shape == (len(task.probes), 2)


def test_a_task_holds_its_kind_object_from_the_kinds_registry():
    task = _task(name="reverse", num_examples=20)
    assert type(task.kind) is kinds.REGISTRY.class_for("seq2seq") and task.kind.name == "seq2seq"
    assert kinds.REGISTRY.name_of(task.kind) == "seq2seq"
    assert {"classification", "seq2seq", "lm"} <= set(kinds.names())
    with pytest.raises(ValueError, match="kind must be one of .*Received: kind='translation'"):
        kinds.get("translation")
    with pytest.raises(ValueError, match="kind must be a TaskKind object.*Received: kind='lm'"):
        dataclasses.replace(task, kind="lm")


def test_same_seed_same_data():
    a, b = _task(name="reverse", num_examples=50), _task(name="reverse", num_examples=50)
    assert np.array_equal(a.train.x, b.train.x)
    c = _task(name="reverse", num_examples=50, seed=1)
    assert not np.array_equal(a.train.x, c.train.x)


def test_classification_metrics():
    labels, preds = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])
    assert metrics.accuracy(labels, preds) == 0.75
    assert metrics.confusion_matrix(labels, preds, 2).tolist() == [[1, 1], [0, 2]]
    assert metrics.macro_f1(labels, preds, 2) == pytest.approx((2 / 3 + 0.8) / 2)


def test_the_confusion_matrix_of_many_classes_stays_small():
    few = metrics.confusion_cells(np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1]))
    assert few.tolist() == [[0, 0, 1], [0, 1, 1], [1, 1, 2]]  # (true, predicted, count)
    classes = 1000
    labels = np.arange(2 * classes) % classes
    predictions = labels.copy()
    predictions[:40] = (labels[:40] + 1) % classes  # classes 0..40 confused with a neighbour
    names = [f"a class name far longer than a tick label {i}" for i in range(classes)]
    cells = metrics.confusion_cells(labels, predictions)
    figure = confusion.figure(cells, names)
    (axes, _) = figure.axes  # the matrix and its colour bar
    ticks = [t.get_text() for t in axes.get_xticklabels()]
    assert len(ticks) == confusion.FIGURE_CLASSES == 30  # the 30 most confused, of 41
    assert all(len(t) <= confusion.TICK_CHARS for t in ticks) and ticks[0].endswith("…")
    assert len(axes.texts) == 30 * 30 and "30 most confused of 1000" in axes.get_title()
    document = confusion.confusion_json(labels, predictions, names)
    assert "matrix" not in document and len(document["cells"]) == len(cells) == 1000 + 40
    assert confusion.most_confused(cells, classes, 3).tolist() == [1, 2, 3]  # 2 errors each
    small = confusion.confusion_json(labels[:6] % 3, predictions[:6] % 3, names[:3])
    assert (
        small["matrix"] == metrics.confusion_matrix(labels[:6] % 3, predictions[:6] % 3, 3).tolist()
    )


def test_sequence_metrics():
    targets = np.array([[5, 6, END, PAD], [5, 7, END, PAD]])
    decoded = np.array([[5, 6, END, 0], [5, 6, END, 0]])
    assert metrics.exact_match(targets, decoded) == 0.5
    logits = np.eye(8)[np.array([[5, 6, END, 0], [5, 6, END, 0]])]
    assert metrics.token_accuracy(targets, logits) == pytest.approx(5 / 6)
    uniform = np.zeros((1, 3, 4))
    lm = metrics.language_model_metrics(np.array([[1, 2, 3]]), uniform)
    assert lm["perplexity"] == pytest.approx(4.0) and lm["bits_per_char"] == pytest.approx(2.0)


def test_attention_metrics():
    weights = np.array([[[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]]])
    assert metrics.alignment_accuracy(weights, np.array([[1, -1]])) == 1.0
    assert metrics.attention_entropy(weights) == pytest.approx(np.log(2) / 2)
    empty = np.zeros((1, 2, 3))
    assert np.isnan(metrics.attention_entropy(empty))


def test_length_generalisation_splits_are_longer_and_cover_every_length():
    from experiments.data import length_buckets

    cfg = validate(
        {
            "task": {
                "name": "reverse",
                "num_examples": 300,
                "max_length": 8,
                "test_min_length": 9,
                "test_max_length": 14,
            }
        }
    ).task
    task = build_task(cfg)
    longer = task.generalization
    assert longer.length.min() == 9 and longer.length.max() == 14
    assert set(np.bincount(longer.length)[9:]) <= {len(longer) // 6, len(longer) // 6 + 1}
    np.testing.assert_array_equal((longer.x != 0).sum(1), longer.length)
    assert np.all(task.train.length <= 8)
    # the reversal and its alignment hold for the longer strings too
    for row in range(3):
        n = longer.length[row]
        np.testing.assert_array_equal(longer.y[row, :n], longer.x[row, :n][::-1])
        np.testing.assert_array_equal(longer.alignment[row, :n], np.arange(n)[::-1])
    assert list(length_buckets.buckets(task)) == ["len_4_8", "len_9_10", "len_11_12", "len_13_14"]

    cfg = validate(
        {"task": {"name": "addition", "num_examples": 400, "digits": 2, "test_digits": 4}}
    ).task
    task = build_task(cfg)
    longer = task.generalization
    assert set(longer.length.tolist()) == {3, 4}
    for row in range(4):
        question = "".join(task.vocab.tokens[i] for i in longer.x[row])[::-1].strip()
        a, b = map(int, question.split("+"))
        assert max(len(str(a)), len(str(b))) == longer.length[row]
        assert task.output_vocab.decode(longer.y[row]).strip() == str(a + b)


@pytest.mark.parametrize("units, size", [("char", 60), ("word", 200), ("subword", 320)])
def test_lm_takes_words_and_subwords_and_prompts_from_your_text(tmp_path, units, size):
    """`lm` over your file in any unit, the vocabulary learnt on the training part; the
    sample prompts are the first words of the validation part's lines, not built in."""
    lines = [
        f"line {i}: the {'red' if i % 2 else 'blue'} fox jumps over dog {i % 7}" for i in range(300)
    ]
    path = tmp_path / "text.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = validate(
        {
            "task": {
                "name": "lm",
                "path": str(path),
                "units": units,
                "max_vocab": size,
                "seq_length": 16,
                "num_probes": 2,
            }
        }
    )
    task = build_task(cfg.task)
    assert task.tokenizer.vocabulary_size <= size
    starts = {" ".join(line.split()[:3]) + " ": i for i, line in enumerate(lines)}
    assert len(task.prompts) == 2 and all(p in starts for p in task.prompts)
    first_validation_line = 0.8 * len(lines)  # the text is split by position: train first
    assert all(first_validation_line <= starts[p] < 0.92 * len(lines) for p in task.prompts)
    train = task.train.take(slice(0, 4))  # stored: windows cut from the token stream
    assert train.x.shape[1] == 16
    text = task.vocab.decode(train.x[0])
    if units == "word":  # words decode joined by spaces
        assert text.split() and set(text.split()) <= set(
            " ".join(lines).replace(":", " : ").split()
        )
    else:  # characters and subword units decode to the text itself
        assert text and text in path.read_text(encoding="utf-8")
