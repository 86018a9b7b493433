"""A `textcls` file whose label column holds one class is refused (exit 2, before any run):
a classifier of one class scores test accuracy 1.000 whatever it learns (issue 50)."""

from __future__ import annotations

import pytest
from experiments_helpers import TINY_TASKS, runs, use_store, write_config, write_text_dataset

from experiments import config as config_lib
from experiments import tasks
from experiments.commands import main
from experiments.errors import ConfigError


def _one_class_file(folder):
    path = folder / "one.csv"
    rows = [f"it was fine really {i},good" for i in range(40)]
    path.write_text("text,label\n" + "\n".join(rows) + "\n")
    return path


def test_one_class_is_refused_naming_the_column_and_the_class(tmp_path):
    cfg = config_lib.validate(
        {"task": {**TINY_TASKS["textcls"], "path": str(_one_class_file(tmp_path))}}
    )
    with pytest.raises(ConfigError) as info:
        tasks.build_task(cfg.task)
    message = str(info.value)
    assert message.startswith("task.label_field: the 'label' values of ")
    assert "expected at least 2 classes" in message
    assert message.endswith("Received: 1 class(es) ['good'] in 40 rows")


def test_one_class_exits_2_before_any_run(tmp_path, monkeypatch, capsys):
    store = use_store(tmp_path, monkeypatch)
    task = {**TINY_TASKS["textcls"], "path": str(_one_class_file(tmp_path))}
    assert main(["run", str(write_config(tmp_path, task))]) == 2
    assert "expected at least 2 classes" in capsys.readouterr().err
    assert runs(store) == []


def test_two_classes_are_taken(tmp_path):
    path = write_text_dataset(tmp_path)
    cfg = config_lib.validate({"task": {**TINY_TASKS["textcls"], "path": str(path)}})
    assert tasks.build_task(cfg.task).class_names == ["bad", "good"]
