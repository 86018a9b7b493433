"""`Tracker`: logging for one MLflow run, addressed by id, with a background artifact thread."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
from mlflow.entities import Metric, Param, RunTag

from experiments import config as config_lib
from experiments.tracking import finishing, image_view, model_logging

CONFIG_ARTIFACT = "config.yaml"
VOCAB_ARTIFACT = "vocab.json"  # the task's vocabularies and labels (`Task.vocabularies`)
ARTIFACT_THREAD = "mlflow-artifacts"


class Tracker:
    """Logging for one MLflow run, addressed by id.

    `submit` runs slow artifact work (rendering and uploading heatmaps) on one
    background thread, so training does not wait for it; `wait` blocks until
    it is done and re-raises its first error. `close` stops the thread (the
    next `submit` starts a new one); `end` waits, ends the run and closes.
    """

    def __init__(self, client, run_id: str):
        self.client, self.run_id = client, run_id
        self._worker: ThreadPoolExecutor | None = None
        self._pending = []

    def submit(self, fn, *args) -> None:
        """Run `fn(*args)` on the artifact thread (in submission order)."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix=ARTIFACT_THREAD)
        self._pending.append(self._worker.submit(fn, *args))

    def wait(self) -> None:
        """Block until submitted work is done; re-raise the first error it hit."""
        pending, self._pending = self._pending, []
        errors = [f.exception() for f in pending]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first

    def close(self) -> None:
        """Stop the artifact thread once its work is done (errors are `wait`'s to report)."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=True)

    def log_params(self, params: dict) -> None:
        items = [Param(k, _param_value(v)) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[start : start + 100])

    def set_tags(self, tags: dict) -> None:
        """All tags in batched calls (one request per 100), not one request per tag."""
        items = [RunTag(k, str(v)) for k, v in tags.items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(self.run_id, tags=items[start : start + 100])

    def log_metrics(self, metrics: dict, step: int) -> None:
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

    def log_metrics_once(self, metrics: dict, step: int) -> None:
        """`log_metrics`, leaving out the keys already logged at `step` (a resumed ending)."""
        self.log_metrics(
            {k: v for k, v in metrics.items() if step not in self.logged_steps(k)}, step
        )

    def log_text(self, text: str, path: str) -> None:
        self.client.log_text(self.run_id, text, path)

    def log_dict(self, data, path: str) -> None:
        self.client.log_dict(self.run_id, data, path)

    def log_figure(self, figure, path: str) -> None:
        self.client.log_figure(self.run_id, figure, path)

    def log_image(self, image: np.ndarray, key: str, step: int) -> None:
        """One step of a stepped image (`key` in `[A-Za-z0-9_.-]`): MLflow's UI shows a slider."""
        self.client.log_image(self.run_id, image, key=key, step=step, synchronous=True)

    def save_image_view(self, keys, step: int) -> None:
        """The run's experiment gets (or updates) its saved UI view of the stepped images `keys`,
        shown at `step` (see `image_view`)."""
        experiment_id = self.client.get_run(self.run_id).info.experiment_id
        image_view.save(self.client, experiment_id, keys, step)

    def log_inputs(self, inputs) -> None:
        """Dataset inputs (`mlflow.entities.DatasetInput`) of the run: its Datasets panel."""
        self.client.log_inputs(self.run_id, datasets=list(inputs))

    def log_table(self, rows: list[dict], path: str, listed: bool = True) -> None:
        """A table as JSON (MLflow's table format) plus a CSV copy (the artifact viewer's table).

        `listed=True` logs it with `MlflowClient.log_table`, which lists it in the
        run's `mlflow.loggedArtifacts` tag for the UI's table views. That tag is
        capped at 8000 characters and MLflow fails to parse it once truncated
        (the ~150th table of a run), so per-epoch tables use `listed=False`:
        the same JSON, written as a plain artifact.
        """
        frame = pd.DataFrame(rows)
        if listed:
            self.client.log_table(self.run_id, frame, path)
        else:
            self.log_dict(json.loads(frame.to_json(orient="split", index=False)), path)
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
        with tempfile.TemporaryDirectory() as tmp:
            local = mlflow.artifacts.download_artifacts(
                run_id=self.run_id, artifact_path=path, dst_path=tmp
            )
            return Path(local).read_text(encoding="utf-8")

    def log_model(self, model, card: dict) -> dict[str, str]:
        """Log the trained model as `model` (Keras flavor) and `text_model` (pyfunc) with its
        text card (see `model_logging`); return the tags `model_uri` and `text_model_uri`.

        Once only (see `finishing`): models the run's tags already name are kept, and
        models of the run no tag names (left by an interrupt) are deleted first. When
        logging fails, what was logged of the two is deleted (both or neither)."""
        active = mlflow.active_run()
        if active is None or active.info.run_id != self.run_id:
            raise RuntimeError(f"log_model needs run {self.run_id} to be the active run")
        logged = finishing.logged_models(self.client, self.run_id, card)
        if logged is not None:
            return logged
        finishing.delete_orphans(self.client, self.run_id, card)
        try:
            return model_logging.log_models(model, card)
        except Exception:
            # A server that went away cannot delete them now: the next try deletes them first.
            with contextlib.suppress(Exception):
                finishing.delete_orphans(self.client, self.run_id, card)
            raise

    def end(self, status: str = "FINISHED") -> None:
        """Wait for the artifact thread, end the run with `status`, and stop the thread."""
        try:
            self.wait()
            self.client.set_terminated(self.run_id, status)
        finally:
            self.close()


def _param_value(value) -> str:
    text = "None" if value is None else str(value)
    return text if len(text) <= 6000 else text[:5997] + "..."
