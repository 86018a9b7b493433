"""`sync RUN_ID`: upload what a run spooled locally while the tracking server was down.

The spool lives in the run's checkpoint folder (`<checkpoint_dir>/spool`, see
`experiments.spool`); the folder is found from the run's `checkpoint_dir`
tag, or given with `--checkpoint-dir`. Uploading is idempotent: run it as
often as you like.
"""

from __future__ import annotations

import sys
from pathlib import Path

from experiments.config import ConfigError


def add_parser(subparsers) -> None:
    """Register `sync` on the CLI (see `experiments.cli.OPTIONAL_COMMANDS`)."""
    parser = subparsers.add_parser(
        "sync", help="upload metrics and artifacts a run spooled during a tracking outage"
    )
    parser.add_argument("run_id")
    parser.add_argument(
        "--checkpoint-dir",
        default=None,
        help="the run's checkpoint folder (default: the run's checkpoint_dir tag)",
    )
    parser.set_defaults(handler=cmd_sync)


def cmd_sync(args) -> int:
    count, left = sync_run(args.run_id, args.checkpoint_dir)
    if left:
        print(f"error: {left} record(s) still spooled for run {args.run_id}", file=sys.stderr)
        return 1
    print(f"run {args.run_id}: uploaded {count} spooled record(s); spool empty")
    return 0


def spool_folder(client, run_id: str, checkpoint_dir: str | None) -> Path:
    """The run's spool folder (which may not exist when nothing was spooled)."""
    from experiments import spool as spool_lib
    from experiments import tracking

    if checkpoint_dir is None:
        run = tracking.get_run(client, run_id)
        checkpoint_dir = run.data.tags.get("checkpoint_dir")
        if not checkpoint_dir:
            raise ConfigError(
                f"run_id: run {run_id} has no checkpoint_dir tag; pass --checkpoint-dir"
            )
    return Path(checkpoint_dir) / spool_lib.SPOOL_DIR


def sync_run(run_id: str, checkpoint_dir: str | None = None) -> tuple[int, int]:
    """Upload the spool of `run_id`; return (records uploaded, records left)."""
    import mlflow

    from experiments import resilient, tracking
    from experiments import spool as spool_lib

    if not run_id or not all(c.isalnum() or c in "-_" for c in run_id):
        raise ConfigError(
            f"run_id: expected an MLflow run id (letters and digits). Received: {run_id!r}"
        )
    client = tracking.connect()
    spool = spool_lib.Spool(spool_folder(client, run_id, checkpoint_dir))
    if not spool.exists():
        return 0, 0
    status = client.get_run(run_id).info.status

    def log_model(path: Path) -> str:
        model = resilient.load_keras(path)
        with mlflow.start_run(run_id=run_id):
            uri = tracking.Tracker(client, run_id).log_model(model)
        if status != "RUNNING":
            client.set_terminated(run_id, status)  # start_run reopened it; restore
        return uri

    count = spool_lib.replay(spool, client, run_id, log_model=log_model, echo=print)
    left = len(spool.pending())
    if not left:
        spool.clear()
    return count, left
