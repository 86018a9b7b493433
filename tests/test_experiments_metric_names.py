"""Metric names say what they measure (issue 21): the split as a prefix, the sampler of an exact
match as a suffix, and a subset's value never under a full split's name."""

from __future__ import annotations

import types

import pytest
from experiments_helpers import (
    LEGACY_METRICS,
    TINY_TASKS,
    documented_metrics,
    write_text_dataset,
)

from experiments import kinds
from experiments.config import GenerateConfig, validate
from experiments.tasks import build_task
from experiments.training import run as training_run
from experiments.training.callbacks import EvalMetrics
from keras_attn_rnn import samplers


class _StubKind:
    fit_metrics = ("accuracy",)

    def evaluate(self, model, task, split):  # what a validation subset scores
        return {
            "accuracy": 0.1,
            "macro_f1": 0.2,
            "alignment_accuracy": 0.3,
            "attention_entropy": 0.4,
        }


def test_epoch_metrics_are_named_by_their_split():
    callback = EvalMetrics(types.SimpleNamespace(kind=_StubKind()), split=None)
    callback.set_model(types.SimpleNamespace())
    logs = {"loss": 1.0, "accuracy": 0.7, "val_loss": 1.1, "val_accuracy": 0.9}
    callback.on_epoch_end(0, logs)
    assert logs == {
        "loss": 1.0,
        "train_accuracy": 0.7,  # fit's running mean over the training batches
        "val_loss": 1.1,
        "val_accuracy": 0.9,  # fit's, on the whole validation split: kept
        "val_macro_f1": 0.2,
        "val_alignment_accuracy": 0.3,
        "val_attention_entropy": 0.4,
    }


def test_epoch_metric_names_carry_their_split():
    task = build_task(validate({"task": {"name": "needle", "num_examples": 64}}).task)
    names = kinds.get("classification").epoch_metric_names(task)
    assert names == {
        "train_accuracy",
        "val_accuracy",
        "val_macro_f1",
        "val_alignment_accuracy",
        "val_attention_entropy",
    }


@pytest.mark.parametrize("strategy", ["greedy", "beam", "top_k"])
def test_test_exact_match_names_its_sampler(strategy, monkeypatch):
    cfg = validate(
        {
            "task": {"name": "reverse", "num_examples": 64, "max_length": 5},
            "model": {"embedding_dim": 4, "units": 4},
        }
    )
    task = build_task(cfg.task)
    kind = task.kind
    model = kind.build_model(cfg, task)
    used = []
    decode = kind.decode

    def recording(model, sampler, prompts, max_length, batch_size=None, min_length=None, seed=0):
        name = samplers.REGISTRY.name_of(sampler)
        used.append(name + ("" if min_length is None else "+oracle"))
        return decode(model, sampler, prompts, max_length, batch_size, min_length, seed=seed)

    monkeypatch.setattr(kind, "decode", recording)
    options = {"beam": {"beam_width": 2}, "top_k": {"k": 2}}.get(strategy, {})
    gen_cfg = GenerateConfig(sampler={"name": strategy, **options})
    results = kind.test_metrics(model, task, task.test, gen_cfg)
    expected = {
        "token_accuracy",
        "exact_match_greedy",
        "exact_match_oracle",
        "alignment_accuracy",
        "attention_entropy",
        "bleu_greedy",
        "chrf_greedy",
        "copy_baseline_chrf",
    }
    if strategy == "beam":  # the scores of a random sampler are no test figure
        expected |= {"exact_match_beam", "bleu_beam", "chrf_beam"}
    assert set(results) == expected
    # the oracle length decodes greedy too (with no `</s>` before each target's length)
    assert used == ["greedy", "greedy+oracle"] + (["beam"] if strategy == "beam" else [])
    assert all(0.0 <= results[k] <= 1.0 for k in results if k.startswith("exact_match"))


class _Recorder:
    """The tracker of `_log_length_generalisation`: keeps the metric names it is given."""

    def __init__(self):
        self.names = set()

    def log_metrics_once(self, values, step):
        self.names |= set(values)

    def log_dict(self, data, path):
        pass

    def log_figure(self, figure, path):
        pass


# With longer test examples, so the per-bucket names are made too.
LONGER = {
    "reverse": {**TINY_TASKS["reverse"], "test_min_length": 7, "test_max_length": 9},
    "addition": {**TINY_TASKS["addition"], "test_digits": 3},
}


@pytest.mark.parametrize("name", sorted(TINY_TASKS))
def test_every_metric_name_is_in_the_docs_table(name, tmp_path):
    task = dict(LONGER.get(name, TINY_TASKS[name]))
    if name == "textcls":
        task["path"] = str(write_text_dataset(tmp_path))
    cfg = validate(
        {
            "task": task,
            "model": {"embedding_dim": 4, "units": 4},
            "generate": {"sampler": {"name": "beam", "beam_width": 2}},  # adds exact_match_beam
        }
    )
    prepared = training_run.validate(cfg)
    cfg, task = prepared.cfg, prepared.task
    model = task.kind.build_model(cfg, task)
    model.run_eagerly = True  # tiny splits: quicker than tracing each shape
    # The names the runner logs: each epoch's, the test split's, each length bucket's, and
    # the two it names itself.
    names = training_run.epoch_metric_names(task) | {"best_epoch", "duplicate_rows"}
    test = task.kind.test_metrics(model, task, task.test.take(slice(0, 2)), cfg.generate)
    names |= {f"test_{key}" for key in test}
    recorder = _Recorder()
    training_run._log_length_generalisation(model, cfg, task, recorder, 1)
    assert bool(recorder.names) == (name in LONGER)
    names |= recorder.names
    names |= set(task.kind.final_artifacts(model, task, task.test.take(slice(0, 2))).metrics)

    assert not names & LEGACY_METRICS
    documented = documented_metrics()
    assert {n for n in names if not documented.fullmatch(n)} == set()
