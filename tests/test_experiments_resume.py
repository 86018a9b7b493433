"""`resume` after an interruption continues the same run, logging each epoch once."""

from __future__ import annotations

import random
import types

import mlflow
import numpy as np
import pytest
import tensorflow as tf
from experiments_helpers import (
    TINY_TASKS,
    artifact_paths,
    migrated_store,
    run_interrupted_after_checkpoint,
    runs,
    store_uri,
    use_store,
    write_config,
    write_text_dataset,
)

from experiments import config as config_lib
from experiments.commands import main
from experiments.errors import EXIT_CONFIG, ConfigError
from experiments.tasks import build_task, textcls
from experiments.training import datasets, resume
from experiments.training.callbacks import EpochClock

EPOCHS = 2


def _history(uri, run_id, key):
    return mlflow.MlflowClient(uri).get_metric_history(run_id, key)


@pytest.mark.slow
def test_resume_continues_same_run_exactly(tmp_path, monkeypatch):
    uri = migrated_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    config = write_config(
        tmp_path,
        TINY_TASKS["needle"],
        train={"epochs": EPOCHS},
        tracking={"log_model": False},
    )
    # Reference: the same config without interruption.
    assert main(["run", str(config)]) == 0
    (reference,) = runs(uri)

    run_interrupted_after_checkpoint(monkeypatch, config)
    interrupted = runs(uri)[0]
    assert interrupted.info.run_id != reference.info.run_id
    assert interrupted.info.status == "KILLED" and "killed_by" in interrupted.data.tags
    # Epoch 1 was checkpointed but never reached MLflow; resume must log it once.
    assert _history(uri, interrupted.info.run_id, "loss") == []

    assert main(["resume", interrupted.info.run_id]) == 0

    resumed = mlflow.MlflowClient(uri).get_run(interrupted.info.run_id)
    assert resumed.info.status == "FINISHED"
    assert not {"killed_by", "resume_with"} & resumed.data.tags.keys()  # no stale reason
    assert len(runs(uri)) == 2  # no new run was created
    for key in ("loss", "val_loss", "train_accuracy", "val_alignment_accuracy", "epoch_seconds"):
        steps = sorted(m.step for m in _history(uri, resumed.info.run_id, key))
        assert steps == list(range(1, EPOCHS + 1)), (key, steps)
    # Same batches, same optimizer state: the same losses as the uninterrupted run.
    expected = [m.value for m in _history(uri, reference.info.run_id, "loss")]
    got = [
        m.value for m in sorted(_history(uri, resumed.info.run_id, "loss"), key=lambda m: m.step)
    ]
    assert got == pytest.approx(expected, rel=1e-4)


def test_resume_of_finished_or_unknown_run_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri(tmp_path))
    assert main(["resume", "0123456789abcdef0123456789abcdef"]) == 2
    assert "run_id" in capsys.readouterr().err


def test_each_epoch_reseeds_python_and_numpy_but_not_tensorflow():
    # tf.random.set_seed clears TensorFlow's kernel caches: every compiled function
    # (the probe forward, sample generation) was instantiated again after each epoch.
    clock = EpochClock(batches=types.SimpleNamespace(epoch=0), seed=5, tokens_per_epoch=1)
    tf.random.set_seed(123)
    draws = []
    for epoch in (3, 4, 3):
        clock.on_epoch_begin(epoch)
        draws.append((random.random(), float(np.random.random())))
        assert clock.batches.epoch == epoch
        assert tf.compat.v1.random.get_seed(None)[0] == 123  # the global seed is untouched
    assert draws[0] == draws[2] != draws[1]  # the draws depend on (seed, epoch) only


def _interrupted_file_run(tmp_path, monkeypatch):
    """A `textcls` run of a CSV file, Ctrl+C'd after its first checkpointed epoch: (store
    URI, run id, the file)."""
    uri = use_store(tmp_path, monkeypatch)
    data = write_text_dataset(tmp_path)
    config = write_config(
        tmp_path,
        {**TINY_TASKS["textcls"], "path": str(data)},
        train={"epochs": EPOCHS},
        tracking={"log_model": False},
    )
    run_interrupted_after_checkpoint(monkeypatch, config)
    (run,) = runs(uri)
    assert run.info.status == "KILLED"
    return uri, run.info.run_id, data


def _everything(uri, run_id) -> dict:
    """All MLflow holds of a run: info, params, tags, metrics (each history), inputs and
    artifact files."""
    client = mlflow.MlflowClient(uri)
    run = client.get_run(run_id)
    histories = {
        key: [(m.step, m.value, m.timestamp) for m in client.get_metric_history(run_id, key)]
        for key in run.data.metrics
    }
    return {**run.to_dictionary(), "histories": histories, "files": artifact_paths(uri, run_id)}


def test_resume_refuses_a_data_file_changed_since_the_run_read_it(tmp_path, monkeypatch, capsys):
    uri, run_id, data = _interrupted_file_run(tmp_path, monkeypatch)
    logged = datasets.file_digest(data)
    before = _everything(uri, run_id)
    with data.open("a", encoding="utf-8") as handle:
        handle.write("a review written after the kill,good\n")  # a new word, a new vocabulary
    capsys.readouterr()

    assert main(["resume", run_id]) == EXIT_CONFIG

    err = capsys.readouterr().err
    now = datasets.file_digest(data)
    assert f"task.path: {data.resolve()} changed since run {run_id} read it" in err, err
    assert f"SHA-256 {logged} then, {now} now" in err and "Start a new run" in err
    assert err.rstrip().endswith(f"Received: task.path={data.resolve()}")
    assert "Traceback" not in err
    assert _everything(uri, run_id) == before  # no metric, tag, status or artifact


def test_resume_of_an_unchanged_data_file_continues_the_run(tmp_path, monkeypatch):
    uri, run_id, _ = _interrupted_file_run(tmp_path, monkeypatch)

    assert main(["resume", run_id]) == 0

    resumed = mlflow.MlflowClient(uri).get_run(run_id)
    assert resumed.info.status == "FINISHED"
    steps = sorted(m.step for m in _history(uri, run_id, "loss"))
    assert steps == list(range(1, EPOCHS + 1))


def test_resume_refuses_a_vocabulary_the_data_no_longer_gives(tmp_path, monkeypatch, capsys):
    # The same file, tokenized by other rules (as another tokenizer version might): the
    # logged vocabulary is what the checkpoint's embeddings index.
    uri, run_id, _ = _interrupted_file_run(tmp_path, monkeypatch)
    before = _everything(uri, run_id)
    monkeypatch.setattr(textcls, "TOKEN_PATTERN", r"\w")  # characters, not words
    capsys.readouterr()

    assert main(["resume", run_id]) == EXIT_CONFIG

    err = capsys.readouterr().err
    assert f"the vocabulary run {run_id}'s data gives now is not the one it logged" in err, err
    assert "vocab.json: input:" in err and "Start a new run" in err
    assert _everything(uri, run_id) == before


def test_split_files_are_each_checked_by_their_own_digest(tmp_path):
    """pairs' `train_path`, `val_path` and `test_path`: each split's input carries its own
    file's digest and key, and a change to any one file is refused naming its key."""
    folder = tmp_path / "pairs"
    folder.mkdir()
    rows = [f"w{i} x{i}\tv{i}" for i in range(40)]
    files = {}
    for name, part in (("train", rows[:24]), ("val", rows[24:32]), ("test", rows[32:])):
        files[name] = folder / f"{name}.tsv"
        files[name].write_text("source\ttarget\n" + "\n".join(part) + "\n", encoding="utf-8")
    cfg = config_lib.validate(
        {
            "task": {
                "name": "pairs",
                "units": "word",
                "num_probes": 1,
                **{f"{name}_path": str(path) for name, path in files.items()},
            }
        }
    )
    inputs = datasets.dataset_inputs(cfg, build_task(cfg.task))
    logged = datasets.logged_digests(inputs)
    assert logged == {f"task.{n}_path": datasets.file_digest(p) for n, p in files.items()}
    resume._check_files(cfg.task, logged, "r1")  # unchanged: no error
    files["val"].write_text("source\ttarget\nw1 x1\tchanged\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^task\.val_path: .*val\.tsv changed since run r1"):
        resume._check_files(cfg.task, logged, "r1")
    # A run logged before `file_key`: its one digest is task.path's.
    old = [types.SimpleNamespace(tags=[types.SimpleNamespace(key="file_sha256", value="ab")])]
    assert datasets.logged_digests(old) == {"task.path": "ab"}
