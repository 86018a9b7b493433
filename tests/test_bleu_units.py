"""BLEU that means something on character-level tasks (issue 50): where a task's targets are
strings of characters, BLEU is scored on characters (sacrebleu's `char` tokenisation), so a
perfect model scores 100, not 0; where the targets are too short for BLEU's 4-grams
(`addition`), no BLEU is logged; a task of words keeps `13a`."""

from __future__ import annotations

import pytest
from experiments_helpers import TINY, TINY_TASKS

from experiments import config as config_lib
from experiments.data import text_scores
from experiments.kinds import seq2seq
from experiments.training import run


def _prepared_task(task: dict):
    return run.validate(config_lib.validate({"task": task, **TINY})).task


class _Perfect(seq2seq.Seq2Seq):
    """The seq2seq kind of a model that writes every target exactly."""

    def _decoded(self, model, sampler, split, seed=0):
        return split.targets

    def length_metrics(self, model, task, split):
        return {"exact_match_greedy": 1.0}


def _perfect_scores(task) -> tuple[dict, dict]:
    kind = _Perfect()
    gen_cfg = config_lib.GenerateConfig()
    out = kind.test_metrics(None, task, task.test, gen_cfg)
    assert kind.test_texts.hypotheses["greedy"] == kind.test_texts.references  # exact
    return out, kind.final_artifacts(None, task, task.test).dicts


@pytest.mark.parametrize("name", ["reverse", "dates"])
def test_bleu_on_a_character_task_is_100_when_exact_match_is_1(name):
    task = _prepared_task(TINY_TASKS[name])
    assert seq2seq.bleu_tokenize(task) == "char"
    out, dicts = _perfect_scores(task)
    assert out["bleu_greedy"] == pytest.approx(100.0)
    assert out["chrf_greedy"] == pytest.approx(100.0)
    assert "tok:char" in dicts["text/sacrebleu_signatures.json"]["bleu"]


def test_13a_made_a_perfect_reverse_model_score_0():
    task = _prepared_task(TINY_TASKS["reverse"])
    references = text_scores.SplitTexts.of(task, task.test).references
    assert text_scores.corpus_scores(references, references, "13a")["bleu"] == 0.0
    assert text_scores.corpus_scores(references, references, "char")["bleu"] > 99.9


def test_no_bleu_where_the_targets_are_too_short_for_4_grams():
    task = _prepared_task(TINY_TASKS["addition"])  # answers of 3 characters
    out, dicts = _perfect_scores(task)
    assert not [k for k in out if k.startswith("bleu")]
    assert out["chrf_greedy"] == pytest.approx(100.0)
    assert set(dicts["text/sacrebleu_signatures.json"]) == {"chrf"}
    assert not seq2seq.bleu_applies(["162", "72 ", "1000"], "char")
    assert seq2seq.bleu_applies(["1620", "72 1", "1000"], "char")


def test_a_task_of_words_keeps_13a():
    task = _prepared_task({"name": "copy_slots", "num_examples": 64, "num_probes": 1})
    assert seq2seq.bleu_tokenize(task) == "13a"


@pytest.mark.parametrize(
    "units, chosen, expected",
    [("word", "13a", "13a"), ("char", "13a", "char"), ("char", "intl", "intl")],
)
def test_pairs_units_decide_unless_a_tokenisation_was_chosen(units, chosen, expected, tmp_path):
    words = ["the cat", "a big dog sat", "red fish", "one two three", "green tea now"]
    rows = [f"{w} {i}\tle {w} {i}" for i, w in enumerate(words * 8)]
    path = tmp_path / "pairs.tsv"
    path.write_text("source\ttarget\n" + "\n".join(rows) + "\n")
    section = {"name": "pairs", "path": str(path), "units": units, "bleu_tokenize": chosen}
    task = _prepared_task({**section, "num_probes": 1})
    assert seq2seq.bleu_tokenize(task) == expected
