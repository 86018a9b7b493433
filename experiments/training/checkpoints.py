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
that cannot be written (a full disk) raises `StorageError`, leaving the
previous one in place.

With early stopping, the weights of the best epoch so far are kept beside
them as `best-NNNN.weights.h5` (written before the epoch's `state.json`,
whose `early_stopping.best_epoch` names it and `best_sha256` checks it), so
the final evaluation can use them, after a resume too.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np

from experiments.errors import CorruptData, StorageError
from experiments.tracking import run_folder
from experiments.training import rng_state


def save(folder: Path, model, epoch: int, state: dict) -> Path:
    """Write the checkpoint of a finished `epoch` (0-based) and point `state.json` at it."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"epoch-{epoch:04d}"
    tmp = folder / f".{name}.tmp"
    for stale in folder.glob(".epoch-*.tmp"):  # left by a kill mid-save
        shutil.rmtree(stale, ignore_errors=True)
    try:
        tmp.mkdir()
        model.save_weights(tmp / "model.weights.h5")
        values = {f"v{i:05d}": np.asarray(v) for i, v in enumerate(model.optimizer.variables)}
        np.savez(tmp / "optimizer.npz", **values)
        np.savez(tmp / "rng.npz", **rng_state.capture(model))
        files = {}
        for path in sorted(tmp.iterdir()):
            files[path.name] = _sha256(path)
            _fsync_file(path)
        _fsync_dir(tmp)
        final = folder / name
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        _fsync_dir(folder)
        owner = run_folder.owner(folder)
        record = {**state, "epoch": epoch, "checkpoint": name, "files": files}
        if owner is not None:
            record["run_id"] = owner
        _write_json(folder / "state.json", record)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise StorageError(
            f"cannot write the checkpoint of epoch {epoch + 1} in {folder} ({err}); the previous "
            "checkpoint is kept. Free space there, then resume the run",
            folder,
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
        if _sha256(path) != digest:
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
        model.save_weights(tmp)
        digest = _sha256(tmp)
        _fsync_file(tmp)
        os.replace(tmp, final)
        _fsync_dir(folder)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise StorageError(
            f"cannot write the best epoch's weights {final} ({err}); the previous checkpoint "
            "is kept. Free space there, then resume the run",
            folder,
        ) from err
    return digest


def load_best(folder: Path, model, epoch: int, digest: str | None) -> None:
    """Load the best epoch's weights, refusing them (`CorruptData`) if their bytes changed."""
    path = best_path(folder, epoch)
    if digest is not None and _sha256(path) != digest:
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
    tmp.write_text(json.dumps(data, indent=2, default=float), encoding="utf-8")
    _fsync_file(tmp)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
