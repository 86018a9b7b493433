"""Uploading what a run spooled locally while the tracking server was down.

The spool lives in the run's checkpoint folder (`<checkpoint_dir>/spool`, see
`spool`); the folder is found from the run's `checkpoint_dir` tag, or given
explicitly.

The folder must be the run's (its `run.json` names the run) and must hold
a spool, or nothing is done (`ConfigError`, exit 2). Uploading is
idempotent: a sync stopped anywhere, even by `kill -9`, can be run again,
and uploads nothing twice (see `spool.replay`).

Lines of the journal that are not usable records are never uploaded and
never deleted: they are listed in `spool/quarantine.jsonl`, the spool is
kept, and the result says so (`sync` exits 1). `skip_bad=True` (`sync
--skip-bad`) is the user's explicit decision to drop them from the spool:
the usable records are uploaded, the quarantine list and the spooled files
no uploaded record names (a damaged record's file among them) are moved to
`spool-skipped-<time>/` beside the spool, kept until the user deletes
them, and the spool is removed.
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


def find_spool(client, run_id: str, checkpoint_dir: str | None) -> spool_lib.Spool:
    """The spool of run `run_id`, in its checkpoint folder, given or from its `checkpoint_dir` tag.

    The folder must be that run's (`run_folder.verify`: its `run.json` names
    the run), and must hold a spool; otherwise `ConfigError` (exit 2) names
    the path, and nothing is uploaded.
    """
    source, given = "--checkpoint-dir", checkpoint_dir
    if checkpoint_dir is None:
        run = store.get_run(client, run_id)
        given = run.data.tags.get("checkpoint_dir")
        source = f"run {run_id}'s checkpoint_dir tag"
        if not given:
            raise ConfigError(
                f"run_id: run {run_id} has no checkpoint_dir tag; pass --checkpoint-dir"
            )
        folder = Path(given)
    else:
        folder = Path(checkpoint_dir).absolute()  # not resolved: a symlink is refused
    folder = run_folder.verify(folder, run_id, source)
    if not folder.is_dir():
        raise ConfigError(
            f"{source}: {given!r} does not exist (looked for {folder}); pass run {run_id}'s "
            "checkpoint folder, the one its spool was written to"
        )
    spool = spool_lib.Spool(folder / spool_lib.SPOOL_DIR)
    if not spool.exists():
        raise ConfigError(
            f"{source}: {spool.journal} does not exist: nothing of run {run_id} is spooled in "
            f"{folder} (a sync that uploaded everything removes the spool)"
        )
    return spool


@dataclass
class SyncResult:
    """What `sync_run` did: records uploaded, usable records left, unusable lines and their file."""

    uploaded: int = 0
    left: int = 0
    bad: int = 0
    bad_file: Path | None = None  # quarantine.jsonl, while the spool is kept
    kept: Path | None = None  # after skip_bad: the folder the bad lines and their files went to


def sync_run(
    run_id: str, checkpoint_dir: str | None = None, echo=None, skip_bad: bool = False
) -> SyncResult:
    """Upload the spool of `run_id` (see the module docstring on unusable lines).

    `echo(line)` is told about each uploaded record.
    """
    store.check_run_id(run_id)
    client = store.connect()
    spool = find_spool(client, run_id, checkpoint_dir)
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
        result.kept = spool.folder.with_name(f"{spool_lib.SPOOL_DIR}-skipped-{stamp}")
    spool.clear(keep_bad=result.kept)
    return result
