"""`prune`: delete the checkpoint folders of finished runs, as a finished run does itself
unless `train.keep_checkpoints` is true (`run_folder.discard`).

Each folder under the checkpoint root is judged on its own, and deleted only when all of
these hold: its `run.json` names a run of the tracking store; that run ended `FINISHED`
(a running, killed or failed run keeps its folder: `resume` continues from it); the run
did not ask to keep it (`train.keep_checkpoints: true`); nothing in it waits to be
uploaded (no `spool/`); and no live process holds its lock (taken while it is deleted).
Anything else under the root is left alone, and said why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from experiments.errors import CorruptData, RunLocked
from experiments.tracking import run_folder, run_lock


@dataclass
class Outcome:
    """One folder: deleted (or would be, on a dry run), or kept and why."""

    folder: Path
    size: int  # bytes
    kept: str | None  # None: deleted


def prune(client, root: Path, dry_run: bool = False) -> list[Outcome]:
    """Judge (and, unless `dry_run`, delete) every folder under `root`, in name order."""
    outcomes = []
    for folder in sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.is_symlink()):
        size = _size(folder)
        kept = _why_kept(client, folder)
        if kept is None and not dry_run:
            kept = _delete(folder)
        outcomes.append(Outcome(folder, size, kept))
    return outcomes


def _why_kept(client, folder: Path) -> str | None:
    try:
        run_id = run_folder.owner(folder)
    except CorruptData as err:
        return str(err)
    if run_id is None:
        return f"no {run_folder.MARKER}: not a run's checkpoint folder"
    try:
        found = client.get_run(run_id)
    except Exception:  # noqa: BLE001 - MlflowException subclasses vary by store
        return f"run {run_id} is not in this tracking store"
    if found.info.status != "FINISHED":
        return f"run {run_id} is {found.info.status}: resume continues from it"
    if found.data.params.get("train.keep_checkpoints") == "True":
        return f"run {run_id} asked to keep it (train.keep_checkpoints)"
    return None


def _delete(folder: Path) -> str | None:
    run_id = run_folder.owner(folder)
    try:
        lock = run_lock.acquire(folder, run_id, "prune it")
    except RunLocked as err:
        return str(err)
    try:
        return run_folder.discard(folder, run_id)
    except OSError as err:
        return f"it could not be deleted ({err})"
    finally:
        lock.release()


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
