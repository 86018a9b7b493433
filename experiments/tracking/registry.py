"""The MLflow Model Registry: a run's model registered under a name, and the `champion` alias.

`register(client, run_id, name, metric, direction)` registers a study's best run's model
(the Keras-flavor model of the `model_uri` tag `tracker.log_model` sets; the
`text_model_uri` one for a run on a backend other than TensorFlow, which logs no
Keras-flavor model) as a version of `name` (once per run), and moves the alias `champion`
to it only when it is better than the model the alias holds, judged fairly (`judge`):

- on the same objective: the metric and direction the champion was chosen on (tags
  `objective_metric`, `objective_direction` of its version) are the study's;
- on the same data: the task config (every `task.*` param), the validation rows the
  per-epoch metrics are measured on (`val_eval_rows`) and the digest of every split (the
  runs' MLflow dataset inputs) are the same for both runs;
- by the value each run's model has: the metric at the epoch whose weights were logged
  (`kept_value`: its `best_epoch` with early stopping, else the last).

Otherwise the champion stays, and the `Verdict` says why (a champion that records no
objective, registered before comparisons or by hand, is never replaced automatically).
Load the champion anywhere with `mlflow.keras.load_model("models:/NAME@champion")`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mlflow

CHAMPION = "champion"
# Tags of a champion's version: the objective it was chosen on, and why it was (or was not).
OBJECTIVE_TAGS = ("objective_metric", "objective_direction", "objective_value")
VERDICT_TAG = "champion_verdict"
# Run inputs of these contexts are the splits; their digests change whenever the data does.
SPLIT_CONTEXT = "mlflow.data.context"


@dataclass(frozen=True)
class Standing:
    """What a model is judged on: the objective, its value there, and what defines the
    data the value was measured on (`data_of`)."""

    metric: str
    direction: str  # "maximize" or "minimize"
    value: float | None
    data: dict


@dataclass(frozen=True)
class Verdict:
    """Whether the alias moves to the new model, and why (a sentence, logged and printed)."""

    moves: bool
    reason: str


def register(client, run_id: str, name: str, metric: str, direction: str, alias: str = CHAMPION):
    """Register run `run_id`'s model as a version of `name` (reusing that run's version if it
    has one) and move `alias` to it when `judge` says so; return `(version, verdict)`, or
    `(None, None)` when the run logged no model."""
    tags = client.get_run(run_id).data.tags
    model_uri = tags.get("model_uri", tags.get("text_model_uri"))
    if model_uri is None:
        return None, None
    current = aliased(client, name, alias)
    version = version_of(client, name, run_id)
    if version is None:
        version = client.get_model_version(name, add_version(model_uri, name, run_id))
    if current is not None and _run_of(current) == run_id:
        return current, Verdict(False, f"this model (version {current.version}) is the champion")
    new = Standing(metric, direction, kept_value(client, run_id, metric), data_of(client, run_id))
    try:
        verdict = judge(new, _standing(client, current))
    except mlflow.exceptions.MlflowException as err:  # e.g. the champion's run was deleted
        verdict = Verdict(False, f"the champion's run cannot be read ({err}), so it is kept")
    if verdict.moves:
        client.set_registered_model_alias(name, alias, version.version)
    # Every version records the objective it was judged on, the champion's and the others'.
    for key, value in zip(OBJECTIVE_TAGS, (metric, direction, repr(new.value))):
        client.set_model_version_tag(name, version.version, key, value)
    client.set_model_version_tag(name, version.version, VERDICT_TAG, verdict.reason)
    return client.get_model_version(name, version.version), verdict


def judge(new: Standing, current: Standing | None) -> Verdict:
    """Whether `new` takes the champion's place: only when both were measured the same way
    on the same data, and `new` is strictly better (a tie keeps the champion)."""
    if current is None:
        return Verdict(True, "there was no champion")
    if (current.metric, current.direction) != (new.metric, new.direction):
        if not current.metric:
            return Verdict(
                False,
                "the champion records no objective (registered before champions were "
                "compared, or by hand), so it is kept; move the alias by hand if you mean to",
            )
        return Verdict(
            False,
            f"the champion was chosen to {current.direction} {current.metric}, this study "
            f"to {new.direction} {new.metric}: not comparable, so it is kept",
        )
    differ = sorted(
        k for k in current.data.keys() | new.data.keys() if current.data.get(k) != new.data.get(k)
    )
    if differ:
        shown = "; ".join(
            f"{k}: {current.data.get(k, '-')} (champion) vs {new.data.get(k, '-')}"
            for k in differ[:3]
        )
        more = f" and {len(differ) - 3} more" if len(differ) > 3 else ""
        return Verdict(
            False,
            f"measured on other data ({shown}{more}): not comparable, so the champion is kept",
        )
    if not _finite(current.value):
        return Verdict(False, f"the champion's run has no finite {new.metric}: it is kept")
    if not _finite(new.value):
        return Verdict(False, f"no finite {new.metric}: the champion is kept")
    shown = f"{new.metric} {new.value:.4g} vs the champion's {current.value:.4g}"
    better = new.value > current.value if new.direction == "maximize" else new.value < current.value
    if better:
        return Verdict(True, f"better on the same data: {shown}")
    return Verdict(False, f"not better on the same data ({shown}): the champion is kept")


def data_of(client, run_id: str) -> dict:
    """What defines the data a run's metrics were measured on: its `task.*` params, its
    `val_eval_rows` and the digest of each split it logged as a dataset input."""
    found = client.get_run(run_id)
    params = found.data.params
    data = {k: v for k, v in params.items() if k.startswith("task.") or k == "val_eval_rows"}
    for item in found.inputs.dataset_inputs if found.inputs else ():
        context = next((t.value for t in item.tags if t.key == SPLIT_CONTEXT), None)
        if context is not None:
            data[f"{context} split digest"] = item.dataset.digest
    return data


def kept_value(client, run_id: str, metric: str) -> float | None:
    """`metric` of run `run_id` at the epoch whose weights the run kept (its `best_epoch`
    with early stopping), else its last value; None when it logged none."""
    metrics = client.get_run(run_id).data.metrics
    best = metrics.get("best_epoch")
    if best is not None:
        for item in client.get_metric_history(run_id, metric):
            if item.step == int(best):
                return item.value
    return metrics.get(metric)


def add_version(model_uri: str, name: str, run_id: str) -> str:
    """Register `model_uri` (run `run_id`'s) as a new version of `name`; return its number."""
    return mlflow.register_model(model_uri, name, tags={"run_id": run_id}).version


def aliased(client, name: str, alias: str = CHAMPION):
    """The version of `name` that `alias` points at in the registry; None when none does."""
    try:
        return client.get_model_version_by_alias(name, alias)
    except mlflow.exceptions.MlflowException:  # no such model, or no such alias yet
        return None


def version_of(client, name: str, run_id: str):
    """The version of `name` registered from run `run_id`; None when there is none."""
    try:
        versions = client.search_model_versions(f"name = '{name}'")
    except mlflow.exceptions.MlflowException:
        return None
    found = [v for v in versions if _run_of(v) == run_id]
    return max(found, key=lambda v: int(v.version)) if found else None


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def _run_of(version) -> str | None:
    return version.tags.get("run_id", version.run_id)


def _standing(client, version) -> Standing | None:
    """How the champion `version` stands (None: there is none): its objective from its
    tags, its value and data from its run."""
    if version is None:
        return None
    metric = version.tags.get("objective_metric", "")
    direction = version.tags.get("objective_direction", "")
    run_id = _run_of(version)
    value = kept_value(client, run_id, metric) if metric else None
    return Standing(metric, direction, value, data_of(client, run_id))
