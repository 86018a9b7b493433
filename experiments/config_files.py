"""Reading a config: the YAML file, the `--set` overrides, applied to the mapping.

Light on purpose (YAML and the standard library, no Keras, no pydantic): the commands
read a config and check it (`config_precheck`) before they import the frameworks;
`experiments.config` re-exports these functions and validates the result.
"""

from __future__ import annotations

import os
from typing import Any

from experiments import bounded_input
from experiments.errors import ConfigError, shown

MAX_CONFIG_BYTES = 1 << 20  # a config file is refused past 1 MiB, before it is parsed


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split `a.b=value` into (["a", "b"], the YAML value of "value": `bounded_input.load_yaml`)."""
    key, sep, raw = text.partition("=")
    parts = key.strip().split(".")
    if not sep or not all(p.strip() for p in parts):
        raise ConfigError(
            f"--set {shown(text)}: expected the form key.path=value (for example train.epochs=3)"
        )
    value = bounded_input.load_yaml(raw, f"--set {key.strip()}") if raw.strip() else None
    return [p.strip() for p in parts], value


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Return a copy of `data` with every `key.path=value` override applied."""
    data = _deep_copy(data)
    for text in overrides:
        parts, value = parse_override(text)
        node = data
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if isinstance(child, str) and parts[: depth + 1] == ["generate", "sampler"]:
                child = node[part] = {"name": child}  # `sampler: beam` is `{name: beam}`
            if not isinstance(child, dict):
                path = ".".join(parts[: depth + 1])
                raise ConfigError(f"--set {shown(text)}: {path} is {shown(child)}, not a section")
            node = child
        node[parts[-1]] = value
    return data


def _deep_copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deep_copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deep_copy(v) for v in data]
    return data


def read_yaml(path: str | os.PathLike) -> dict:
    """Safe-load a YAML mapping, raising ConfigError with the file name on failure: a file
    that is not a regular one, past `MAX_CONFIG_BYTES`, not UTF-8, not YAML, or whose
    aliases expand past `bounded_input.MAX_YAML_VALUES` values."""
    text = bounded_input.read_text(path, MAX_CONFIG_BYTES, "config file")
    data = bounded_input.load_yaml(text, str(path))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data
