"""A new mechanism is one class plus its registration: it runs from the runner's config
(`--set model.attention.mechanism=... model.attention.<option>=...`) and from
`AttentionDecoder(attention=...)`, with no edit under `experiments/`. The mechanism and its
own test are CONTRIBUTING.md's recipe, run as written there."""

from __future__ import annotations

import pytest
from doc_blocks import contributing_block, recipe_module, run_recipe_tests
from experiments_helpers import TINY_TASKS, migrated_store, runs, write_config
from helpers import pytest_with_plugin

from experiments import config as config_lib
from experiments.commands import main
from experiments.training import run as training_run
from keras_attn_rnn import mechanisms

RECIPE = "# sharp_attention.py"


@pytest.fixture(autouse=True)
def recipe(monkeypatch):
    """CONTRIBUTING.md's module `sharp_attention`, imported (so "sharp" is registered) with
    the mechanism registry restored after the test."""
    return recipe_module(RECIPE, monkeypatch, mechanisms.REGISTRY)


def test_the_recipe_registers_it_and_its_own_test_passes(recipe, monkeypatch):
    assert mechanisms.class_for("sharp") is recipe.SharpAttention
    ran = run_recipe_tests("# tests/test_sharp_attention.py", monkeypatch=monkeypatch)
    assert ran == [
        "test_a_sharpness_that_is_not_positive_is_refused",
        "test_sharp_attention_decodes_and_round_trips",
    ]


def test_its_options_are_checked_by_its_constructor(tmp_path):
    base = {"task": TINY_TASKS["reverse"]}
    good = config_lib.validate(
        {**base, "model": {"attention": {"mechanism": "sharp", "sharpness": 3.0}}}
    )
    assert good.model.attention.model_extra == {"sharpness": 3.0}
    # The run's one check stage (the task's kind) checks them, before anything is made.
    for attention, message in [
        ({"mechanism": "sharp", "sharpness": -1}, "model.attention.sharpness: got -1; .*sharp"),
        ({"mechanism": "sharp", "filters": 3}, "model.attention.filters: .*not an option of "),
        ({"mechanism": "content", "sharpness": 3.0}, "model.attention.sharpness: .*not an opt"),
    ]:
        with pytest.raises(config_lib.ConfigError, match=message):
            training_run.validate({**base, "model": {"attention": attention}})


def test_a_run_trains_it_from_the_command_line(tmp_path):
    uri = migrated_store(tmp_path)
    config = write_config(
        tmp_path, TINY_TASKS["reverse"], tracking={"experiment": "sharp", "log_model": False}
    )
    overrides = ["model.attention.mechanism=sharp", "model.attention.sharpness=4.0"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        argv = ["run", str(config)] + [arg for o in overrides for arg in ("--set", o)]
        assert main(argv) == 0
    (run,) = runs(uri, "sharp")
    assert run.data.params["model.attention.mechanism"] == "sharp"
    assert run.data.params["model.attention.sharpness"] == "4.0"
    assert "test_exact_match_greedy" in run.data.metrics


@pytest.mark.slow  # a fresh pytest process (imports TensorFlow again)
def test_the_mechanism_suites_take_it_from_the_registry(tmp_path):
    """Registered (by the recipe's module, loaded as a plugin before the tests), it passes the
    contract suite every registered mechanism does, and no list of names in the suites
    refuses it."""
    result = pytest_with_plugin(
        tmp_path,
        contributing_block(RECIPE),  # the recipe's module: the class and its registration
        "tests/test_mechanisms_regimes.py",
        "tests/test_registry_contract.py",
        "-k",
        "registry_names or sharp",
        "-v",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "mechanism-sharp" in result.stdout and "registry_names" in result.stdout
