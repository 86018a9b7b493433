"""Uploading what a run spooled locally while the tracking server was down.

The spool lives in the run's checkpoint folder (`<checkpoint_dir>/spool`, see
`spool`); the folder is found from the run's `checkpoint_dir` tag, or given
explicitly. Uploading is idempotent: run it as often as you like.

Lines of the journal that are not usable records are never uploaded and
never deleted: they are listed in `spool/quarantine.jsonl`, the spool is
kept, and the result says so (`sync` exits 1). `skip_bad=True` (`sync
--skip-bad`) is the user's explicit decision to drop them from the spool:
the usable records are uploaded, the quarantine file is moved beside the
spool (`spool-skipped-<time>.jsonl`), and the spool is removed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import mlflow

from experiments.errors import ConfigError
from experiments.tracking import resilient, run_folder, run_lock, store
from experiments.tracking import spool as spool_lib
from experiments.tracking.tracker import Tracker


def spool_folder(client, run_id: str, checkpoint_dir: str | None) -> Path:
    """The run's spool folder (which may not exist when nothing was spooled).

    The checkpoint folder, given or from the run's `checkpoint_dir` tag, must
    be that run's (`run_folder.verify`).
    """
    source = "--checkpoint-dir"
    if checkpoint_dir is None:
        run = store.get_run(client, run_id)
        checkpoint_dir = run.data.tags.get("checkpoint_dir")
        source = f"run {run_id}'s checkpoint_dir tag"
        if not checkpoint_dir:
            raise ConfigError(
                f"run_id: run {run_id} has no checkpoint_dir tag; pass --checkpoint-dir"
            )
    else:
        checkpoint_dir = Path(checkpoint_dir).absolute()  # not resolved: a symlink is refused
    return run_folder.verify(Path(checkpoint_dir), run_id, source) / spool_lib.SPOOL_DIR


@dataclass
class SyncResult:
    """What `sync_run` did: records uploaded, usable records left, unusable lines and their file."""

    uploaded: int = 0
    left: int = 0
    bad: int = 0
    bad_file: Path | None = None  # quarantine.jsonl, or the skipped file after skip_bad
    skipped: bool = False


def sync_run(
    run_id: str, checkpoint_dir: str | None = None, echo=None, skip_bad: bool = False
) -> SyncResult:
    """Upload the spool of `run_id` (see the module docstring on unusable lines).

    `echo(line)` is told about each uploaded record.
    """
    store.check_run_id(run_id)
    client = store.connect()
    spool = spool_lib.Spool(spool_folder(client, run_id, checkpoint_dir))
    if not spool.exists():
        return SyncResult()
    lock = run_lock.acquire(spool.folder.parent, run_id, "sync its spool")
    try:
        return _sync(client, run_id, spool, echo, skip_bad)
    finally:
        lock.release()


def _sync(client, run_id: str, spool: spool_lib.Spool, echo, skip_bad: bool) -> SyncResult:
    status = client.get_run(run_id).info.status

    def log_model(path: Path, card: dict) -> dict[str, str]:
        model = resilient.load_keras(path)
        with mlflow.start_run(run_id=run_id):
            tags = Tracker(client, run_id).log_model(model, card)
        if status != "RUNNING":
            client.set_terminated(run_id, status)  # start_run reopened it; restore
        return tags

    result = SyncResult(spool_lib.replay(spool, client, run_id, log_model=log_model, echo=echo))
    spool.close()
    result.left = len(spool.pending())
    bad = spool.read().bad
    result.bad = len(bad)
    if bad:
        result.bad_file = spool.quarantine(bad)
        if not skip_bad:
            client.set_tag(
                run_id, "spool_quarantine", f"{len(bad)} unreadable record(s): {result.bad_file}"
            )
    if result.left or (bad and not skip_bad):
        return result
    if bad:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        result.bad_file = spool.folder.with_name(f"{spool_lib.SPOOL_DIR}-skipped-{stamp}.jsonl")
        result.skipped = True
    spool.clear(keep_bad=result.bad_file if bad else None)
    return result
