"""A run's checkpoint folder: whose it is, and whether a path given for a run is really its folder.

The runner writes `run.json` (`{"run_id": ...}`) into the folder when the
run starts, beside the checkpoints (`epoch-NNNN/`, `state.json`), the spool
(`spool/`) and the lock (`run.lock`). `verify` accepts an existing folder
for a run only when its `run.json` names that run: a folder without one
(written before `run.json` existed, or any folder at all, whatever its
name) is refused as input (exit 2), with the one line that marks it for the
user who knows it is that run's. So `sync`/`resume` never read, upload,
overwrite or delete another run's files, or a folder that is not a
checkpoint folder at all, whether the path came from the command line or
from the run's `checkpoint_dir` tag; every refusal is of the command's input
(`RefusedData` or `ConfigError`, exit 2).

A finished run's folder is deleted (`discard`) by the process that holds its lock, once
nothing in it is still to be uploaded (no `spool/`): at the end of the run unless
`train.keep_checkpoints` is true, or later by `prune`. A run that did not finish (running,
killed, failed) keeps its folder: `resume` continues from it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from experiments.errors import ConfigError, CorruptData, RefusedData
from experiments.tracking.spool import SPOOL_DIR

MARKER = "run.json"


def owner(folder: Path) -> str | None:
    """The run id in the folder's `run.json`, or None when it has none."""
    path = Path(folder) / MARKER
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptData(f'{path}: unreadable ({err}); it should hold {{"run_id": ...}}') from None
    run_id = data.get("run_id") if isinstance(data, dict) else None
    if not isinstance(run_id, str):
        raise CorruptData(f'{path}: no run_id in it; it should hold {{"run_id": ...}}')
    return run_id


def verify(folder: Path, run_id: str, source: str = "--checkpoint-dir") -> Path:
    """`folder` as an absolute path, if it is the checkpoint folder of `run_id` (or absent)."""
    folder = Path(folder)
    if not folder.is_absolute():
        raise RefusedData(f"{source}: {str(folder)!r} is not an absolute path")
    if folder.is_symlink():
        raise RefusedData(
            f"{source}: {folder} is a symbolic link; pass the run's checkpoint folder itself"
        )
    if not folder.exists():
        return folder
    if not folder.is_dir():
        raise RefusedData(f"{source}: {folder} is not a folder")
    try:
        found = owner(folder)
    except CorruptData as err:
        raise RefusedData(f"{source}: {err}") from None
    if found is not None and found != run_id:
        raise RefusedData(
            f"{source}: {folder} holds the checkpoints and spool of run {found}, not of run "
            f"{run_id}; pass run {run_id}'s own folder"
        )
    if found is None:
        raise ConfigError(
            f"{source}: {folder} has no {MARKER} naming run {run_id}, so nothing shows that "
            "the spool and checkpoints in it are that run's; it is refused. If it is run "
            f"{run_id}'s folder (written before {MARKER} existed), mark it first: "
            f'echo \'{{"run_id": "{run_id}"}}\' > {folder / MARKER}'
        )
    return folder


def claim(folder: Path, run_id: str) -> None:
    """Create the folder and its `run.json` for `run_id` (refused if it is another run's)."""
    verify(folder, run_id, "checkpoint folder")
    folder.mkdir(parents=True, exist_ok=True)
    if owner(folder) == run_id:
        return
    path = folder / MARKER
    tmp = path.with_name(MARKER + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"run_id": run_id}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def discard(folder: Path, run_id: str) -> str | None:
    """Delete run `run_id`'s finished checkpoint folder (the caller holds its lock); return
    None, or why it is kept: it is not that run's (`run.json`), or its `spool/` still holds
    records to upload (`sync` needs them)."""
    folder = Path(folder)
    found = owner(folder)
    if found != run_id:
        return f"its {MARKER} names {found or 'no run'}, not run {run_id}"
    if (folder / SPOOL_DIR).exists():
        return f"its spool holds records not uploaded yet (python -m experiments sync {run_id})"
    shutil.rmtree(folder)
    return None
