"""Resuming: continue an interrupted run from its last checkpoint, in the same MLflow run."""

from __future__ import annotations

from pathlib import Path

import yaml

from experiments import config as config_lib
from experiments.errors import ConfigError, CorruptData
from experiments.tracking import run_folder, store
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
        folder = _checked_folder(run_id, tag)
    except (CorruptData, ConfigError) as err:  # ConfigError: a folder without run.json
        client.set_tag(run_id, "failure_reason", f"resume refused: {err}")  # status unchanged
        raise
    prepared = run.validate(cfg)
    return run.execute(prepared, resume_run_id=run_id, checkpoint_folder=folder)


def _checked_folder(run_id: str, tag: str) -> Path:
    """The run's checkpoint folder, if it is the run's and holds an intact checkpoint."""
    folder = run_folder.verify(Path(tag), run_id, f"run {run_id}'s checkpoint_dir tag")
    state = checkpoints.load_state(folder)
    if state is None:
        raise CorruptData(
            f"run {run_id} has no checkpoint to resume from: {folder / 'state.json'} is "
            "missing, so resuming would train again from epoch 1 into the same run. Start a "
            "new run instead (`python -m experiments run CONFIG`)"
        )
    checkpoints.verify(folder, state, run_id)  # before the run is reopened
    return folder
