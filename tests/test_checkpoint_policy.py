"""Checkpoint folders: a finished run deletes its own unless `train.keep_checkpoints` is true;
a run that did not finish keeps it for `resume`; `prune` deletes finished runs' folders
later, and nothing else (not a killed run's, not one a live process holds, not one with a
spool left to upload, not a folder the runner cannot tell is a run's)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import keras
import mlflow
import pytest
from experiments_helpers import TINY_TASKS, runs, use_store, write_config

from experiments import config as config_lib
from experiments.commands import main
from experiments.tracking import run_folder
from experiments.training import run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path, monkeypatch):
    return use_store(tmp_path, monkeypatch)


def _checkpoints(tmp_path) -> Path:
    return tmp_path / "mlruns" / "checkpoints"


@pytest.mark.parametrize("keep", [False, True])
def test_a_finished_run_deletes_its_checkpoint_folder_unless_asked_to_keep_it(
    store, tmp_path, keep
):
    config = write_config(
        tmp_path,
        TINY_TASKS["reverse"],
        train={"keep_checkpoints": keep},
        tracking={"log_model": False, "system_metrics": False},
    )
    assert main(["run", str(config)]) == 0
    (finished,) = runs(store)
    assert finished.info.status == "FINISHED"
    folder = Path(finished.data.tags["checkpoint_dir"])
    assert folder.parent == _checkpoints(tmp_path)
    if keep:
        assert (folder / "state.json").is_file() and run_folder.owner(
            folder
        ) == finished.info.run_id
    else:
        assert not folder.exists()


class _Interrupt(keras.callbacks.Callback):
    """Ctrl+C after the first epoch's checkpoint."""

    def on_epoch_end(self, epoch, logs=None):
        raise KeyboardInterrupt


def test_a_killed_run_keeps_its_checkpoint_folder_for_resume(store, tmp_path):
    config = write_config(
        tmp_path,
        TINY_TASKS["reverse"],
        train={"epochs": 2},
        tracking={"log_model": False, "system_metrics": False},
    )
    prepared = run.validate(config_lib.load_config(config))
    with pytest.raises(KeyboardInterrupt):
        run.execute(prepared, callbacks=(_Interrupt(),))
    (killed,) = runs(store)
    assert killed.info.status == "KILLED"
    folder = Path(killed.data.tags["checkpoint_dir"])
    assert (folder / "state.json").is_file()  # resume continues from it

    assert main(["prune"]) == 0  # and prune leaves it too
    assert (folder / "state.json").is_file()


def _folder(root: Path, run_id: str, size: int = 1000) -> Path:
    folder = root / run_id
    run_folder.claim(folder, run_id)
    (folder / "epoch-0000").mkdir()
    (folder / "epoch-0000" / "model.weights.h5").write_bytes(b"w" * size)
    return folder


def _run(client, experiment_id: str, status: str, **params) -> str:
    run_id = client.create_run(experiment_id).info.run_id
    for key, value in params.items():
        client.log_param(run_id, key, value)
    if status != "RUNNING":
        client.set_terminated(run_id, status)
    return run_id


HOLD = """
import sys, time
from experiments.tracking import run_lock
lock = run_lock.acquire(sys.argv[1], sys.argv[2], "hold it")
print("held", flush=True)
time.sleep(600)
"""


def test_prune_deletes_only_finished_runs_folders_that_nothing_needs(store, tmp_path, capsys):
    client = mlflow.MlflowClient(store)
    experiment_id = client.create_experiment("tests")
    root = tmp_path / "ckpt"
    root.mkdir()
    finished = _folder(root, _run(client, experiment_id, "FINISHED"), size=2_000_000)
    kept = {
        "killed": _folder(root, _run(client, experiment_id, "KILLED")),
        "failed": _folder(root, _run(client, experiment_id, "FAILED")),
        "running": _folder(root, _run(client, experiment_id, "RUNNING")),
        "asked": _folder(
            root, _run(client, experiment_id, "FINISHED", **{"train.keep_checkpoints": "True"})
        ),
        "spooled": _folder(root, _run(client, experiment_id, "FINISHED")),
        "locked": _folder(root, _run(client, experiment_id, "FINISHED")),
        "elsewhere": _folder(root, "0123456789abcdef0123456789abcdef"),  # not in this store
        "unmarked": root / "notes",
    }
    (kept["spooled"] / "spool").mkdir()
    kept["unmarked"].mkdir()
    (kept["unmarked"] / "x.txt").write_text("mine")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(kept["locked"]), kept["locked"].name],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"

        assert main(["prune", "--checkpoint-dir", str(root), "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert f"would delete {finished} (2.0 MB)" in out
        assert finished.is_dir()  # a dry run deletes nothing

        assert main(["prune", "--checkpoint-dir", str(root)]) == 0
        out = capsys.readouterr().out
    finally:
        holder.kill()
        holder.wait()
    assert not finished.exists()
    assert f"deleted {finished} (2.0 MB)" in out
    assert "deleted 1 folder(s), 2.0 MB; kept 8" in out
    for what, folder in kept.items():
        assert folder.is_dir(), what
    reasons = {
        "killed": "is KILLED: resume continues from it",
        "failed": "is FAILED: resume continues from it",
        "running": "is RUNNING: resume continues from it",
        "asked": "asked to keep it (train.keep_checkpoints)",
        "spooled": "its spool holds records not uploaded yet",
        "locked": f"in use by another live process (pid {holder.pid}",
        "elsewhere": "is not in this tracking store",
        "unmarked": "no run.json: not a run's checkpoint folder",
    }
    for what, reason in reasons.items():
        (line,) = [line for line in out.splitlines() if line.startswith(f"kept {kept[what]}:")]
        assert reason in line, (what, line)


def test_prune_of_a_folder_that_does_not_exist_exits_2(store, tmp_path, capsys):
    assert main(["prune", "--checkpoint-dir", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "--checkpoint-dir" in err and "nope" in err


def test_the_lock_of_a_deleted_folder_was_held_while_it_went(store, tmp_path, monkeypatch):
    # `prune` takes the run's lock before deleting: a live holder is never raced.
    client = mlflow.MlflowClient(store)
    experiment_id = client.create_experiment("tests")
    root = tmp_path / "ckpt"
    root.mkdir()
    folder = _folder(root, _run(client, experiment_id, "FINISHED"))
    seen = []
    real = run_folder.discard

    def watched(path, run_id):
        probe = subprocess.run(
            [sys.executable, "-c", HOLD, str(path), run_id],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        seen.append(probe.returncode != 0 and "in use by another live process" in probe.stderr)
        return real(path, run_id)

    monkeypatch.setattr(run_folder, "discard", watched)
    started = time.monotonic()
    assert main(["prune", "--checkpoint-dir", str(root)]) == 0
    assert seen == [True] and not folder.exists(), time.monotonic() - started
