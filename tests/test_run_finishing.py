"""Nothing doubled: one process per run, and an interrupted ending resumed logs each thing once (issue 30)."""

from __future__ import annotations

import mlflow
import pytest
from experiments_helpers import (
    TINY_TASKS,
    migrated_store,
    run_interrupted_after_checkpoint,
    runs,
    write_config,
)
from scaleout_helpers import lock_held

from experiments import errors
from experiments.commands import main
from experiments.tracking import finishing, model_logging


def _run_config(tmp_path, **tracking):
    return write_config(
        tmp_path,
        TINY_TASKS["reverse"],
        train={"epochs": 1},
        generate={"max_length": 4},
        tracking={"num_samples": 0, **tracking},
    )


@pytest.mark.slow
def test_ctrl_c_while_logging_the_model_then_resume_logs_everything_once(tmp_path, monkeypatch):
    uri = migrated_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    config = _run_config(tmp_path)
    client = mlflow.MlflowClient(uri)
    original = model_logging.log_text_model

    def interrupted(keras_file, card_file, card):
        run = mlflow.active_run()
        # What an interrupt inside mlflow.pyfunc.log_model leaves: a PENDING logged model.
        client.create_logged_model(
            run.info.experiment_id, name=model_logging.TEXT_MODEL, source_run_id=run.info.run_id
        )
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(model_logging, "log_text_model", interrupted)
        with pytest.raises(KeyboardInterrupt):
            main(["run", str(config)])
    (run,) = runs(uri)
    run_id = run.info.run_id
    assert run.info.status == "KILLED"
    assert model_logging.log_text_model is original
    assert main(["resume", run_id]) == 0

    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    for key in run.data.metrics:
        steps = [m.step for m in client.get_metric_history(run_id, key)]
        assert len(steps) == len(set(steps)), (key, steps)  # no test metric twice
    models = client.search_logged_models(
        [run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'"
    )
    assert sorted((m.name, str(m.status)) for m in models) == [
        ("model", "READY"),
        ("text_model", "READY"),
    ]
    ids = {f"models:/{m.model_id}" for m in models}
    assert {run.data.tags["model_uri"], run.data.tags["text_model_uri"]} == ids


@pytest.mark.slow
def test_a_second_resume_of_a_run_in_use_is_refused(tmp_path, monkeypatch, capsys):
    uri = migrated_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    config = _run_config(tmp_path, log_model=False)
    run_interrupted_after_checkpoint(monkeypatch, config)
    (run,) = runs(uri)
    run_id = run.info.run_id
    folder = run.data.tags["checkpoint_dir"]
    with lock_held(folder, run_id):  # stands for the first `resume`, still training
        assert main(["resume", run_id]) == errors.EXIT_LOCKED
        assert "in use by another live process" in capsys.readouterr().err
        client = mlflow.MlflowClient(uri)
        assert client.get_metric_history(run_id, "loss") == []  # the refused one logged nothing
        assert client.get_run(run_id).info.status == "KILLED"  # and did not reopen the run


def test_a_pending_orphan_is_deleted_when_both_model_tags_are_already_set(tmp_path):
    # The run's models were logged and tagged; a second upload (a `sync` killed in
    # `log_model`) left a PENDING one no tag names. The run keeps exactly its two.
    client = mlflow.MlflowClient(migrated_store(tmp_path))
    experiment = client.create_experiment("finish", artifact_location=tmp_path.as_uri())
    run_id = client.create_run(experiment).info.run_id
    tags = {}
    for key, name in (("model_uri", "model"), ("text_model_uri", "text_model")):
        model = client.create_logged_model(experiment, name=name, source_run_id=run_id)
        client.finalize_logged_model(model.model_id, "READY")
        tags[key] = f"models:/{model.model_id}"
        client.set_tag(run_id, key, tags[key])
    orphan = client.create_logged_model(experiment, name="text_model", source_run_id=run_id)

    assert finishing.logged_models(client, run_id) == tags
    models = client.search_logged_models([experiment], filter_string=f"source_run_id = '{run_id}'")
    assert sorted(f"models:/{m.model_id}" for m in models) == sorted(tags.values())
    assert orphan.model_id not in {m.model_id for m in models}
