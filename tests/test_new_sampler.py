"""A new sampler is one class plus its registration: its arguments reach the runner's
`generate.sampler` and the text model's params, with no edit under `experiments/`. The
sampler and its own test are CONTRIBUTING.md's recipe, run as written there."""

from __future__ import annotations

import pytest
from doc_blocks import contributing_block, recipe_module, run_recipe_tests
from helpers import pytest_with_plugin

from experiments import config as config_lib
from experiments.kinds.base import generate_defaults
from experiments.tracking.model_logging import text_signature
from keras_attn_rnn import samplers

RECIPE = "# margin_sampler.py"


@pytest.fixture(autouse=True)
def recipe(monkeypatch):
    """CONTRIBUTING.md's module `margin_sampler`, imported (so "margin" is registered) with
    the sampler registry restored after the test."""
    return recipe_module(RECIPE, monkeypatch, samplers.REGISTRY)


def test_the_recipe_registers_it_and_its_own_test_passes(recipe, monkeypatch):
    assert samplers.class_for("margin") is recipe.MarginSampler
    ran = run_recipe_tests("# tests/test_margin_sampler.py", monkeypatch=monkeypatch)
    assert ran == [
        "test_it_draws_only_the_tokens_within_its_margin",
        "test_it_is_built_by_name_and_checks_its_margin",
    ]


def _config(sampler):
    return config_lib.validate(
        {"task": {"name": "lm"}, "generate": {"sampler": sampler, "max_length": 5}}
    )


def test_the_config_takes_it_by_name_with_its_own_arguments(recipe):
    cfg = _config({"name": "margin", "margin": 0.5})
    sampler = cfg.generate.built_sampler
    assert isinstance(sampler, recipe.MarginSampler) and sampler.margin == 0.5
    with pytest.raises(config_lib.ConfigError, match="margin must be >= 0"):
        _config({"name": "margin", "margin": -1})
    with pytest.raises(config_lib.ConfigError, match="beam_width is not an argument"):
        _config({"name": "margin", "beam_width": 3})


def test_its_argument_is_a_text_model_param_with_the_run_value():
    card = {
        "kind": "lm",
        "generate": generate_defaults(_config({"name": "margin", "margin": 0.5})),
        "examples": {"text": ["ab"]},
    }
    assert card["generate"]["margin"] == 0.5
    params = {p.name: p.default for p in text_signature(card).params.params}
    assert params["margin"] == 0.5 and params["sampler"] == "greedy"
    assert params["k"] == 5 and params["num_beams"] == 4  # the other samplers' defaults


@pytest.mark.slow  # a fresh pytest process (imports TensorFlow again)
def test_the_sampler_suites_take_it_from_the_registry(tmp_path):
    """Registered (by the recipe's module, loaded as a plugin before the tests), it is in
    every suite that lists the samplers, and no list of names in them refuses it: they read
    the registry."""
    result = pytest_with_plugin(
        tmp_path,
        contributing_block(RECIPE),  # the recipe's module: the class and its registration
        "tests/test_samplers.py",
        "tests/test_generation.py",
        "tests/test_registry_contract.py",
        "-k",
        "names or errors_name or margin",
        "-v",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "sampler-margin" in result.stdout and "test_names_come_from" in result.stdout
