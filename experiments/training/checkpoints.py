"""Atomic per-epoch checkpoints of model weights, optimizer state and run state.

Layout under `<root>/<run_id>/`: `epoch-NNNN/` folders holding
`model.weights.h5` and `optimizer.npz`, and `state.json` naming the latest
complete one. A folder is written under a temporary name and renamed into
place, then `state.json` is replaced atomically, so an interruption at any
moment leaves the previous checkpoint intact.

With early stopping, the weights of the best epoch so far are kept beside
them as `best-NNNN.weights.h5` (written before the epoch's `state.json`,
whose `early_stopping.best_epoch` names it), so the final evaluation can
use them, after a resume too.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from experiments.training import rng_state


def save(folder: Path, model, epoch: int, state: dict) -> Path:
    """Write the checkpoint of a finished `epoch` (0-based) and point `state.json` at it."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"epoch-{epoch:04d}"
    tmp = folder / f".{name}.tmp"
    for stale in folder.glob(".epoch-*.tmp"):  # left by a kill mid-save
        shutil.rmtree(stale, ignore_errors=True)
    tmp.mkdir()
    model.save_weights(tmp / "model.weights.h5")
    values = {f"v{i:05d}": np.asarray(v) for i, v in enumerate(model.optimizer.variables)}
    np.savez(tmp / "optimizer.npz", **values)
    np.savez(tmp / "rng.npz", **rng_state.capture(model))
    final = folder / name
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    _write_json(folder / "state.json", {**state, "epoch": epoch, "checkpoint": name})
    for old in folder.glob("epoch-*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)
    return final


def load_state(folder: Path) -> dict | None:
    """The saved run state (with `epoch` and `checkpoint`), or None when there is none."""
    path = folder / "state.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def restore(folder: Path, model, state: dict) -> None:
    """Load weights and optimizer variables into a built, compiled `model`."""
    checkpoint = folder / state["checkpoint"]
    if not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
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


def save_best(folder: Path, model, epoch: int) -> None:
    """Keep `model`'s weights as those of the best epoch `epoch`, atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    final = best_path(folder, epoch)
    tmp = final.with_name(f".{final.name}.tmp.weights.h5")  # Keras wants the suffix
    model.save_weights(tmp)
    os.replace(tmp, final)


def prune_best(folder: Path, epoch: int) -> None:
    """Delete the best-epoch weights of every epoch but `epoch`."""
    keep = best_path(folder, epoch).name
    for old in folder.glob("best-*.weights.h5"):
        if old.name != keep:
            old.unlink(missing_ok=True)


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=float), encoding="utf-8")
    os.replace(tmp, path)
