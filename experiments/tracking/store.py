"""The tracking store: where it is, connecting to it, experiments, runs and run tags.

Everything goes through an explicit `MlflowClient` (and, in `Tracker`, a run
id), so callbacks never depend on which run happens to be active.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

import keras
import mlflow
import tensorflow as tf

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
    return mlflow.MlflowClient(uri)


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
    return client.create_experiment(name, artifact_location=location, tags=EXPERIMENT_KIND)


def checkpoint_root(cfg) -> Path:
    """Where run checkpoints live: `train.checkpoint_dir`, else beside a local store."""
    if cfg.train.checkpoint_dir:
        return Path(cfg.train.checkpoint_dir).resolve()
    folder = local_store_dir(tracking_uri())
    return (folder if folder is not None else Path.cwd()) / "checkpoints"


def environment_tags() -> dict[str, str]:
    """Versions, device and git commit."""
    gpus = tf.config.list_physical_devices("GPU")
    return {
        "git_commit": git_commit(),
        "tensorflow_version": tf.__version__,
        "keras_version": keras.__version__,
        "mlflow_version": mlflow.__version__,
        "python_version": platform.python_version(),
        "device": ", ".join(g.name for g in gpus) if gpus else f"cpu ({os.cpu_count()} cores)",
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
