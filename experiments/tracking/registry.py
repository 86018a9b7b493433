"""The MLflow Model Registry: a run's model registered under a name, with an alias.

`register(client, run_id, name)` registers the run's Keras-flavor model (the `model_uri`
tag `tracker.log_model` sets; the `text_model_uri` one for a run on a backend other than
TensorFlow, which logs no Keras-flavor model) as a new version of `name` and points `alias` (`champion`)
at it; a version of the same run already holding the alias is kept, not registered again.
Load it anywhere with `mlflow.keras.load_model("models:/NAME@champion")`.
"""

from __future__ import annotations

import mlflow

CHAMPION = "champion"


def register(client, run_id: str, name: str, alias: str = CHAMPION):
    """Register run `run_id`'s model as a version of `name` with `alias`; return the version,
    or None when the run logged no model."""
    tags = client.get_run(run_id).data.tags
    model_uri = tags.get("model_uri", tags.get("text_model_uri"))
    if model_uri is None:
        return None
    current = aliased(client, name, alias)
    if current is not None and run_id in (current.run_id, current.tags.get("run_id")):
        return current
    version = add_version(model_uri, name, run_id)
    client.set_registered_model_alias(name, alias, version)
    return client.get_model_version(name, version)


def add_version(model_uri: str, name: str, run_id: str) -> str:
    """Register `model_uri` (run `run_id`'s) as a new version of `name`; return its number."""
    return mlflow.register_model(model_uri, name, tags={"run_id": run_id}).version


def aliased(client, name: str, alias: str = CHAMPION):
    """The version of `name` that `alias` points at in the registry; None when none does."""
    try:
        return client.get_model_version_by_alias(name, alias)
    except mlflow.exceptions.MlflowException:  # no such model, or no such alias yet
        return None
