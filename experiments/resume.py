"""`resume`: continue an interrupted run from its last checkpoint, in the same run."""

from __future__ import annotations

from pathlib import Path

from experiments import config as config_lib
from experiments import tracking, training
from experiments.config import ConfigError


def resume_run(run_id: str) -> str:
    """Reload the run's logged config and checkpoint, then train the remaining epochs."""
    client = tracking.connect()
    run = tracking.get_run(client, run_id)
    if run.info.status == "FINISHED":
        raise ConfigError(f"run_id: run {run_id} already FINISHED; nothing to resume")
    tracker = tracking.Tracker(client, run_id)
    try:
        text = tracker.download_text(tracking.CONFIG_ARTIFACT)
    except Exception as err:  # noqa: BLE001
        raise ConfigError(
            f"run_id: run {run_id} has no {tracking.CONFIG_ARTIFACT} ({err})"
        ) from None
    cfg = config_lib.validate(_safe_yaml(text))
    folder = run.data.tags.get("checkpoint_dir")
    prepared = training.prepare(cfg)
    return training.execute(
        prepared,
        resume_run_id=run_id,
        checkpoint_folder=Path(folder) if folder else None,
    )


def _safe_yaml(text: str) -> dict:
    import yaml

    return yaml.safe_load(text)
