"""Uploading what a run spooled locally while the tracking server was down.

The spool lives in the run's checkpoint folder (`<checkpoint_dir>/spool`, see
`spool`); the folder is found from the run's `checkpoint_dir` tag, or given
explicitly. Uploading is idempotent: run it as often as you like.
"""

from __future__ import annotations

from pathlib import Path

import mlflow

from experiments.errors import ConfigError
from experiments.tracking import resilient, store
from experiments.tracking import spool as spool_lib
from experiments.tracking.tracker import Tracker


def spool_folder(client, run_id: str, checkpoint_dir: str | None) -> Path:
    """The run's spool folder (which may not exist when nothing was spooled)."""
    if checkpoint_dir is None:
        run = store.get_run(client, run_id)
        checkpoint_dir = run.data.tags.get("checkpoint_dir")
        if not checkpoint_dir:
            raise ConfigError(
                f"run_id: run {run_id} has no checkpoint_dir tag; pass --checkpoint-dir"
            )
    return Path(checkpoint_dir) / spool_lib.SPOOL_DIR


def sync_run(run_id: str, checkpoint_dir: str | None = None, echo=None) -> tuple[int, int]:
    """Upload the spool of `run_id`; return (records uploaded, records left).

    `echo(line)` is told about each uploaded record.
    """
    if not run_id or not all(c.isalnum() or c in "-_" for c in run_id):
        raise ConfigError(
            f"run_id: expected an MLflow run id (letters and digits). Received: {run_id!r}"
        )
    client = store.connect()
    spool = spool_lib.Spool(spool_folder(client, run_id, checkpoint_dir))
    if not spool.exists():
        return 0, 0
    status = client.get_run(run_id).info.status

    def log_model(path: Path, card: dict) -> dict[str, str]:
        model = resilient.load_keras(path)
        with mlflow.start_run(run_id=run_id):
            tags = Tracker(client, run_id).log_model(model, card)
        if status != "RUNNING":
            client.set_terminated(run_id, status)  # start_run reopened it; restore
        return tags

    count = spool_lib.replay(spool, client, run_id, log_model=log_model, echo=echo)
    left = len(spool.pending())
    spool.close()
    if not left:
        spool.clear()
    return count, left
