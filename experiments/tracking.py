"""MLflow plumbing: store location, runs, params, tags and artifacts.

Everything goes through an explicit `MlflowClient` and run id, so callbacks
never depend on which run happens to be active.
"""

from __future__ import annotations

import io
import os
import platform
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np

from experiments import config as config_lib

CONFIG_ARTIFACT = "config.yaml"


def project_root() -> Path:
    """The source checkout holding `pyproject.toml`, else the working directory."""
    here = Path(__file__).resolve().parents[1]
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
    import mlflow

    from experiments import resilient

    uri = tracking_uri()
    resilient.configure_http(uri)
    resilient.check_server(uri)  # remote: answers within 15 s, else exit 3
    folder = local_store_dir(uri)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    return mlflow.MlflowClient(uri)


def get_run(client, run_id: str):
    """The MLflow run `run_id`, or a `ConfigError` (exit 2) naming it and the store."""
    from experiments.config import ConfigError

    try:
        return client.get_run(run_id)
    except Exception as err:  # noqa: BLE001 - MlflowException subclasses vary by store
        raise ConfigError(f"run_id: no run {run_id!r} in {tracking_uri()} ({err})") from None


def experiment_id(client, name: str) -> str:
    """Id of experiment `name`, created with artifacts beside a local store."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    folder = local_store_dir(tracking_uri())
    location = (folder / "artifacts").as_uri() if folder is not None else None
    return client.create_experiment(name, artifact_location=location)


def checkpoint_root(cfg) -> Path:
    """Where run checkpoints live: `train.checkpoint_dir`, else beside a local store."""
    if cfg.train.checkpoint_dir:
        return Path(cfg.train.checkpoint_dir).resolve()
    folder = local_store_dir(tracking_uri())
    return (folder if folder is not None else Path.cwd()) / "checkpoints"


def environment_tags() -> dict[str, str]:
    """Versions, device and git commit."""
    import keras
    import mlflow
    import tensorflow as tf

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


class Tracker:
    """Logging for one MLflow run, addressed by id.

    `submit` runs slow artifact work (rendering and uploading heatmaps) on one
    background thread, so training does not wait for it; `wait` blocks until
    it is done and re-raises its first error. `end` waits first.
    """

    def __init__(self, client, run_id: str):
        self.client, self.run_id = client, run_id
        self._worker = None
        self._pending = []

    def submit(self, fn, *args) -> None:
        """Run `fn(*args)` on the artifact thread (in submission order)."""
        from concurrent.futures import ThreadPoolExecutor

        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="mlflow-artifacts")
        self._pending.append(self._worker.submit(fn, *args))

    def wait(self) -> None:
        """Block until submitted work is done; re-raise the first error it hit."""
        pending, self._pending = self._pending, []
        errors = [f.exception() for f in pending]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first

    def log_params(self, params: dict) -> None:
        from mlflow.entities import Param

        items = [Param(k, _param_value(v)) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[start : start + 100])

    def set_tags(self, tags: dict) -> None:
        for key, value in tags.items():
            self.client.set_tag(self.run_id, key, str(value))

    def log_metrics(self, metrics: dict, step: int) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [
            Metric(k, float(v), now, step)
            for k, v in metrics.items()
            if v is not None and np.isfinite(float(v))
        ]
        if items:
            self.client.log_batch(self.run_id, metrics=items)

    def logged_steps(self, key: str) -> set[int]:
        return {m.step for m in self.client.get_metric_history(self.run_id, key)}

    def log_text(self, text: str, path: str) -> None:
        self.client.log_text(self.run_id, text, path)

    def log_dict(self, data, path: str) -> None:
        self.client.log_dict(self.run_id, data, path)

    def log_figure(self, figure, path: str) -> None:
        self.client.log_figure(self.run_id, figure, path)

    def log_table(self, rows: list[dict], path: str) -> None:
        """A table as JSON (MLflow table format, shown in the UI) plus a CSV copy."""
        import pandas as pd

        frame = pd.DataFrame(rows)
        self.client.log_table(self.run_id, frame, path)
        self.log_text(frame.to_csv(index=False), path.rsplit(".", 1)[0] + ".csv")

    def log_array(self, array: np.ndarray, path: str) -> None:
        buffer = io.BytesIO()
        np.save(buffer, array)
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / Path(path).name
            target.write_bytes(buffer.getvalue())
            folder = str(Path(path).parent) if Path(path).parent != Path(".") else None
            self.client.log_artifact(self.run_id, str(target), folder)

    def log_config(self, cfg) -> None:
        self.log_text(config_lib.to_yaml(cfg), CONFIG_ARTIFACT)

    def download_text(self, path: str) -> str:
        import mlflow

        with tempfile.TemporaryDirectory() as tmp:
            local = mlflow.artifacts.download_artifacts(
                run_id=self.run_id, artifact_path=path, dst_path=tmp
            )
            return Path(local).read_text(encoding="utf-8")

    def log_model(self, model) -> str:
        """Log the trained model with explicit pip requirements; return its URI."""
        import keras
        import mlflow
        import tensorflow as tf

        requirements = [
            f"keras=={keras.__version__}",
            f"tensorflow=={tf.__version__}",
            "keras-attn-rnn",
        ]
        active = mlflow.active_run()
        if active is None or active.info.run_id != self.run_id:
            raise RuntimeError(f"log_model needs run {self.run_id} to be the active run")
        info = mlflow.keras.log_model(model, name="model", pip_requirements=requirements)
        return info.model_uri

    def end(self, status: str = "FINISHED") -> None:
        self.wait()
        self.client.set_terminated(self.run_id, status)


def _param_value(value) -> str:
    text = "None" if value is None else str(value)
    return text if len(text) <= 6000 else text[:5997] + "..."
