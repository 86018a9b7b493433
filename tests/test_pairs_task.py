"""`pairs`: your own source/target text pairs. Files read row by row and refused (exit 2,
file, row, what was found) before anything is made; splits by source text; subword units
learnt on the training split; lengths from the data, cuts counted; text scores equal to
sacrebleu's command line; the served model translating over HTTP (slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pytest
from experiments_helpers import migrated_store, runs, snapshot, write_config
from serving_helpers import post, served

from experiments.commands import main
from experiments.config import validate
from experiments.errors import EXIT_CONFIG
from experiments.tasks import build_task
from experiments.tracking import text_model

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "experiments" / "configs" / "data" / "software_en_fr.tsv"

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "a", "mat", "log", "big", "red"]
FRENCH = {
    "the": "le",
    "cat": "chat",
    "dog": "chien",
    "sat": "assis",
    "ran": "couru",
    "on": "sur",
    "a": "un",
    "mat": "tapis",
    "log": "bûche",
    "big": "grand",
    "red": "rouge",
}


def toy_pairs(count=200, seed=0) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(count):
        words = list(rng.choice(WORDS, rng.integers(2, 6)))
        pairs.append((" ".join(words), " ".join(FRENCH[w] for w in words)))
    return pairs


def write_tsv(path: Path, pairs, header="source\ttarget") -> Path:
    lines = ([header] if header else []) + [f"{s}\t{t}" for s, t in pairs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def train_texts(task) -> list[tuple[str, str]]:
    """The training rows, read from their store and decoded (the texts as cut there)."""
    train = task.train.take(slice(None))
    return [
        (task.tokenizer.decode(x), task.output_vocab.decode(y)) for x, y in zip(train.x, train.y)
    ]


def task_of(**section):
    return build_task(validate({"task": {"name": "pairs", "num_probes": 2, **section}}).task)


def test_splits_by_source_text_and_learns_the_tokenizer_on_training_rows(tmp_path):
    pairs = toy_pairs(300)
    pairs += [(pairs[0][0], "une autre traduction")] * 1  # a source with two targets
    pairs += [pairs[1]] * 3  # an exact duplicate row, three more times
    path = write_tsv(tmp_path / "pairs.tsv", pairs)
    task = task_of(path=str(path), vocabulary_size=300, seed=3)
    decoded = train_texts(task)
    assert all(any(s == a and b.startswith(t) for a, b in pairs) for s, t in decoded)  # cut
    sources = {name: {s for s, _ in task.splits()[name].texts} for name in ("val", "test")}
    sources["train"] = {s for s, _ in decoded}
    assert not sources["train"] & sources["val"] and not sources["train"] & sources["test"]
    assert not sources["val"] & sources["test"]
    assert task.duplicate_rows == len(pairs) - len(set(pairs))  # exact repeats, dropped
    assert sum(len(task.splits()[n]) for n in ("train", "val", "test")) == len(set(pairs))
    again = task_of(path=str(path), vocabulary_size=300, seed=3)
    assert again.test.texts == task.test.texts  # deterministic from the seed
    assert task_of(path=str(path), vocabulary_size=300, seed=4).test.texts != task.test.texts
    # subword units, adapted on the training split alone: a word seen only in test is pieces
    assert task.tokenizer.vocabulary_size <= 300
    assert task.tokenizer.decode(task.val.x[0]) == task.val.texts[0][0]
    assert task.output_vocab.decode(task.val.y[0]) == task.val.texts[0][1]


def test_lengths_default_from_the_data_and_cuts_are_counted(tmp_path):
    pairs = toy_pairs(200)
    pairs += [(" ".join(["big"] * 60), " ".join(["grand"] * 80))]  # one far longer example
    path = write_tsv(tmp_path / "pairs.tsv", pairs)
    task = task_of(path=str(path), units="word", vocabulary_size=100)
    counts = task.data_counts
    assert counts["max_source_length"] == 5 and counts["max_target_length"] == 5  # 99th pct
    assert counts["truncated_sources"] == 1 and counts["truncated_targets"] == 1
    assert task.train.take(slice(None)).x.shape[1] <= 5 and task.max_input_tokens == 5
    fixed = task_of(path=str(path), units="word", max_source_length=80, max_target_length=90)
    assert fixed.data_counts["truncated_sources"] == fixed.data_counts["truncated_targets"] == 0


HOSTILE = [
    "café naïve façade",
    "東京へ行きます",
    "emoji 🙂🚀 here",
    "  several   spaces\tand tabs  ",
    "x" * 5000,
]


def test_the_served_codec_encodes_and_decodes_as_training_did(tmp_path):
    """The card's tokenizer (what the served model and a reloaded `.keras` use) gives the
    runner's ids on hostile text, and subwords decode it back exactly; a text past the
    source length is cut there and said to be."""
    path = write_tsv(tmp_path / "pairs.tsv", toy_pairs(200))
    task = task_of(path=str(path), vocabulary_size=300)
    cfg = validate({"task": {"name": "pairs", "path": str(path)}, "generate": {"max_length": 8}})
    card = json.loads(json.dumps(task.kind.text_card(task, cfg)))
    codec = text_model.TextCodec(card)
    assert card["max_input_tokens"] == task.max_input_tokens
    for text in HOSTILE:
        ids = task.tokenizer.encode(text)
        assert codec.encode(text) == ids[: task.max_input_tokens]  # what the model is fed
        assert codec.input.decode(ids) == text  # subwords lose nothing
    cut = [codec.cut(task.tokenizer.encode(t)) for t in HOSTILE]
    truncated = [flag for _, flag in cut]
    assert truncated == [len(task.tokenizer.encode(t)) > task.max_input_tokens for t in HOSTILE]
    assert truncated[-1] and all(len(row) <= task.max_input_tokens for row, _ in cut)


def _refused(tmp_path, capsys, task: dict, *words: str):
    uri = migrated_store(tmp_path)
    config = write_config(tmp_path, {"name": "pairs", **task})
    before = snapshot(tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.chdir(tmp_path)
        assert main(["run", str(config)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err
    assert snapshot(tmp_path) == before  # nothing made: no run, no checkpoint
    return err


@pytest.mark.parametrize(
    "content, words",
    [
        ("source\ttarget\nhello\tbonjour\n\tvide\n", ["row 2", "empty 'source' value"]),
        (
            "source\ttarget\nhello\tbonjour\nyes\toui\textra\n",
            ["row 2", "has 3 column(s)", "expected 2"],
        ),
        ("src\ttgt\nhello\tbonjour\n", ["header row", "no column 'source'", "'src'"]),
        ("source\ttarget\n", ["holds no rows"]),
    ],
    ids=["empty-side", "columns", "header", "no-rows"],
)
def test_bad_rows_stop_the_run_before_anything_is_made(tmp_path, capsys, content, words):
    path = tmp_path / "pairs.tsv"
    path.write_text(content, encoding="utf-8")
    err = _refused(tmp_path, capsys, {"path": str(path)}, "task.path", str(path), *words)
    assert "Traceback" not in err


def test_bad_utf8_and_bad_keys_are_refused(tmp_path, capsys):
    path = tmp_path / "pairs.tsv"
    path.write_bytes(b"source\ttarget\nhello\tbonjour\ncaf\xe9\tcaf\xc3\xa9\n")
    _refused(tmp_path, capsys, {"path": str(path)}, "not UTF-8", "line 3", str(path))
    good = write_tsv(tmp_path / "good.tsv", toy_pairs(20))
    _refused(tmp_path, capsys, {"path": str(good), "train_path": str(good)}, "either task.path")
    _refused(tmp_path, capsys, {"train_path": str(good)}, "task.val_path and task.test_path")
    _refused(tmp_path, capsys, {"path": str(good), "units": "bytes"}, "task.units", "'subword'")
    _refused(tmp_path, capsys, {"path": str(tmp_path / "no.tsv")}, "does not exist")
    _refused(tmp_path, capsys, {"path": str(good), "bleu_tokenize": "moses"}, "sacrebleu")
    csv = tmp_path / "pairs.csv"
    csv.write_text("a,b\nx,y\n", encoding="utf-8")
    _refused(
        tmp_path, capsys, {"path": str(csv), "source_field": 0, "target_field": 1}, "need a .tsv"
    )


def test_positions_read_a_tsv_without_a_header_and_jsonl_by_keys(tmp_path):
    pairs = toy_pairs(60)
    plain = write_tsv(tmp_path / "plain.tsv", pairs, header=None)
    task = task_of(path=str(plain), source_field=0, target_field=1, units="word")
    assert len(task.train) + len(task.val) + len(task.test) == len(set(pairs))
    rows = "\n".join(json.dumps({"en": s, "fr": t, "id": i}) for i, (s, t) in enumerate(pairs))
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text(rows + "\n", encoding="utf-8")
    task = task_of(path=str(jsonl), source_field="en", target_field="fr", units="char")
    assert {s for s, _ in train_texts(task)} <= {s for s, _ in pairs}


def test_split_files_are_used_as_they_are(tmp_path):
    pairs = toy_pairs(120)
    files = {
        name: str(write_tsv(tmp_path / f"{name}.tsv", part))
        for name, part in (("train", pairs[:80]), ("val", pairs[80:100]), ("test", pairs[100:]))
    }
    task = task_of(
        train_path=files["train"], val_path=files["val"], test_path=files["test"], units="word"
    )
    assert [t for t in task.test.texts] == list(dict.fromkeys(pairs[100:]))


@pytest.mark.slow  # a real run, sacrebleu's CLI and a real `mlflow models serve`
def test_a_pairs_run_scores_like_sacrebleu_and_its_served_model_translates(tmp_path):
    path = write_tsv(tmp_path / "pairs.tsv", toy_pairs(400))
    uri = migrated_store(tmp_path)
    config = write_config(
        tmp_path,
        {"name": "pairs", "path": str(path), "units": "word", "num_probes": 2},
        model={"embedding_dim": 16, "units": 32},
        train={"epochs": 12, "batch_size": 16, "learning_rate": 0.01, "run_eagerly": False},
        generate={"sampler": {"name": "beam", "beam_width": 2}},
        tracking={"experiment": "pairs", "num_samples": 2, "system_metrics": False},
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.chdir(tmp_path)
        assert main(["run", str(config)]) == 0
    (run,) = runs(uri, "pairs")
    metrics = run.data.metrics
    for name in ("bleu_greedy", "chrf_greedy", "bleu_beam", "chrf_beam", "copy_baseline_chrf"):
        assert 0 <= metrics[f"test_{name}"] <= 100 + 1e-9  # sacrebleu: 100.00000000000004
    assert metrics["test_chrf_greedy"] > metrics["test_copy_baseline_chrf"]  # it learnt
    texts = Path(
        mlflow.artifacts.download_artifacts(
            run_id=run.info.run_id, artifact_path="text", tracking_uri=uri, dst_path=str(tmp_path)
        )
    )
    for sampler in ("greedy", "beam"):
        command = [sys.executable, "-m", "sacrebleu", str(texts / "test_references.txt"), "-i"]
        command += [str(texts / f"test_hypotheses_{sampler}.txt"), "-m", "bleu", "chrf"]
        command += ["-b", "-f", "text", "-w", "4"]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()
        assert metrics[f"test_bleu_{sampler}"] == pytest.approx(float(out[0]), abs=1e-4)
        assert metrics[f"test_chrf_{sampler}"] == pytest.approx(float(out[1]), abs=1e-4)
    heatmap = {
        a.path for a in mlflow.MlflowClient(uri).list_artifacts(run.info.run_id, "heatmaps/final")
    }
    assert "heatmaps/final/probe_0.png" in heatmap
    with served(run.data.tags["text_model_uri"], uri, tmp_path) as url:
        status, answer = post(url, {"inputs": ["the big dog sat", "red " * 300]})
        assert status == 200, answer
        first, long = answer["predictions"]
        assert isinstance(first["text"], str) and first["truncated"] is False
        assert long["truncated"] is True
        status, answer = post(
            url, {"inputs": ["the cat"], "params": {"sampler": "beam", "num_beams": 0}}
        )
        assert status == 400 and "num_beams" in json.dumps(answer)


def test_a_jsonl_row_nested_too_deep_is_refused_naming_its_line(tmp_path, capsys):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"source": "hello", "target": "bonjour"}\n' + "[" * 100_000 + "\n")
    err = _refused(
        tmp_path,
        capsys,
        {"path": str(path), "max_row_chars": 200_000},
        f"task.path: row 2 (line 2) of {path} nests arrays or objects deeper",
        "Received: '[[[[",
    )
    assert "Traceback" not in err and "RecursionError" not in err


def test_a_vocabulary_too_small_for_the_characters_is_refused(tmp_path, capsys):
    # 400 distinct characters: more than SentencePiece's 300 pieces (256 bytes among them)
    chars = [chr(0x4E00 + i) for i in range(400)]
    pairs = [("".join(chars[i : i + 20]), "".join(chars[i + 1 : i + 21])) for i in range(380)]
    path = write_tsv(tmp_path / "pairs.tsv", pairs)
    err = _refused(
        tmp_path,
        capsys,
        {"path": str(path), "vocabulary_size": 300},
        "task.vocabulary_size: the tokenizer could not learn a vocabulary of at most 300 tokens",
        "Vocabulary size is smaller than required_chars",
        "Received: task.vocabulary_size=300",
    )
    assert "Traceback" not in err


@pytest.mark.parametrize("fields", [{}, {"source_field": 0, "target_field": 1}])
def test_a_byte_order_mark_is_not_part_of_the_first_field(tmp_path, fields):
    pairs = toy_pairs(60)
    path = write_tsv(tmp_path / "pairs.tsv", pairs, header=None if fields else "source\ttarget")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # as Excel and Notepad save UTF-8
    task = task_of(path=str(path), units="word", **fields)
    texts = [s for s, _ in train_texts(task) + task.val.texts + task.test.texts]
    assert sorted(texts) == sorted({s for s, _ in pairs})  # the first one without "\ufeff"
