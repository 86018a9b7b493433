"""Atomic per-epoch checkpoints of model weights, optimizer state and run state.

Layout under `<root>/<run_id>/`: `epoch-NNNN/` folders holding
`model.weights.h5` and `optimizer.npz`, and `state.json` naming the latest
complete one. A folder is written under a temporary name, its files and
the folder fsync'ed, renamed into place (the parent fsync'ed too), then
`state.json` is replaced the same way, so an interruption or a power loss at
any moment leaves the previous checkpoint intact.

`state.json` carries the run id (from the folder's `run.json`) and the
sha256 of every file of its checkpoint; `restore` checks both and refuses
(`CorruptData`, one line naming the file) a checkpoint of another run or one
whose bytes changed, as it does an unreadable `state.json`. A checkpoint
that cannot be written (a full disk) raises `StorageError` (one line naming
the file), leaving the previous one in place and no partial file behind; a
`.weights.h5` that would not fit is refused before HDF5 writes it (HDF5
crashes the process when such a write fails).

With early stopping, the weights of the best epoch so far are kept beside
them as `best-NNNN.weights.h5` (written before the epoch's `state.json`,
whose `early_stopping.best_epoch` names it and `best_sha256` checks it), so
the final evaluation can use them, after a resume too.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np

from experiments.errors import CorruptData, StorageError
from experiments.tracking import run_folder
from experiments.tracking.journal import fsync_dir as _fsync_dir
from experiments.training import rng_state
from experiments.training.datasets import file_digest

try:
    import resource
except ImportError:  # not on Windows
    resource = None


def save(folder: Path, model, epoch: int, state: dict) -> Path:
    """Write the checkpoint of a finished `epoch` (0-based) and point `state.json` at it."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"epoch-{epoch:04d}"
    tmp = folder / f".{name}.tmp"
    final = folder / name
    for stale in folder.glob(".epoch-*.tmp"):  # left by a kill mid-save
        shutil.rmtree(stale, ignore_errors=True)
    writing = final
    try:
        _check_room(folder, model, copies=2)  # the .weights.h5, then optimizer.npz
        tmp.mkdir()
        writing = tmp / "model.weights.h5"
        model.save_weights(writing)
        writing = tmp / "optimizer.npz"
        values = {f"v{i:05d}": np.asarray(v) for i, v in enumerate(model.optimizer.variables)}
        np.savez(writing, **values)
        writing = tmp / "rng.npz"
        np.savez(writing, **rng_state.capture(model))
        files = {}
        for path in sorted(tmp.iterdir()):
            writing = path
            files[path.name] = file_digest(path)
            _fsync_file(path)
        writing = tmp
        _fsync_dir(tmp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        _fsync_dir(folder)
        owner = run_folder.owner(folder)
        record = {**state, "epoch": epoch, "checkpoint": name, "files": files}
        if owner is not None:
            record["run_id"] = owner
        writing = folder / "state.json"
        _write_json(writing, record)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if _state_names(folder) != name:  # renamed into place, but state.json never named it
            shutil.rmtree(final, ignore_errors=True)
        raise StorageError(
            f"cannot write {writing}, the checkpoint of epoch {epoch + 1} ({_reason(err)}); "
            "the previous checkpoint is kept. Free space there, then resume the run",
            writing,
        ) from err
    for old in folder.glob("epoch-*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)
    return final


def load_state(folder: Path) -> dict | None:
    """The saved run state (with `epoch` and `checkpoint`), or None when there is none."""
    path = folder / "state.json"
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptData(
            f"checkpoint state {path} is unreadable ({err}); the checkpoint cannot be trusted: "
            "start a new run (or restore the file from a backup)"
        ) from None
    if not (
        isinstance(state, dict)
        and isinstance(state.get("epoch"), int)
        and isinstance(state.get("checkpoint"), str)
        and state["checkpoint"].startswith("epoch-")
        and "/" not in state["checkpoint"]
    ):
        raise CorruptData(f"checkpoint state {path} is malformed (no epoch/checkpoint in it)")
    return state


def verify(folder: Path, state: dict, run_id: str | None = None) -> Path:
    """The checkpoint folder `state` names, if it is `run_id`'s and its files are intact."""
    checkpoint = folder / state["checkpoint"]
    owner = state.get("run_id")
    if run_id is not None and owner is not None and owner != run_id:
        raise CorruptData(
            f"checkpoint {checkpoint} belongs to run {owner}, not to run {run_id}; it is refused"
        )
    for name, digest in (state.get("files") or {}).items():
        path = checkpoint / name
        if "/" in name or not path.is_file():
            raise CorruptData(f"checkpoint file {path} is missing; the checkpoint is refused")
        if file_digest(path) != digest:
            raise CorruptData(
                f"checkpoint file {path} is damaged (its sha256 is not the one recorded in "
                f"{folder / 'state.json'}); the checkpoint is refused: start a new run"
            )
    return checkpoint


def restore(folder: Path, model, state: dict, run_id: str | None = None) -> None:
    """Check (`verify`), then load weights and optimizer variables into a built, compiled `model`."""
    checkpoint = verify(folder, state, run_id)
    if not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    try:
        _restore(checkpoint, model)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:  # h5py, a damaged .npz
        raise CorruptData(
            f"checkpoint {checkpoint} cannot be read ({type(err).__name__}: {err}); "
            "the checkpoint is refused: start a new run"
        ) from None


def _restore(checkpoint: Path, model) -> None:
    model.load_weights(checkpoint / "model.weights.h5")
    with np.load(checkpoint / "optimizer.npz") as saved:
        values = [saved[k] for k in sorted(saved.files)]
    variables = model.optimizer.variables
    if len(values) != len(variables):
        raise RuntimeError(
            f"checkpoint {checkpoint} holds {len(values)} optimizer variables, "
            f"the model's optimizer has {len(variables)}"
        )
    for variable, value in zip(variables, values):
        variable.assign(value)
    if (checkpoint / "rng.npz").is_file():
        with np.load(checkpoint / "rng.npz") as saved:
            rng_state.restore(model, saved)


def best_path(folder: Path, epoch: int) -> Path:
    """The file holding the weights of the best epoch `epoch` (0-based)."""
    return folder / f"best-{epoch:04d}.weights.h5"


def save_best(folder: Path, model, epoch: int) -> str:
    """Keep `model`'s weights as those of the best epoch `epoch`, atomically and fsync'ed;
    returns their sha256 (the run state records it, `load_best` checks it)."""
    folder.mkdir(parents=True, exist_ok=True)
    final = best_path(folder, epoch)
    tmp = final.with_name(f".{final.name}.tmp.weights.h5")  # Keras wants the suffix
    try:
        _check_room(folder, model, copies=1)
        model.save_weights(tmp)
        digest = file_digest(tmp)
        _fsync_file(tmp)
        os.replace(tmp, final)
        _fsync_dir(folder)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise StorageError(
            f"cannot write the best epoch's weights {final} ({_reason(err)}); the previous "
            "checkpoint is kept. Free space there, then resume the run",
            final,
        ) from err
    return digest


def load_best(folder: Path, model, epoch: int, digest: str | None) -> None:
    """Load the best epoch's weights, refusing them (`CorruptData`) if their bytes changed."""
    path = best_path(folder, epoch)
    if digest is not None and file_digest(path) != digest:
        raise CorruptData(
            f"the best epoch's weights {path} are damaged (their sha256 is not the one recorded "
            f"in {folder / 'state.json'}); they are refused: start a new run"
        )
    try:
        model.load_weights(path)
    except (OSError, ValueError) as err:
        raise CorruptData(f"the best epoch's weights {path} cannot be read ({err})") from None


def prune_best(folder: Path, epoch: int) -> None:
    """Delete the best-epoch weights of every epoch but `epoch`."""
    keep = best_path(folder, epoch).name
    for old in folder.glob("best-*.weights.h5"):
        if old.name != keep:
            old.unlink(missing_ok=True)


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, default=float), encoding="utf-8")
        _fsync_file(tmp)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _state_names(folder: Path) -> str | None:
    """The checkpoint `state.json` names, or None (no state, or unreadable)."""
    try:
        return json.loads((folder / "state.json").read_text(encoding="utf-8")).get("checkpoint")
    except (OSError, ValueError, AttributeError):
        return None


# HDF5 (h5py 3.14) crashes the process (SIGSEGV in `File.close`) when a write of a
# `.weights.h5` fails, so a full disk is found before Keras writes one: room for the
# variables' bytes, `ROOM_PER_VARIABLE` of HDF5 metadata each, and `ROOM_SLACK`.
ROOM_PER_VARIABLE = 4096
ROOM_SLACK = 1 << 20


class NoRoom(OSError):
    """The checkpoint was not started: it would not fit."""


def _check_room(folder: Path, model, copies: int) -> None:
    """Raise `OSError` (ENOSPC, or EFBIG for the file-size limit) if a checkpoint cannot fit."""
    variables = list(model.weights) + list(getattr(model.optimizer, "variables", []))
    one = sum(_nbytes(v) + ROOM_PER_VARIABLE for v in variables) + ROOM_SLACK
    free = shutil.disk_usage(folder).free
    if free < copies * one:
        raise NoRoom(errno.ENOSPC, f"{free} bytes free, about {copies * one} needed")
    limit = _file_size_limit()
    if limit is not None and limit < one:
        raise NoRoom(errno.EFBIG, f"files are limited to {limit} bytes, about {one} needed")


def _nbytes(variable) -> int:
    digits = re.search(r"\d+$", str(variable.dtype))
    return math.prod(variable.shape) * (int(digits.group()) // 8 if digits else 1)


def _file_size_limit() -> int | None:
    if resource is None:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def _reason(err: OSError) -> str:
    """`err` in one short line: "No space left on device" rather than HDF5's whole report."""
    if isinstance(err, NoRoom):
        return f"{os.strerror(err.errno)}: {err.strerror}"
    if err.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return os.strerror(err.errno)
    return " ".join(str(err).split())


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
