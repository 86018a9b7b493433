"""The config errors a user makes most (a mistyped key, task or config name, a value of the
wrong type or out of bounds), found before the frameworks are imported.

Importing Keras (TensorFlow) takes seconds, and much longer on a loaded machine; the full
validation (`experiments.config`) needs it, because the library's registries name the
scores, mechanisms and samplers. So a command first reads its config and `--set`
overrides with `config_files` and checks them here against `config_schema.json`, a table
of every section's keys, types, choices and bounds, written from the schema itself
(`python -m tools.config_schema`; `tests/test_config_precheck.py` fails while it is stale).
Only the standard library and YAML are imported: a refusal is printed in well under a
second, with a "did you mean" for a key, task or config name close to one that exists.

The check refuses only what the full validation refuses too: a value it cannot judge (a
registered name, an option of a mechanism, a check across keys, a task of a package
`ATTN_RNN_TASK_PACKAGES` names) is left to `experiments.config`, which validates every
config after this. When a source the table was written from has changed since (its
`fingerprint`), the table is not used at all.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from experiments import config_files, ready_configs, task_aliases
from experiments.errors import ConfigError, problem, shown

SCHEMA_FILE = Path(__file__).resolve().parent / "config_schema.json"
_ROOT = Path(__file__).resolve().parent

# The modules the table is written from: a change to one of them makes it stale.
_SOURCES = ("config.py", "data/sections.py", "tasks/*.py", "tuning/settings.py")

_BOOL_WORDS = {"0", "1", "true", "false", "t", "f", "yes", "no", "y", "n", "on", "off"}
_BOUNDS = (("ge", ">=", float.__ge__), ("gt", ">", float.__gt__))
_UPPER = (("le", "<=", float.__le__), ("lt", "<", float.__lt__))


def suggestion(name: object, choices) -> str:
    """`; did you mean 'x'?` for the choice closest to `name`, or "" when none is close."""
    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def fingerprint() -> str:
    """A digest of the sources the table is written from (`_SOURCES`)."""
    digest = hashlib.sha256()
    for pattern in _SOURCES:
        for path in sorted(_ROOT.glob(pattern)):
            digest.update(path.relative_to(_ROOT).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def load_table() -> dict | None:
    """The committed table, or None when it is missing or stale."""
    try:
        table = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return table if table.get("fingerprint") == fingerprint() else None


def config_path(name: str) -> Path:
    """The file a command's CONFIG names (`ready_configs.resolve`); a name that is neither a
    file nor a ready config is refused with the ready config it is closest to."""
    path = ready_configs.resolve(name)
    if path.exists():
        return path
    ready = sorted(p.stem for p in ready_configs.directory().glob("*.yaml"))
    raise ConfigError(
        f"config: got {shown(name)}; expected a YAML file or the name of a ready config "
        f"(`python -m experiments list`){suggestion(Path(name).stem, ready)}"
    )


def check_file(path: str | os.PathLike, overrides=(), sections=()) -> None:
    """Read the config at `path` with `overrides` and check it; `sections`: top-level
    sections besides the five that this command reads (`tune`)."""
    data = config_files.read_yaml(path)
    check(config_files.apply_overrides(data, list(overrides)), sections)


def check(data: dict, sections=()) -> None:
    """Raise `ConfigError` (every problem found, one line each, as `experiments.config`
    words them) when the table shows that `data` is no valid config."""
    table = load_table()
    if table is None:
        return
    root = {**table["config"], "keys": dict(table["config"]["keys"])}
    for name in sections:
        root["keys"][name] = {"section": table["sections"][name]}
    task = data.get("task")
    if isinstance(task, dict) and task_aliases.canonical(task.get("name"), False) != task.get(
        "name"
    ):
        task = {**task, "name": task_aliases.canonical(task.get("name"), False)}  # an old name
        data = {**data, "task": task}
    if isinstance(task, dict):
        root["keys"]["task"] = _task_spec(task.get("name"), table["tasks"])
    lines = _check_section(data, root, "")
    if lines:
        raise ConfigError("\n".join(["invalid config:", *lines]))


def _task_spec(name: object, known: dict) -> dict:
    if isinstance(name, str) and name in known:
        return {"section": known[name]}
    if os.environ.get("ATTN_RNN_TASK_PACKAGES", "").strip():
        return {"any": True}  # perhaps a task of those packages: the full validation knows
    return {"task_names": sorted(known)}


def _check_section(data: Any, spec: dict, prefix: str) -> list[str]:
    if not isinstance(data, dict):
        return [problem(prefix.rstrip(".") or "<root>", data, "a mapping of keys")]
    lines = []
    for key in spec.get("required", ()):
        if key not in data:
            lines.append(f"  {prefix}{key}: got (missing); expected this key is required")
    for key, value in data.items():
        path = f"{prefix}{key}"
        field = spec["keys"].get(key)
        if field is None:
            if not spec.get("extra"):
                lines.append(
                    problem(
                        path,
                        value,
                        "no such key (unknown keys are not allowed)"
                        + suggestion(key, spec["keys"]),
                    )
                )
            continue
        lines.extend(_check_field(value, field, path))
    return lines


def _check_field(value: Any, field: dict, path: str) -> list[str]:
    if field.get("any"):
        return []
    if "task_names" in field:
        name = value.get("name") if isinstance(value, dict) else None
        names = field["task_names"]
        expected = "one of " + ", ".join(map(repr, names)) + suggestion(name, names)
        return [problem(f"{path}.name", name, expected)]
    if "section" in field:
        if field.get("nullable") and value is None:
            return []
        return _check_section(value, field["section"], path + ".")
    expected = _refusal(value, field["schema"])
    return [] if expected is None else [problem(path, value, expected)]


def _refusal(value: Any, schema: dict) -> str | None:
    """What `schema` expects when it surely refuses `value` (as pydantic's lax mode would);
    None when `value` fits, or may."""
    if "anyOf" in schema:
        refusals = [_refusal(value, branch) for branch in schema["anyOf"]]
        return None if None in refusals else " or ".join(dict.fromkeys(refusals))
    if "enum" in schema or "const" in schema:
        choices = schema.get("enum", [schema.get("const")])
        if value in choices or str(value) in map(str, choices):
            return None
        return "one of " + ", ".join(map(repr, choices)) + suggestion(value, choices)
    kind = schema.get("type")
    number = None
    if kind == "null":
        return None if value is None else "null"
    if kind == "boolean":
        fits = isinstance(value, bool) or value in (0, 1) or str(value).lower() in _BOOL_WORDS
        return None if fits and not isinstance(value, (dict, list)) else "true or false"
    if kind == "string":
        if not isinstance(value, str):
            return "a string"
        if len(value) < schema.get("minLength", 0):
            return f"a string of at least {schema['minLength']} characters"
        return None
    if kind == "integer":
        number = _integer(value)
        if number is None:
            return "an integer"
    elif kind == "number":
        number = _number(value)
        if number is None:
            return "a number"
    elif kind == "array":
        return None if isinstance(value, list) else "a list"
    elif kind == "object":
        return None if isinstance(value, dict) else "a mapping"
    if number is not None:
        return _bounds(number, schema, "an integer" if kind == "integer" else "a number")
    return None


def _integer(value: Any) -> float | None:
    if isinstance(value, bool | int):
        return float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) and value == int(value) else None
    if isinstance(value, str):  # "3" and "3.0" as pydantic reads them; "3.5" is refused
        number = _number(value.replace("_", ""))
        return _integer(number) if number is not None else None
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _bounds(number: float, schema: dict, what: str) -> str | None:
    keys = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}
    wanted = []
    broken = False
    for name, sign, holds in (*_BOUNDS, *_UPPER):
        bound = schema.get(keys[name])
        if bound is None:
            continue
        wanted.append(f"{sign} {bound}")
        if math.isnan(number) or not holds(number, float(bound)):
            broken = True
    return f"{what} {' and '.join(wanted)}" if broken else None
