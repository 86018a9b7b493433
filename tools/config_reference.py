"""The configuration reference, a Markdown page generated from the schema.

    python -m tools.config_reference > configuration.md      # from the project root

Every key of every section of `experiments.config` (and of each registered task's section,
`experiments.tasks.REGISTRY`) with its type, default and description (its pydantic `Field`'s),
and the options the library's registries give `model.attention` (each mechanism's) and
`generate.sampler` (each sampler's). `mkdocs build` writes it as
`reference/configuration.md` (`tools/mkdocs_hooks.py`), so the page is always the code's.
"""

from __future__ import annotations

import inspect
import re
import types
import typing

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from experiments import config, kinds, tasks
from experiments.data.sections import Section, TaskSection
from experiments.tuning.settings import TuneSection
from keras_attn_rnn import mechanisms, samplers

# Keys the task kind passes to every mechanism itself (`model.attention.score`, ...).
_SHARED_ATTENTION_ARGUMENTS = ("score", "units", "normalizer")
_BOUNDS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}


def render() -> str:
    """The whole page."""
    cfg = config.ExperimentConfig
    lines = [
        "# Configuration reference",
        "",
        "*Generated from the schema when the site is built (`tools/config_reference.py`): "
        "`experiments/config.py`, the task modules of `experiments/tasks/` and the "
        "library's registries.*",
        "",
        _doc(cfg) + " A `tune` section, read by `python -m experiments tune` only, may "
        "follow (the last table). A key a section does not list is refused (`model.attention` "
        "also takes its mechanism's options), and a bad value exits with code 2 before "
        "anything is created, naming the key, the value and what was expected. "
        "`--set a.b=value` sets one key (its value read as YAML).",
        "",
        *_task_section(),
        *_section("model", config.ModelConfig),
        *_section("model.attention", config.AttentionConfig, level=3),
        *_mechanism_options(),
        *_section("train", config.TrainConfig),
        *_section("train.early_stopping", config.EarlyStoppingConfig, level=3),
        *_section("tracking", config.TrackingConfig),
        *_section("generate", config.GenerateConfig),
        *_sampler_arguments(),
        *_section("tune", TuneSection),
    ]
    return "\n".join(lines).rstrip() + "\n"


def _task_section() -> list[str]:
    lines = [
        "## `task`",
        "",
        "The section of the task `task.name` names, defined in that task's module. "
        "Every task has these keys:",
        "",
        *_table(_fields(TaskSection)),
    ]
    for name in tasks.names():
        section = tasks.section(name)
        own = {
            key: field
            for key, field in section.model_fields.items()
            if key != "name"
            and (
                key not in TaskSection.model_fields
                or _default(field) != _default(TaskSection.model_fields[key])
            )
        }
        lines += [
            f"### `task.name: {name}`",
            "",
            f"{_doc(section)} (`{section.__module__}`)",
            "",
        ]
        lines += _table(own) if own else ["No keys of its own.", ""]
    return lines


def _section(path: str, model: type[BaseModel], level: int = 2) -> list[str]:
    return ["#" * level + f" `{path}`", "", _doc(model), "", *_table(_fields(model))]


def _mechanism_options() -> list[str]:
    lines = [
        "Every other key of `model.attention` is an option of the chosen mechanism, its "
        "constructor's argument (checked by the constructor when the config is validated):",
        "",
        "| `mechanism` | class | options (default) |",
        "|---|---|---|",
    ]
    for name in mechanisms.names():
        options = [
            key
            for key in mechanisms.REGISTRY.arguments(name)
            if key not in _SHARED_ATTENTION_ARGUMENTS
        ]
        cls = mechanisms.class_for(name)
        lines.append(
            f"| `{name}` | `{cls.__name__}` | "
            f"{_arguments(options, mechanisms.REGISTRY.defaults(name))} |"
        )
    lines.append("")
    for name in kinds.names():
        options = kinds.REGISTRY.class_for(name).attention_options
        if options:
            lines += [
                f"For a task of kind `{name}`, `model.attention` also takes "
                + ", ".join(f"`{option}`" for option in options)
                + " (an option of its model's attention layer).",
                "",
            ]
    return lines


def _sampler_arguments() -> list[str]:
    lines = [
        "`generate.sampler` names one sampler and takes its constructor's arguments:",
        "",
        "| `name` | class | arguments (default) |",
        "|---|---|---|",
    ]
    for name in samplers.names():
        cls = samplers.class_for(name)
        lines.append(
            f"| `{name}` | `{cls.__name__}` | "
            f"{_arguments(samplers.arguments(name), samplers.REGISTRY.defaults(name))} |"
        )
    return [*lines, ""]


def _arguments(names, defaults: dict) -> str:
    shown = [f"`{n}` ({_value(defaults[n])})" if n in defaults else f"`{n}`" for n in names]
    return ", ".join(shown) or "none"


def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    return dict(model.model_fields)


def _table(fields: dict[str, FieldInfo]) -> list[str]:
    rows = ["| key | type | default | description |", "|---|---|---|---|"]
    for key, field in fields.items():
        cells = [f"`{key}`", _type(field), _default(field), field.description or ""]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return [*rows, ""]


def _doc(model: type) -> str:
    """The first paragraph of a class's docstring, on one line, without the section's name
    it may start with (`` `train`: how ...``)."""
    text = " ".join(inspect.cleandoc(model.__doc__ or "").split("\n\n")[0].split())
    text = re.sub(r"^`[\w.]+`: ", "", text)
    return text[:1].upper() + text[1:]


def _type(field: FieldInfo) -> str:
    text = _annotation(field.annotation)
    bounds = [
        f"{_BOUNDS[attr]} {getattr(m, attr)}"
        for m in field.metadata
        for attr in _BOUNDS
        if getattr(m, attr, None) is not None
    ]
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _annotation(annotation) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{_value(a)}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [_annotation(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in args else "")
    if origin is list:
        return f"list of {_annotation(args[0])}"
    if origin is dict:
        return f"mapping of {_annotation(args[0])} to {_annotation(args[1])}"
    if annotation is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return "section"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory else field.default
    if isinstance(value, Section):
        return "(its keys' defaults)"
    return f"`{_value(value)}`"


def _value(value) -> str:
    """A value as YAML writes it on one line (`null`, `true`, `[13, 17]`, `{name: greedy}`)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix(" ...").strip()


if __name__ == "__main__":
    print(render(), end="")
