"""The settings of a `tune` study: a config's `tune:` section, the flags on top, and the
samplers, pruners and defaults they name (the one place those choices are made).

```yaml
tune:
  trials: 12
  metric: val_exact_match_greedy   # default: the task's selection metric, on validation
  direction: maximize              # default: from the metric's name
  sampler: tpe                     # tpe | random | grid
  pruner: median                   # median | none, or {name: median, n_startup_trials: 2}
  space:
    train.learning_rate: float:1e-4:1e-2:log
    model.units: int:16:128
    model.attention.score: categorical:dot,general,additive
```

The section belongs to `tune` only: it is taken out of the config before the config is
validated, so every trial's config is an ordinary run's config.
"""

from __future__ import annotations

from typing import Literal

import optuna
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from experiments import config as config_lib
from experiments.errors import ConfigError, invalid_config

SECTION = "tune"
DEFAULT_TRIALS = 10
DEFAULT_HEARTBEAT_SECONDS = 30
SILENT_BEATS = 3  # a running trial this many heartbeats silent is failed (its worker is lost)
MAX_RETRIES = 1  # a trial whose worker died is run again once
# A metric is minimised when its name has one of these, maximised otherwise.
LOWER_IS_BETTER = ("loss", "perplexity", "bits_per_char", "entropy", "seconds", "error")


def grace_seconds(heartbeat: int) -> int:
    """How long a running trial may be silent before it is failed."""
    return SILENT_BEATS * heartbeat


def make_sampler(name: str, grid: dict | None = None, seed: int | None = None):
    """The Optuna sampler `name` (`grid` needs each key's values)."""
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.GridSampler(grid, seed=seed)


def make_pruner(setting: dict):
    """The Optuna pruner of a `pruner` setting (`{name: median, ...MedianPruner args}`)."""
    options = {k: v for k, v in setting.items() if k != "name"}
    if setting["name"] == "none":
        return optuna.pruners.NopPruner()
    return optuna.pruners.MedianPruner(**options)


PRUNERS = ("median", "none")
MEDIAN_OPTIONS = ("n_startup_trials", "n_warmup_steps", "interval_steps", "n_min_trials")


class TuneSection(BaseModel):
    """A config's `tune:` section (every key optional; flags win)."""

    model_config = ConfigDict(extra="forbid")

    trials: int | None = Field(
        None, ge=1, description=f"The study's trials in all; unset: {DEFAULT_TRIALS}."
    )
    metric: str | None = Field(
        None, description="The metric optimised; unset: the task's selection metric, on validation."
    )
    direction: Literal["maximize", "minimize"] | None = Field(
        None, description="Unset: from the metric's name (losses, bits per char: minimize)."
    )
    sampler: Literal["tpe", "random", "grid"] = Field(
        "tpe", description="Optuna's sampler that proposes the trials."
    )
    pruner: dict = Field(
        default_factory=lambda: {"name": "median"},
        description="`{name: median or none}` and the median pruner's options "
        "(`n_startup_trials`, ...).",
    )
    study: str | None = Field(
        None, min_length=1, description="The study's name; unset: `EXPERIMENT-CONFIGNAME`."
    )
    storage: str | None = Field(
        None,
        description="Optuna's storage: an RDB URL or `journal:PATH`; unset: a SQLite file "
        "beside the local MLflow store (`mlruns/optuna.db`).",
    )
    register_as: str | None = Field(
        None,
        min_length=1,
        description="The Model Registry name the best trial's model is registered under; "
        "unset: the experiment's name.",
    )
    space: dict[str, str] = Field(
        default_factory=dict, description="The search space: `KEY: SPEC` (`float:1e-4:1e-2:log`)."
    )

    @field_validator("pruner", mode="before")
    @classmethod
    def _one_pruner(cls, value):
        return pruner_setting(value)


def pruner_setting(value) -> dict:
    """`median`, `none` or `{name: median, n_startup_trials: 2, ...}` as a mapping."""
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict) or value.get("name") not in PRUNERS:
        raise ValueError(f"one of {', '.join(PRUNERS)}, or {{name: median, <option>: ...}}")
    unknown = [k for k in value if k not in ("name", *MEDIAN_OPTIONS)]
    if unknown or (value["name"] == "none" and len(value) > 1):
        raise ValueError(
            f"options of the median pruner only ({', '.join(MEDIAN_OPTIONS)}); got {unknown}"
        )
    try:
        make_pruner(value)
    except (TypeError, ValueError) as err:
        raise ValueError(str(err)) from None
    return dict(value)


def split(data: dict) -> tuple[dict, TuneSection]:
    """The config without its `tune` section, and the section."""
    data = dict(data)
    raw = data.pop(SECTION, None) or {}
    if not isinstance(raw, dict):
        raise invalid_config(SECTION, raw, "a mapping of tune settings")
    try:
        return data, TuneSection.model_validate(raw)
    except ValidationError as err:
        head, *lines = config_lib.format_errors(err, raw).splitlines()
        raise ConfigError(
            "\n".join([head, *(f"  {SECTION}.{x.lstrip()}" for x in lines)])
        ) from None


def direction_for(metric: str) -> str:
    """`minimize` for losses, perplexities, bits per char...; `maximize` otherwise."""
    return "minimize" if any(word in metric for word in LOWER_IS_BETTER) else "maximize"
