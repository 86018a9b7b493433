"""A new task kind is one class plus its registration, and a new task one builder and config
section plus theirs: a run trains it from a config, tracks it and logs its text model, with
no edit under `experiments/`."""

from __future__ import annotations

from typing import Literal

import mlflow
import numpy as np
import pytest
from experiments_helpers import migrated_store, runs, write_config
from pydantic import Field

from experiments import config as config_lib
from experiments import kinds, tasks
from experiments.commands import main
from experiments.data import modeling
from experiments.data.split import Split, make_splits, pad
from experiments.data.task import Task
from experiments.data.vocab import Vocab
from experiments.kinds import TaskKind
from keras_attn_rnn import models


class Majority(TaskKind):
    """Which letter a sequence holds more of, scored by its error rate (a test's kind)."""

    name = "majority"
    model_type = "AttentiveClassifier"
    default_score = "dot"
    metric_names = ("error_rate",)
    primary_metric = "test_error_rate"
    ignore_padding = False  # labels, not token sequences

    def build_model(self, cfg, task):
        m = cfg.model
        return models.AttentiveClassifier(
            vocab_size=len(task.vocab),
            num_classes=len(task.class_names),
            bidirectional=self.bidirectional(cfg),
            attention=self.attention(cfg),
            embedding_dim=m.embedding_dim,
            units=m.units,
            rnn=m.rnn,
        )

    def task_metrics(self, model, task, split, logits):
        return {"error_rate": float(np.mean(np.argmax(logits, -1) != split.y))}

    def attended_rows(self, split):
        return None  # one pooling row per sequence

    def serving_output(self, model, cfg, tokens):
        return modeling.predict_logits(model, tokens)

    def card_fields(self, task, cfg):
        return {"classes": list(task.class_names)}

    def heatmap(self, task, i, source, logits, weights):
        guess = task.class_names[int(np.argmax(logits))]
        return weights[None, : len(source)], source, [guess], f"probe {i}: {guess}"


class MajorityTask(config_lib.TaskSection):
    """`task` of the majority task: strings of `a` and `b` of one odd length."""

    name: Literal["majority"]
    num_examples: int = Field(64, ge=16)
    length: int = Field(7, ge=1, le=31)


def build_majority(cfg: MajorityTask) -> Task:
    rng = np.random.default_rng(cfg.seed)
    vocab = Vocab(["a", "b"])
    texts = ["".join(rng.choice(["a", "b"], cfg.length)) for _ in range(cfg.num_examples)]
    labels = np.array([int(t.count("b") > t.count("a")) for t in texts], "int32")
    data = Split(pad([vocab.encode(t) for t in texts], cfg.length), labels)
    return Task("majority", Majority(), vocab, *make_splits(data, cfg, rng), class_names=["a", "b"])


@pytest.fixture
def registered():
    kind = kinds.register(Majority)
    tasks.register("majority", build_majority, MajorityTask)
    yield kind
    tasks.unregister("majority")
    del kinds.REGISTRY._members["majority"]


def test_a_run_trains_tracks_and_logs_it_from_a_config(registered, tmp_path, monkeypatch):
    uri = migrated_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    task = {"name": "majority", "num_examples": 64, "num_probes": 1}
    config = write_config(tmp_path, task, tracking={"experiment": "majority"})

    assert main(["run", str(config)]) == 0

    (run,) = runs(uri, "majority")
    assert run.info.status == "FINISHED"
    assert run.data.params["task.name"] == "majority"
    assert run.data.params["model.attention.score"] == "dot"  # the kind's default
    assert run.data.tags["task_kind"] == "majority"
    assert run.data.tags["model"] == "AttentiveClassifier"
    assert 0.0 <= run.data.metrics["test_error_rate"] <= 1.0
    assert "val_error_rate" in run.data.metrics and "val_attention_entropy" in run.data.metrics
    text_model = mlflow.pyfunc.load_model(run.data.tags["text_model_uri"])
    answers = text_model.predict(["abbbbba", "aaaab"])
    assert [a["tokens"] for a in answers] == [list("abbbbba"), list("aaaab")]
    assert [len(a["attention"]) for a in answers] == [7, 5]  # one weight per letter
    assert {a["label"] for a in answers} <= {"a", "b"}


def test_the_config_knows_it_and_checks_its_section(registered):
    cfg = config_lib.validate({"task": {"name": "majority", "length": 5}})
    assert isinstance(cfg.task, MajorityTask) and cfg.task.length == 5
    assert config_lib.to_dict(cfg)["task"]["length"] == 5  # the section's own keys are logged
    assert "majority" in config_lib.task_names() and "majority" in kinds.names()
    with pytest.raises(config_lib.ConfigError, match=r"task\.length: got 0"):
        config_lib.validate({"task": {"name": "majority", "length": 0}})
    with pytest.raises(config_lib.ConfigError, match=r"task\.digits: .*no such key"):
        config_lib.validate({"task": {"name": "majority", "digits": 3}})


def test_an_unregistered_task_is_refused_with_the_registered_names(registered):
    tasks.unregister("majority")
    with pytest.raises(config_lib.ConfigError, match=r"task\.name: got 'majority'; expected one"):
        config_lib.validate({"task": {"name": "majority"}})
    tasks.register("majority", build_majority, MajorityTask)


def test_a_name_is_registered_once(registered):
    assert kinds.register(registered) is registered  # the same object again is fine
    with pytest.raises(ValueError, match="kind 'majority' is registered already"):
        kinds.register(type("Majority", (Majority,), {}))
    with pytest.raises(ValueError, match="task 'needle' is registered already"):
        tasks.register("needle", build_majority, MajorityTask)
    with pytest.raises(ValueError, match="must be a subclass of TaskKind"):
        kinds.register(Majority())
