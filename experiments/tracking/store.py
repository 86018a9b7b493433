"""The tracking store: where it is, connecting to it, experiments, runs and run tags.

Everything goes through an explicit `MlflowClient` (and, in `Tracker`, a run
id), so callbacks never depend on which run happens to be active.

A local store is created (MLflow's tables and migrations, for runs and for the model
registry) under a file lock beside it, `INIT_LOCK`: processes started at the same moment
on a new store wait for the first one instead of racing to create the same tables.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

import keras
import mlflow
from filelock import FileLock
from mlflow.exceptions import MlflowException

from experiments import backends
from experiments.errors import ConfigError
from experiments.tracking import server


def project_root() -> Path:
    """The source checkout holding `pyproject.toml`, else the working directory."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / "pyproject.toml").is_file() else Path.cwd()


def tracking_uri() -> str:
    """`MLFLOW_TRACKING_URI`, or the project's SQLite store `mlruns/mlflow.db`."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return f"sqlite:///{project_root() / 'mlruns' / 'mlflow.db'}"


def local_store_dir(uri: str) -> Path | None:
    """Folder of a local SQLite or file store (None for remote servers)."""
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        path = unquote(uri[len("sqlite:///") :])
        return Path(path if path.startswith("/") else Path.cwd() / path).parent
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path))
    return None


def connect():
    """Point MLflow at the store (creating a local one's folder) and return a client."""
    uri = tracking_uri()
    server.configure_http(uri)
    server.check_server(uri)  # remote: answers within 15 s, else exit 3
    folder = local_store_dir(uri)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    if folder is None:
        return mlflow.MlflowClient(uri)
    return initialise(uri, folder)


# Held while a local store is created or migrated (a file beside the store, never deleted:
# removing a lock file another process waits on would let two processes in).
INIT_LOCK = ".mlflow-init.lock"


def initialise(uri: str, folder: Path):
    """A client of the local store `uri`, which is created or migrated (tracking and registry
    tables) under `INIT_LOCK` in `folder`; a store that exists already is only read.

    The client is made under the lock too: MLflow opens (and so creates) the store in
    `MlflowClient`'s constructor."""
    with FileLock(folder / INIT_LOCK):
        client = mlflow.MlflowClient(uri)
        client.search_experiments(max_results=1)
        client.search_registered_models(max_results=1)
    return client


def check_run_id(run_id: str) -> None:
    """A `ConfigError` (exit 2) unless `run_id` looks like an MLflow run id, checked before
    the store is opened (a path like `../x` reaches neither the store nor the disk)."""
    if not run_id or not all(c.isalnum() or c in "-_" for c in run_id):
        raise ConfigError(
            f"run_id: expected an MLflow run id (letters and digits). Received: {run_id!r}"
        )


def get_run(client, run_id: str):
    """The MLflow run `run_id`, or a `ConfigError` (exit 2) naming it and the store."""
    try:
        return client.get_run(run_id)
    except Exception as err:  # noqa: BLE001 - MlflowException subclasses vary by store
        raise ConfigError(f"run_id: no run {run_id!r} in {tracking_uri()} ({err})") from None


# The MLflow UI opens an experiment of this kind on its model-training view (runs, charts,
# models), not on the GenAI one (traces, judges, prompts).
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


def experiment_id(client, name: str) -> str:
    """Id of experiment `name`, created with artifacts beside a local store and tagged as
    model training (`EXPERIMENT_KIND`)."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    folder = local_store_dir(tracking_uri())
    location = (folder / "artifacts").as_uri() if folder is not None else None
    try:
        return client.create_experiment(name, artifact_location=location, tags=EXPERIMENT_KIND)
    except MlflowException:  # another process created it a moment ago
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def checkpoint_root(cfg) -> Path:
    """Where run checkpoints live: `train.checkpoint_dir`, else beside a local store."""
    if cfg.train.checkpoint_dir:
        return Path(cfg.train.checkpoint_dir).resolve()
    return default_checkpoint_root()


def default_checkpoint_root() -> Path:
    """`checkpoints/` beside a local store (the working directory's with a server)."""
    folder = local_store_dir(tracking_uri())
    return (folder if folder is not None else Path.cwd()) / "checkpoints"


def environment_tags() -> dict[str, str]:
    """Versions, the Keras backend, how it runs (`Backend.runtime_tags`), the device and the
    git commit."""
    backend = backends.current()
    return {
        "git_commit": git_commit(),
        "keras_backend": backend.name,
        **backend.versions(),
        **backend.runtime_tags(),
        "keras_version": keras.__version__,
        "mlflow_version": mlflow.__version__,
        "python_version": platform.python_version(),
        "device": backend.device(),
    }


def git_commit() -> str:
    """HEAD of the project checkout, or "unknown"."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=project_root(),
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"
