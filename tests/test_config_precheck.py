"""A config error is refused before the frameworks are imported (`config_precheck`), with a
"did you mean" for a mistyped key, task, config name or command, in the words of the rest
of the config errors (none of pydantic's)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from experiments import config as config_lib
from experiments import config_precheck, tasks
from experiments.commands import main
from experiments.errors import ConfigError
from experiments.ready_configs import directory as configs_dir
from experiments.tuning.settings import TuneSection
from tools import config_schema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRAMEWORKS = ("keras", "tensorflow", "jax", "torch", "mlflow", "keras_attn_rnn", "optuna")


def test_the_committed_table_is_the_schema_s():
    committed = json.loads(config_precheck.SCHEMA_FILE.read_text())
    assert committed == json.loads(json.dumps(config_schema.build_table())), (
        "experiments/config_schema.json is stale: run `python -m tools.config_schema`"
    )
    assert config_precheck.load_table() is not None


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (
            ["run", "demo", "--set", "train.epoch=2"],
            "train.epoch: got 2; expected no such key (unknown keys are not allowed); "
            "did you mean 'epochs'?",
        ),
        (["run", "demoo"], "did you mean 'demo'?"),
        (["run", "demo", "--set", "train.epochs=x"], "train.epochs: got 'x'; expected an integer"),
        (["run", "demo", "--set", "task.name=revrse"], "did you mean 'reverse'?"),
        (["run", "demo", "--set", "task.num_exampels=40"], "did you mean 'num_examples'?"),
        (["sweep", "demo", "--grid", "model.unit=8,16"], "did you mean 'units'?"),
        (["tune", "demo", "--set", "tune.trails=2"], "did you mean 'trials'?"),
        (["rnu", "demo"], "did you mean 'run'?"),
    ],
)
def test_an_error_is_refused_before_any_framework_is_imported(argv, wanted):
    code = (
        "import sys\n"
        "from experiments.commands import main\n"
        f"try:\n    code = main({argv!r})\nexcept SystemExit as exit:\n    code = exit.code\n"
        f"print('EXIT', code, sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        cwd=ROOT,
        timeout=60,
    )
    assert "EXIT 2 []" in done.stdout, (done.stdout, done.stderr)
    assert wanted in done.stderr
    assert "Input should" not in done.stderr


def test_every_ready_config_passes():
    for path in sorted(configs_dir().glob("*.yaml")):
        config_precheck.check_file(path, sections=["tune"])


# Values of every kind, for every leaf key: whatever the check refuses, the schema refuses.
VALUES = [None, True, False, 0, 1, -1, 2, 3, 0.5, 1.0, 1e9, float("nan"), "", "x", "3", "3.0"]
VALUES += ["true", "no", "1e-3", "auto", "cosine", "float16", [], [1], ["a"], {}, {"a": 1}]


def _leaves(spec, prefix=()):
    for key, field in spec["keys"].items():
        if "section" in field:
            yield from _leaves(field["section"], (*prefix, key))
        elif "schema" in field:
            yield (*prefix, key)


def _nested(path, value):
    data = value
    for key in reversed(path):
        data = {key: data}
    return data


@pytest.mark.parametrize("task", ["reverse", "textcls", "lm"])
def test_what_the_check_refuses_the_schema_refuses(task):
    table = config_precheck.load_table()
    base = {"task": {"name": task}}
    if task != "reverse":  # a task of a user's file
        base["task"]["path"] = os.path.join(ROOT, "README.md")
    refused = 0
    leaves = [p for p in _leaves(table["config"]) if p[0] != "task"]
    leaves += [("task", *p) for p in _leaves(table["tasks"][task])]
    for path, value in itertools.product(leaves, VALUES):
        data = {**base, **_nested(path, value)}
        if path[0] == "task":
            data["task"] = {**base["task"], path[1]: value}
        try:
            config_precheck.check(data)
        except ConfigError as err:
            refused += 1
            assert ".".join(path) in str(err)
            with pytest.raises((ConfigError, ValidationError, ValueError, TypeError)):
                config_lib.validate(data)
    assert refused > 100  # the check judges most values of most keys


def test_what_the_tune_section_check_refuses_the_schema_refuses():
    table = config_precheck.load_table()
    for key, value in itertools.product(table["sections"]["tune"]["keys"], VALUES):
        try:
            config_precheck.check({"task": {"name": "reverse"}, "tune": {key: value}}, ["tune"])
        except ConfigError:
            with pytest.raises(ValidationError):
                TuneSection.model_validate({key: value})


def test_a_task_of_a_task_package_is_left_to_the_full_validation(monkeypatch):
    with pytest.raises(ConfigError, match="did you mean 'reverse'"):
        config_precheck.check({"task": {"name": "reverses"}})
    monkeypatch.setenv(tasks.PACKAGES_VARIABLE, "my_tasks")
    config_precheck.check({"task": {"name": "reverses", "anything": 1}})


def test_a_stale_table_is_not_used(monkeypatch):
    bad = {"task": {"name": "reverse"}, "train": {"epoch": 2}}
    with pytest.raises(ConfigError):
        config_precheck.check(bad)
    monkeypatch.setattr(config_precheck, "fingerprint", lambda: "another")
    config_precheck.check(bad)  # left to the full validation
    with pytest.raises(ConfigError, match="train.epoch"):
        config_lib.validate(bad)


def test_the_full_validation_words_errors_as_the_check_does():
    with pytest.raises(ConfigError) as info:
        config_lib.validate(
            {"task": {"name": "reverse"}, "train": {"epochs": "x", "lr_schedule": "cos"}}
        )
    message = str(info.value)
    assert "train.epochs: got 'x'; expected an integer" in message
    assert "train.lr_schedule: got 'cos'; expected one of 'constant', 'cosine'" in message
    assert "Input should" not in message


def test_a_mistyped_config_name_in_process(capsys):
    assert main(["run", "reverze"]) == 2
    assert "did you mean 'reverse'?" in capsys.readouterr().err
