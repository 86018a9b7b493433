"""Write `experiments/config_schema.json`, the table of keys, types, choices and bounds that
the commands check a config against before they import the frameworks
(`experiments/config_precheck.py`).

    python -m tools.config_schema        # from the project root, after a schema change

`tests/test_config_precheck.py` fails while the committed table is stale.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from experiments import config, config_precheck, tasks
from experiments.tuning.settings import TuneSection


def build_table() -> dict:
    """The table of the schema as it is now: `config` (the five sections), `tasks` (each
    registered task's section) and `sections` (those one command reads: `tune`)."""
    task_names = tasks.REGISTRY.names()  # this package's only, not ATTN_RNN_TASK_PACKAGES'
    root = _section_spec(config.ExperimentConfig)
    root["keys"]["task"] = {"any": True}  # replaced by the task's own section when checked
    return {
        "fingerprint": config_precheck.fingerprint(),
        "config": root,
        "tasks": {name: _section_spec(tasks.REGISTRY.class_for(name)) for name in task_names},
        "sections": {"tune": _section_spec(TuneSection)},
    }


def _section_spec(model) -> dict:
    schema = model.model_json_schema()
    decorators = model.__pydantic_decorators__
    before = {  # fields a validator reads before their type is checked: not judged here
        name
        for d in decorators.field_validators.values()
        if d.info.mode in ("before", "wrap", "plain")
        for name in d.info.fields
    }
    spec = {
        "keys": {},
        "extra": schema.get("additionalProperties", True) is not False
        or any(d.info.mode in ("before", "wrap") for d in decorators.model_validators.values()),
    }
    if schema.get("required"):
        spec["required"] = list(schema["required"])
    for name, info in model.model_fields.items():
        sub = _sub_model(info.annotation, BaseModel)
        if name in before:
            spec["keys"][name] = {"any": True}
        elif sub is not None:
            nullable = type(None) in getattr(info.annotation, "__args__", ())
            spec["keys"][name] = {"section": _section_spec(sub), "nullable": nullable}
        else:
            field = _resolve(schema["properties"][name], schema.get("$defs", {}))
            spec["keys"][name] = {"schema": _lean(field)}
    return spec


def _sub_model(annotation, base):
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, base):
            return candidate
    return None


def _resolve(schema: dict, defs: dict) -> dict:
    if "$ref" in schema:
        return _resolve(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in schema:
        return {**schema, "anyOf": [_resolve(s, defs) for s in schema["anyOf"]]}
    return schema


_KEPT = ("type", "enum", "const", "anyOf", "minimum", "maximum", "exclusiveMinimum")
_KEPT += ("exclusiveMaximum", "minLength")


def _lean(schema: dict) -> dict:
    lean = {k: v for k, v in schema.items() if k in _KEPT}
    if "anyOf" in lean:
        lean["anyOf"] = [_lean(branch) for branch in lean["anyOf"]]
    if not lean:
        return {"type": "unknown"}
    return lean


def write_table() -> Path:
    """Write `config_schema.json` from the schema as it is now."""
    config_precheck.SCHEMA_FILE.write_text(
        json.dumps(build_table(), indent=1, sort_keys=True) + "\n"
    )
    return config_precheck.SCHEMA_FILE


if __name__ == "__main__":
    print(f"wrote {write_table()}")
