"""A new task is one module plus its YAML, and a new task kind one class in a module: here
both live in a package of their own (`my_tasks`, written to a temporary folder on
`sys.path` and named by `ATTN_RNN_TASK_PACKAGES`), and a run trains the task from its
YAML, tracks it and logs its text model, with no edit under `experiments/`."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Literal

import mlflow
import pytest
from doc_blocks import contributing_block, run_recipe_tests
from experiments_helpers import migrated_store, runs, write_config

from experiments import config as config_lib
from experiments import kinds, tasks
from experiments.commands import main

ROOT = Path(__file__).resolve().parents[1]

# The whole task: its kind, its config section, its builder and their registrations.
MAJORITY = '''
"""`majority`: which letter a string of `a` and `b` holds more of (a plugin's task)."""

from typing import Literal

import numpy as np
from pydantic import Field

from experiments import kinds, tasks
from experiments.data import modeling
from experiments.data.sections import TaskSection
from experiments.data.split import Split, make_splits, pad
from experiments.data.task import Task
from experiments.data.vocab import Vocab
from experiments.kinds import TaskKind
from keras_attn_rnn import models


@kinds.register
class Majority(TaskKind):
    """One label per string, scored by its error rate."""

    name = "majority"
    model_type = "AttentiveClassifier"
    default_score = "dot"
    metric_names = ("error_rate",)
    primary_metric = "test_error_rate"

    def build_model(self, cfg, task):
        m = cfg.model
        return models.AttentiveClassifier(
            vocabulary_size=len(task.vocab),
            num_classes=len(task.class_names),
            bidirectional=self.bidirectional(cfg),
            attention=self.attention(cfg),
            embedding_dim=m.embedding_dim,
            units=m.units,
            rnn=m.rnn,
        )

    def task_metrics(self, model, task, split, predictions):  # `logit_summary`: the argmax
        return {"error_rate": float(np.mean(predictions != split.y))}

    def attended_rows(self, split):
        return None  # one pooling row per string

    def serving_output(self, model, cfg, tokens):
        return modeling.predict_logits(model, tokens)

    def card_fields(self, task, cfg):
        return {"classes": list(task.class_names)}

    def heatmap(self, task, i, source, logits, weights):
        guess = task.class_names[int(np.argmax(logits))]
        return weights[None, : len(source)], source, [guess], f"probe {i}: {guess}"


@tasks.register
class MajorityTask(TaskSection):
    """Strings of `a` and `b` of one odd length."""

    name: Literal["majority"]
    num_examples: int = Field(64, ge=16)
    length: int = Field(7, ge=1, le=31)

    def build(self) -> Task:
        rng = np.random.default_rng(self.seed)
        vocab = Vocab(["a", "b"])
        texts = ["".join(rng.choice(["a", "b"], self.length)) for _ in range(self.num_examples)]
        labels = np.array([int(t.count("b") > t.count("a")) for t in texts], "int32")
        data = Split(pad([vocab.encode(t) for t in texts], self.length), labels)
        splits = make_splits(data, self, rng)
        return Task(self.name, kinds.get("majority"), vocab, *splits, class_names=["a", "b"])
'''


def _digest(folder: Path) -> str:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return digest.hexdigest()


def _package(folder: Path, monkeypatch, name: str, module: str) -> Path:
    """The package `name` with the one module `majority.py` (source `module`), importable and
    named to the runner; the registries are restored after the test."""
    package = folder / "plugins" / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "majority.py").write_text(module, encoding="utf-8")
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.setenv(tasks.PACKAGES_VARIABLE, name)
    monkeypatch.setattr(tasks.REGISTRY, "_members", dict(tasks.REGISTRY._members))
    monkeypatch.setattr(kinds.REGISTRY, "_members", dict(kinds.REGISTRY._members))
    return package


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """`my_tasks.majority`: the task and its kind in one module of a package of its own."""
    yield _package(tmp_path, monkeypatch, "my_tasks", MAJORITY)
    for name in [m for m in sys.modules if m.split(".")[0] == "my_tasks"]:
        del sys.modules[name]


def test_the_contributing_recipe_is_such_a_module_and_its_own_test_passes(tmp_path, monkeypatch):
    """CONTRIBUTING.md's task module, as `my_tasks/majority.py` of a package named by
    ATTN_RNN_TASK_PACKAGES, and its own test, run as written there."""
    _package(tmp_path, monkeypatch, "my_tasks", contributing_block("# my_tasks/majority.py"))
    try:
        ran = run_recipe_tests("# tests/test_majority.py", monkeypatch=monkeypatch)
        cfg = config_lib.validate({"task": {"name": "majority", "num_examples": 40, "length": 5}})
        task = tasks.build_task(cfg.task)
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "my_tasks"]:
            del sys.modules[name]
    assert ran == ["test_majority_labels_each_string_by_its_commoner_letter"]
    assert type(cfg.task).__module__ == "my_tasks.majority"
    assert task.name == "majority" and task.kind.name == "classification"


def test_a_task_of_its_own_package_trains_tracks_and_logs_from_its_yaml(
    plugin, tmp_path, monkeypatch
):
    before = _digest(ROOT / "experiments")
    uri = migrated_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    task = {"name": "majority", "num_examples": 64, "num_probes": 1}
    config = write_config(tmp_path, task, name="majority.yaml", tracking={"experiment": "m"})

    assert main(["run", str(config)]) == 0

    (run,) = runs(uri, "m")
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
    # the task came from the plugin's module, and nothing under experiments/ changed
    assert Path(sys.modules["my_tasks.majority"].__file__).parent == plugin
    assert _digest(ROOT / "experiments") == before


def test_the_config_knows_it_and_checks_its_section(plugin):
    cfg = config_lib.validate({"task": {"name": "majority", "length": 5}})
    assert type(cfg.task).__module__ == "my_tasks.majority" and cfg.task.length == 5
    assert config_lib.to_dict(cfg)["task"]["length"] == 5  # the section's own keys are logged
    assert tasks.names()[-1] == "majority" and "majority" in kinds.names()  # after the runner's
    with pytest.raises(config_lib.ConfigError, match=r"task\.length: got 0"):
        config_lib.validate({"task": {"name": "majority", "length": 0}})
    with pytest.raises(config_lib.ConfigError, match=r"task\.digits: .*no such key"):
        config_lib.validate({"task": {"name": "majority", "digits": 3}})


def test_without_its_package_the_task_is_unknown_and_the_names_are_listed(monkeypatch):
    monkeypatch.delenv(tasks.PACKAGES_VARIABLE, raising=False)
    with pytest.raises(
        config_lib.ConfigError, match=r"task\.name: got 'majority'; expected one of .*'needle'"
    ):
        config_lib.validate({"task": {"name": "majority"}})


def test_a_package_that_does_not_import_is_refused_naming_the_variable(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(tasks.PACKAGES_VARIABLE, "no_such_tasks")
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path, {"name": "needle"})
    assert main(["run", str(config)]) == 2
    err = capsys.readouterr().err
    assert "ATTN_RNN_TASK_PACKAGES: 'no_such_tasks' is not an importable package" in err, err
    assert not (tmp_path / "mlruns").exists()


def test_a_name_is_registered_once(plugin):
    module = __import__("my_tasks.majority", fromlist=["MajorityTask"])
    assert tasks.register(module.MajorityTask) is module.MajorityTask  # the same again
    assert kinds.register(module.Majority) is module.Majority
    with pytest.raises(ValueError, match="kind 'majority' is registered already"):
        kinds.register(type("Majority", (module.Majority,), {}))

    class Needle(module.MajorityTask):
        name: Literal["needle"]

    with pytest.raises(ValueError, match="task 'needle' is registered already"):
        tasks.register(Needle)
    with pytest.raises(ValueError, match="must be a subclass of TaskKind"):
        kinds.register(module.Majority())
    with pytest.raises(ValueError, match=r'`name` is Literal\["<task>"\]'):
        tasks.register(config_lib.TrainConfig)
