"""A search space: config keys and the distribution each is drawn from.

One dimension a key, written the same way in a config's `tune.space` mapping and on the
command line (`--space KEY=SPEC`):

- `float:LOW:HIGH` or `float:LOW:HIGH:log` (log-uniform; LOW > 0),
- `int:LOW:HIGH` or `int:LOW:HIGH:log` (both ends included),
- `categorical:A,B,C` (each value read as YAML: `0.1` a number, `true` a bool, `dot` a text).

Any key of the config can be searched (`train.learning_rate`, `model.attention.mechanism`,
`task.max_length`, ...). `check` tries each dimension's ends (each choice of a categorical
one) against the config's schema, so a key that does not exist or a value the schema refuses
is a `ConfigError` before any trial starts.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import yaml

from experiments import config as config_lib
from experiments.errors import ConfigError

KINDS = ("float", "int", "categorical")
SYNTAX = "float:LOW:HIGH[:log], int:LOW:HIGH[:log] or categorical:A,B,..."


@dataclass(frozen=True)
class Dimension:
    """One searched key: `kind` float, int or categorical; bounds or choices."""

    key: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    choices: tuple = ()

    def suggest(self, trial) -> Any:
        """Draw this key's value for an Optuna trial (the key is the parameter's name)."""
        if self.kind == "float":
            return trial.suggest_float(self.key, self.low, self.high, log=self.log)
        if self.kind == "int":
            return trial.suggest_int(self.key, self.low, self.high, log=self.log)
        return trial.suggest_categorical(self.key, list(self.choices))

    def corners(self) -> list:
        """The values `check` tries: both ends, or every choice."""
        return list(self.choices) if self.kind == "categorical" else [self.low, self.high]

    def grid_values(self) -> list:
        """Every value of the dimension, for the grid sampler (floats have no grid)."""
        if self.kind == "categorical":
            return list(self.choices)
        if self.kind == "int" and not self.log:
            return list(range(self.low, self.high + 1))
        raise ConfigError(
            f"--space {self.key}: the grid sampler needs categorical or (linear) int "
            f"dimensions; got {self.spec()}. Use categorical:A,B,... or --sampler tpe"
        )

    def spec(self) -> str:
        """The dimension written back in the space syntax."""
        if self.kind == "categorical":
            return "categorical:" + ",".join(map(str, self.choices))
        return f"{self.kind}:{self.low}:{self.high}" + (":log" if self.log else "")


def parse(key: str, spec: Any) -> Dimension:
    """One dimension from `KEY` and its `SPEC` text."""
    where = f"--space {key}={spec}"
    if not isinstance(spec, str):
        raise ConfigError(f"{where}: expected a text of the form {SYNTAX}")
    kind, _, rest = spec.strip().partition(":")
    if kind not in KINDS:
        raise ConfigError(f"{where}: unknown distribution {kind!r}; expected {SYNTAX}")
    if kind == "categorical":
        choices = tuple(_yaml_value(where, v.strip()) for v in rest.split(",") if v.strip())
        if not choices:
            raise ConfigError(f"{where}: categorical needs at least one value (A,B,...)")
        if len({json.dumps(c, sort_keys=True) for c in choices}) != len(choices):
            raise ConfigError(f"{where}: categorical values must differ")
        return Dimension(key, kind, choices=choices)
    parts = rest.split(":")
    log = len(parts) == 3 and parts[2] == "log"
    if len(parts) not in (2, 3) or (len(parts) == 3 and not log):
        raise ConfigError(f"{where}: expected {kind}:LOW:HIGH or {kind}:LOW:HIGH:log")
    number = int if kind == "int" else float
    try:
        low, high = number(parts[0]), number(parts[1])
    except ValueError:
        raise ConfigError(f"{where}: LOW and HIGH must be {kind} numbers") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise ConfigError(f"{where}: expected finite LOW < HIGH, got {low} and {high}")
    if log and low <= 0:
        raise ConfigError(f"{where}: a log scale needs LOW > 0, got {low}")
    return Dimension(key, kind, low, high, log)


def _yaml_value(where: str, text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{where}: cannot read {text!r} as a value ({err})") from None


def parse_specs(specs: list[str]) -> list[Dimension]:
    """`["train.learning_rate=float:1e-4:1e-2:log", ...]` (the `--space` flags)."""
    dims = []
    for text in specs:
        key, sep, spec = text.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--space {text!r}: expected KEY=SPEC with SPEC one of {SYNTAX}")
        dims.append(parse(key.strip(), spec))
    return dims


def combine(from_config: dict, from_flags: list[Dimension]) -> list[Dimension]:
    """The config's `tune.space` with the `--space` flags on top (a flag replaces its key)."""
    dims = {key: parse(key, spec) for key, spec in from_config.items()}
    dims.update({d.key: d for d in from_flags})
    if not dims:
        raise ConfigError(
            "tune needs a search space: a `tune: {space: {KEY: SPEC}}` section in the config "
            f"or --space KEY=SPEC flags (SPEC: {SYNTAX})"
        )
    return list(dims.values())


def override(key: str, value: Any) -> str:
    """`key=value` as `config.apply_overrides` reads it (JSON is YAML)."""
    return f"{key}={json.dumps(value)}"


def check(base: dict, dims: list[Dimension]) -> None:
    """Each dimension's ends (every choice) validated against the config schema, one key at
    a time: a key the config does not have, or a value it refuses, is a `ConfigError`."""
    for dim in dims:
        for value in dim.corners():
            try:
                config_lib.validate(config_lib.apply_overrides(base, [override(dim.key, value)]))
            except ConfigError as err:
                raise ConfigError(
                    f"--space {dim.key}={dim.spec()}: value {value!r}: {err}"
                ) from None
