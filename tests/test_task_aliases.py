"""The language-model task is `lm` (issue 49, 1): it trains on words and subword units too,
not only characters. Its old name `charlm` is still accepted, in a config file, through
`--set task.name=charlm`, by the early check and when resuming a run whose logged config
says `charlm`, with a deprecation notice once a process."""

from __future__ import annotations

import mlflow
import pytest
import yaml
from experiments_helpers import (
    TINY_TASKS,
    run_interrupted_after_checkpoint,
    runs,
    use_store,
    write_config,
)

from experiments import config_precheck, ready_configs, task_aliases
from experiments.commands import main
from experiments.config import load_config, validate
from experiments.errors import ConfigError
from experiments.tasks import lm
from experiments.tracking.tracker import CONFIG_ARTIFACT


@pytest.fixture(autouse=True)
def _notices_anew(monkeypatch):
    monkeypatch.setattr(task_aliases, "_said", set())


def test_the_old_name_is_read_as_lm_with_one_notice(tmp_path, capsys):
    path = write_config(tmp_path, {**TINY_TASKS["lm"], "name": "charlm"})
    for _ in range(2):
        cfg = load_config(path)
        assert cfg.task.name == "lm" and isinstance(cfg.task, lm.LMTask)
        assert cfg.task.seq_length == TINY_TASKS["lm"]["seq_length"]  # its keys kept
    err = capsys.readouterr().err
    assert err.count("task.name 'charlm' is deprecated; the task is now 'lm'") == 1


def test_set_task_name_charlm_and_the_new_name_says_nothing(tmp_path, capsys):
    path = write_config(tmp_path, TINY_TASKS["lm"])
    cfg = load_config(path, ["task.name=charlm"])
    assert cfg.task.name == "lm"
    assert "deprecated" in capsys.readouterr().err
    validate({"task": {"name": "lm"}})
    assert "deprecated" not in capsys.readouterr().err


def test_the_early_check_takes_the_old_name_and_checks_the_lm_keys():
    config_precheck.check({"task": {"name": "charlm", "seq_length": 8}})
    with pytest.raises(ConfigError, match="task.seq_lenght: got 8; expected no such key"):
        config_precheck.check({"task": {"name": "charlm", "seq_lenght": 8}})


def test_the_ready_config_is_lm_and_its_old_name_finds_it():
    assert ready_configs.resolve("lm").name == "lm.yaml"
    assert ready_configs.resolve("charlm") == ready_configs.resolve("lm")
    text = ready_configs.resolve("lm").read_text(encoding="utf-8")
    assert yaml.safe_load(text)["task"]["name"] == "lm"


@pytest.mark.slow
def test_a_run_logged_as_charlm_resumes(tmp_path, monkeypatch, capsys):
    uri = use_store(tmp_path, monkeypatch)
    config = write_config(tmp_path, TINY_TASKS["lm"], train={"epochs": 2})
    run_interrupted_after_checkpoint(monkeypatch, config)
    (run,) = runs(uri)
    client = mlflow.MlflowClient(uri)
    # as a run of an earlier version logged it: its config names the task `charlm`
    logged = yaml.safe_load(
        mlflow.artifacts.load_text(f"{run.info.artifact_uri}/{CONFIG_ARTIFACT}")
    )
    assert logged["task"]["name"] == "lm"
    logged["task"]["name"] = "charlm"
    client.log_text(run.info.run_id, yaml.safe_dump(logged), CONFIG_ARTIFACT)
    assert main(["resume", run.info.run_id]) == 0
    assert "task.name 'charlm' is deprecated" in capsys.readouterr().err
    assert client.get_run(run.info.run_id).info.status == "FINISHED"
