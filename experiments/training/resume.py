"""Resuming: continue an interrupted run from its last checkpoint, in the same MLflow run."""

from __future__ import annotations

from pathlib import Path

import yaml

from experiments import config as config_lib
from experiments.errors import ConfigError, CorruptData, RefusedData
from experiments.tracking import finishing, run_folder, run_lock, store
from experiments.tracking.tracker import CONFIG_ARTIFACT, Tracker
from experiments.training import checkpoints, run


def resume_run(run_id: str) -> str:
    """Reload the run's logged config and checkpoint, then train the remaining epochs."""
    store.check_run_id(run_id)
    client = store.connect()
    found = store.get_run(client, run_id)
    if found.info.status == "FINISHED":
        raise ConfigError(f"run_id: run {run_id} already FINISHED; nothing to resume")
    tracker = Tracker(client, run_id)
    try:
        text = tracker.download_text(CONFIG_ARTIFACT)
    except Exception as err:  # noqa: BLE001
        raise ConfigError(f"run_id: run {run_id} has no {CONFIG_ARTIFACT} ({err})") from None
    cfg = config_lib.validate(yaml.safe_load(text))
    tag = found.data.tags.get("checkpoint_dir")
    if not tag:
        raise ConfigError(f"run_id: run {run_id} has no checkpoint_dir tag; nothing to resume")
    try:
        folder = run_folder.verify(Path(tag), run_id, f"run {run_id}'s checkpoint_dir tag")
    except (CorruptData, ConfigError) as err:  # ConfigError: a folder without run.json
        # Not the run's folder: whether a live process holds the run cannot be told from it.
        client.set_tag(run_id, "failure_reason", f"resume refused: {err}")  # status unchanged
        raise
    try:
        _check_checkpoint(folder, run_id)
    except CorruptData as err:  # refused as the command's input (exit 2), the run ended FAILED
        _end_failed(client, run_id, folder, f"resume refused: {err}")
        raise RefusedData(str(err)) from None
    prepared = run.validate(cfg)
    return run.execute(prepared, resume_run_id=run_id, checkpoint_folder=folder)


def _end_failed(client, run_id: str, folder: Path, reason: str) -> None:
    """End the run FAILED with `reason` in its `failure_reason` tag, dropping the tags of an
    earlier ending (`resume_with` would be refused again), unless another live process holds
    the run (`RunLocked`: the run is left alone). A run whose folder is gone (another
    machine's, say) keeps its status: its lock cannot be checked."""
    if not folder.is_dir():
        client.set_tag(run_id, "failure_reason", reason)
        return
    lock = run_lock.acquire(folder, run_id, "resume it")
    try:
        stale = finishing.stale_tags(client.get_run(run_id).data.tags, "FAILED")
        client.set_tag(run_id, "failure_reason", reason)
        for key in stale:
            client.delete_tag(run_id, key)
        client.set_terminated(run_id, "FAILED")
    finally:
        lock.release()


def _check_checkpoint(folder: Path, run_id: str) -> None:
    """Refuse (`CorruptData`) a folder without an intact checkpoint of the run."""
    state = checkpoints.load_state(folder)
    if state is None:
        raise CorruptData(
            f"run {run_id} has no checkpoint to resume from: {folder / 'state.json'} is "
            "missing, so resuming would train again from epoch 1 into the same run. Start a "
            "new run instead (`python -m experiments run CONFIG`)"
        )
    checkpoints.verify(folder, state, run_id)  # before the run is reopened
