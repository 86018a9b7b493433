"""The configuration reference (the site's page, `tools/config_reference.py`) is generated
from the schema: every key of every section and of every registered task's section, with
its type, default and description, and the options the library's registries give
`model.attention` and `generate.sampler`."""

from __future__ import annotations

import re
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from experiments import config, tasks
from experiments.data.sections import TaskSection
from experiments.tuning.settings import TuneSection
from keras_attn_rnn import mechanisms, samplers
from tools import config_reference

SECTIONS = {
    "model": config.ModelConfig,
    "model.attention": config.AttentionConfig,
    "train": config.TrainConfig,
    "train.early_stopping": config.EarlyStoppingConfig,
    "tracking": config.TrackingConfig,
    "generate": config.GenerateConfig,
    "task": TaskSection,
    "tune": TuneSection,
}


def _rows(page: str, heading: str) -> dict[str, list[str]]:
    """The key table under `heading`: {key: [type, default, description]}."""
    section = page.split(f" `{heading}`\n", 1)[1]
    table = section[section.index("| key |") :].split("\n\n", 1)[0].splitlines()[2:]
    rows = {}
    for row in table:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def _sections() -> dict[str, type[BaseModel]]:
    return {**SECTIONS, **{f"task.name: {name}": tasks.section(name) for name in tasks.names()}}


@pytest.mark.parametrize("heading", list(SECTIONS) + [f"task.name: {n}" for n in tasks.names()])
def test_every_key_is_in_its_table_with_its_default_and_description(heading):
    page = config_reference.render()
    model = _sections()[heading]
    rows = _rows(page, heading)
    fields = model.model_fields
    if heading.startswith("task.name: "):  # a task's own keys: those the base lacks
        fields = {k: f for k, f in fields.items() if k not in TaskSection.model_fields}
    assert set(rows) == set(fields), heading
    for key, field in fields.items():
        type_, default, description = rows[key]
        assert description == (field.description or "").replace("|", "\\|")
        if field.is_required():
            assert default == "required"
        elif not field.default_factory and not isinstance(field.default, BaseModel):
            assert default == f"`{config_reference._value(field.default)}`", key


def test_every_key_of_the_runner_says_what_it_is():
    """A key without a description would be a blank cell of the page."""
    blank = [
        f"{heading}.{key}"
        for heading, model in _sections().items()
        for key, field in model.model_fields.items()
        if key != "name" and not field.description
    ]
    assert blank == []


def test_types_and_bounds_are_written_out():
    rows = _rows(config_reference.render(), "train")
    assert rows["epochs"][:2] == ["int (≥ 1)", "`10`"]
    assert rows["lr_schedule"][0] == "one of `constant`, `cosine`"
    assert rows["clipnorm"][0] == "float or null (> 0.0)"
    assert rows["early_stopping"][0] == "section or null"


def test_the_registries_options_are_listed():
    page = config_reference.render()
    for name in mechanisms.names():
        cls = mechanisms.class_for(name).__name__
        (row,) = [r for r in page.splitlines() if r.startswith(f"| `{name}` | `{cls}` |")]
        for argument, default in mechanisms.REGISTRY.defaults(name).items():
            if argument not in ("score", "units", "normalizer"):
                assert f"`{argument}` ({config_reference._value(default)})" in row
    for name in samplers.names():
        cls = samplers.class_for(name).__name__
        (row,) = [r for r in page.splitlines() if r.startswith(f"| `{name}` | `{cls}` |")]
        assert all(f"`{argument}`" in row for argument in samplers.arguments(name))


def test_a_task_registered_later_is_on_the_page(monkeypatch):
    """The page is the code's: a task module of a plugin package brings its section."""
    monkeypatch.setattr(tasks.REGISTRY, "_members", dict(tasks.REGISTRY._members))

    @tasks.register
    class OddTask(TaskSection):
        """Strings of odd length."""

        name: Literal["odd"]
        length: int = Field(7, ge=1, description="Letters in a string.")

    rows = _rows(config_reference.render(), "task.name: odd")
    assert rows == {"length": ["int (≥ 1)", "`7`", "Letters in a string."]}
