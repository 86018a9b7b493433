"""Resuming: continue an interrupted run from its last checkpoint, in the same MLflow run.

A run that read your files resumes only on the data it trained on: each file's SHA-256 is
compared with the one the run logged (its dataset inputs' `file_sha256` tags) before
anything else is read or built, and the vocabulary the task builds with what the run logged
(`vocab.json`) before the run is reopened. Either refusal is a `ConfigError` (exit 2) and
logs nothing to the run: the checkpoint's weights belong to the logged data.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from experiments import config as config_lib
from experiments.errors import ConfigError, CorruptData, RefusedData
from experiments.tracking import finishing, run_folder, run_lock, store
from experiments.tracking.tracker import CONFIG_ARTIFACT, VOCAB_ARTIFACT, Tracker
from experiments.training import checkpoints, datasets, run

# The command that starts over, as the refusals say it.
NEW_RUN = "python -m experiments run CONFIG"


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
    logged = datasets.logged_digests(found.inputs.dataset_inputs if found.inputs else [])
    _check_files(cfg.task, logged, run_id)  # before anything is built, logged or locked
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
    if datasets.data_files(cfg.task):
        _check_vocabulary(tracker, prepared.task.vocabularies(), run_id)
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


def _check_files(section, logged: dict[str, str], run_id: str) -> None:
    """Refuse (`ConfigError`) a file of the run's task whose SHA-256 is not the one the run
    logged; a file the run logged no digest of (generated data, a run older than the
    digests of split files) is left to `_check_vocabulary`."""
    for key, path in datasets.data_files(section).items():
        if key not in logged:
            continue
        now = datasets.file_digest(path)
        if now != logged[key]:
            raise ConfigError(
                f"{key}: {path} changed since run {run_id} read it (SHA-256 {logged[key]} "
                f"then, {now} now); its checkpoint's weights were trained on the file as it "
                "was, and resuming would build the vocabulary and the splits from the new "
                f"one. Start a new run on the file as it is (`{NEW_RUN}`), or put back the "
                f"file the run read to resume it. Received: {key}={path}"
            )


def _check_vocabulary(tracker: Tracker, built: dict, run_id: str) -> None:
    """Refuse (`ConfigError`) a task whose vocabularies are not the ones the run logged in
    `vocab.json` (e.g. another tokenizer version learnt other units from the same file); a
    run that logged none is left alone."""
    try:
        logged = json.loads(tracker.download_text(VOCAB_ARTIFACT))
    except Exception:  # noqa: BLE001 - not logged (stopped before), or unreadable: no check
        return
    built = json.loads(json.dumps(built, default=str))  # as logged: tuples are lists
    if built == logged:
        return
    changed = sorted(k for k in logged.keys() | built.keys() if logged.get(k) != built.get(k))
    sizes = ", ".join(
        f"{k}: {_size(logged.get(k))} logged, {_size(built.get(k))} now" for k in changed
    )
    raise ConfigError(
        f"run_id: the vocabulary run {run_id}'s data gives now is not the one it logged "
        f"({VOCAB_ARTIFACT}: {sizes}); its checkpoint's weights were trained on the logged "
        f"one. Start a new run (`{NEW_RUN}`). Received: run_id={run_id}"
    )


def _size(part) -> str:
    """How a vocabulary's part is shown: its token count (or its labels' count)."""
    if isinstance(part, dict) and isinstance(part.get("tokens"), list):
        return f"{len(part['tokens'])} tokens"
    return f"{len(part)} entries" if isinstance(part, list) else "none"
