"""Checkpoints reach the disk before they are named, and a full disk costs nothing (issue 30)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from scaleout_helpers import child_env

from experiments.errors import StorageError
from experiments.training import checkpoints


def _model(units: int = 2):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(units)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((4, 3)), np.ones((4, units)), verbose=0)
    return model


@pytest.fixture
def disk(monkeypatch):
    """Every `os.fsync` (by path) and `os.replace`, in order."""
    events = []
    fsync, replace = os.fsync, os.replace

    def record_fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def record_replace(src, dst):
        events.append(("replace", str(src), str(dst)))
        replace(src, dst)

    monkeypatch.setattr(os, "fsync", record_fsync)
    monkeypatch.setattr(os, "replace", record_replace)
    return events


def _at(events, *event) -> int:
    assert event in events, f"{event} not in {events}"
    return events.index(event)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to name an fd")
def test_checkpoint_files_and_folders_are_fsynced_around_each_rename(tmp_path, disk):
    folder = tmp_path / "run"
    folder.mkdir()
    model = _model()
    checkpoints.save(folder, model, 0, {"logs": {}})
    tmp, final = folder / ".epoch-0000.tmp", folder / "epoch-0000"
    renamed = _at(disk, "replace", str(tmp), str(final))
    for name in ("model.weights.h5", "optimizer.npz", "rng.npz"):
        assert _at(disk, "fsync", str(tmp / name)) < renamed  # each file's bytes first
    assert _at(disk, "fsync", str(tmp)) < renamed  # then the folder's entries
    after = disk[renamed:]
    assert ("fsync", str(folder)) in after  # then the rename itself
    state = _at(disk, "replace", str(folder / "state.json.tmp"), str(folder / "state.json"))
    assert _at(disk, "fsync", str(folder / "state.json.tmp")) < state
    assert disk[-1] == ("fsync", str(folder))  # state.json's rename is durable too

    disk.clear()
    checkpoints.save_best(folder, model, 0)
    best = checkpoints.best_path(folder, 0)
    tmp_best = str(best.with_name(f".{best.name}.tmp.weights.h5"))
    renamed = _at(disk, "replace", tmp_best, str(best))
    assert _at(disk, "fsync", tmp_best) < renamed
    assert disk[renamed + 1 :] == [("fsync", str(folder))]


def _full_disk_after(write, nbytes: int = 100):
    """`write(path, ...)` that puts `nbytes` on disk, then fails as a full disk does."""

    def fail(path, *args, **kwargs):
        write(path, *args, **kwargs)
        with open(path, "r+b") as handle:
            handle.truncate(nbytes)
        raise OSError(errno.ENOSPC, "No space left on device")

    return fail


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or "tmp" in p.name)


@pytest.mark.parametrize("failing", ["optimizer.npz", "state.json"])
def test_a_full_disk_mid_checkpoint_gives_one_line_and_keeps_the_previous(
    tmp_path, monkeypatch, failing
):
    folder = tmp_path / "run"
    model = _model()
    checkpoints.save(folder, model, 0, {"logs": {"loss": 1.0}})
    before = (folder / "state.json").read_bytes()
    with monkeypatch.context() as patch:
        if failing == "optimizer.npz":
            patch.setattr(checkpoints.np, "savez", _full_disk_after(np.savez))
        else:
            write_text = type(folder).write_text

            def fail(path, *args, **kwargs):
                if path.name == "state.json.tmp":
                    return _full_disk_after(write_text)(path, *args, **kwargs)
                return write_text(path, *args, **kwargs)

            patch.setattr(type(folder), "write_text", fail)
        with pytest.raises(StorageError) as raised:
            checkpoints.save(folder, model, 1, {"logs": {"loss": 0.5}})
    message = str(raised.value)
    assert "\n" not in message
    assert failing in message and "No space left on device" in message
    assert "Free space" in message and "resume" in message
    assert _leftovers(folder) == []  # no partial file or folder left
    assert sorted(p.name for p in folder.glob("epoch-*")) == ["epoch-0000"]
    assert (folder / "state.json").read_bytes() == before
    state = checkpoints.load_state(folder)
    checkpoints.restore(folder, _model(), state)  # the previous checkpoint is intact


def test_a_full_disk_under_the_best_weights_gives_one_line_and_keeps_the_previous(
    tmp_path, monkeypatch
):
    folder = tmp_path / "run"
    model = _model()
    digest = checkpoints.save_best(folder, model, 0)
    patched = _full_disk_after(model.save_weights)
    monkeypatch.setattr(model, "save_weights", patched)
    with pytest.raises(StorageError) as raised:
        checkpoints.save_best(folder, model, 1)
    message = str(raised.value)
    assert "\n" not in message and "best-0001.weights.h5" in message
    assert "Free space" in message and "resume" in message
    assert sorted(p.name for p in folder.iterdir()) == ["best-0000.weights.h5"]
    checkpoints.load_best(folder, _model(), 0, digest)


FILE_SIZE_LIMIT = r"""
import resource, sys
from pathlib import Path
import keras, numpy as np
from experiments.errors import StorageError
from experiments.training import checkpoints
folder = Path(sys.argv[1])
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64)])
model.compile(optimizer="adam", loss="mse")
model.fit(np.ones((4, 64)), np.ones((4, 64)), verbose=0)
checkpoints.save(folder, model, 0, {"logs": {}})
print(checkpoints.save_best(folder, model, 0))
resource.setrlimit(resource.RLIMIT_FSIZE, (30000, resource.RLIM_INFINITY))
for what in (lambda: checkpoints.save(folder, model, 1, {}), lambda: checkpoints.save_best(folder, model, 1)):
    try:
        what()
        print("written")
    except StorageError as err:
        print("StorageError", err)
"""


@pytest.mark.slow  # a child Python with TensorFlow: ~8 s
@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_checkpoint_too_big_for_the_disk_is_refused_without_crashing_hdf5(tmp_path):
    # A weights file that cannot be written whole makes HDF5 crash the process (SIGSEGV)
    # when Keras closes it: the checkpoint must be refused before HDF5 writes it.
    folder = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMIT, str(folder)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    digest, *lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("StorageError") for line in lines), lines
    assert all("File too large" in line and "resume" in line for line in lines), lines
    assert str(folder / "epoch-0001") in lines[0] and "best-0001.weights.h5" in lines[1]
    assert _leftovers(folder) == []
    assert sorted(p.name for p in folder.iterdir()) == [
        "best-0000.weights.h5",
        "epoch-0000",
        "state.json",
    ]
    state = checkpoints.load_state(folder)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((4, 64)), np.ones((4, 64)), verbose=0)
    checkpoints.restore(folder, model, state)
    checkpoints.load_best(folder, model, 0, digest)
    assert json.loads((folder / "state.json").read_text())["checkpoint"] == "epoch-0000"
