"""A run's folder is its own: checked before `sync`/`resume` use it, locked while in use (issue 30)."""

from __future__ import annotations

import shutil
import time

import mlflow
import pytest
from experiments_helpers import TINY, TINY_TASKS, runs, snapshot, use_store
from scaleout_helpers import lock_held

from experiments import config as config_lib
from experiments import errors
from experiments.commands import main
from experiments.tracking import run_folder
from experiments.tracking import spool as spool_lib
from experiments.tracking.tracker import CONFIG_ARTIFACT


@pytest.fixture
def store(tmp_path, monkeypatch):
    client = mlflow.MlflowClient(use_store(tmp_path, monkeypatch))
    experiment = client.create_experiment("tests", artifact_location=(tmp_path / "art").as_uri())
    return client, experiment, tmp_path


def _spool_with_loss(folder, steps, owner: str | None = None) -> spool_lib.Spool:
    """A spool of `loss` at `steps` in `folder`, marked as run `owner`'s when one is given."""
    if owner is not None:
        run_folder.claim(folder, owner)
    spool = spool_lib.Spool(folder / spool_lib.SPOOL_DIR)
    for step in steps:
        spool.append({"op": "metrics", "metrics": [["loss", 1.0 / step, 0, step]]})
    spool.close()
    return spool


def test_sync_refuses_another_runs_checkpoint_folder(store, capsys):
    client, experiment, tmp_path = store
    run_a = client.create_run(experiment).info.run_id
    run_b = client.create_run(experiment).info.run_id
    folder_a = tmp_path / "ck" / run_a
    _spool_with_loss(folder_a, [1, 2], run_a)
    before = snapshot(folder_a)
    assert main(["sync", run_b, "--checkpoint-dir", str(folder_a)]) == errors.EXIT_CONFIG
    err = capsys.readouterr().err
    assert f"holds the checkpoints and spool of run {run_a}, not of run {run_b}" in err
    assert client.get_metric_history(run_b, "loss") == []  # nothing of A merged into B
    assert snapshot(folder_a) == before  # and A's spool is untouched
    # A folder the runner marked for run A, whatever its name, is refused for B too.
    renamed = tmp_path / "ck" / "renamed"
    folder_a.rename(renamed)
    assert main(["sync", run_b, "--checkpoint-dir", str(renamed)]) == errors.EXIT_CONFIG
    assert f"holds the checkpoints and spool of run {run_a}" in capsys.readouterr().err
    assert main(["sync", run_a, "--checkpoint-dir", str(renamed)]) == 0
    assert sorted(m.step for m in client.get_metric_history(run_a, "loss")) == [1, 2]


def test_a_checkpoint_dir_tag_naming_a_foreign_folder_is_refused(store, capsys):
    client, experiment, tmp_path = store
    run_id = client.create_run(experiment).info.run_id
    victim = tmp_path / "home"  # any folder that happens to hold a `spool/`
    _spool_with_loss(victim, [1])
    (victim / "epoch-0001").mkdir()
    before = snapshot(victim)
    client.set_tag(run_id, "checkpoint_dir", str(victim))
    assert main(["sync", run_id]) == errors.EXIT_CONFIG  # it has no run.json naming the run
    assert "checkpoint_dir tag" in capsys.readouterr().err
    client.log_text(run_id, config_lib.to_yaml(_tiny_config()), CONFIG_ARTIFACT)
    assert main(["resume", run_id]) == errors.EXIT_CONFIG
    assert "checkpoint_dir tag" in capsys.readouterr().err
    assert "run.json" in client.get_run(run_id).data.tags["failure_reason"]
    assert snapshot(victim) == before  # neither uploaded, overwrote nor deleted anything
    assert client.get_metric_history(run_id, "loss") == []
    client.set_tag(run_id, "checkpoint_dir", "relative/" + run_id)
    assert main(["sync", run_id]) == errors.EXIT_CONFIG
    assert "not an absolute path" in capsys.readouterr().err


def test_sync_refuses_a_checkpoint_dir_that_is_a_symlink_to_a_foreign_folder(store, capsys):
    client, experiment, tmp_path = store
    run_id = client.create_run(experiment).info.run_id
    foreign = tmp_path / "elsewhere" / run_id  # the run's folder, reached through a link
    _spool_with_loss(foreign, [1], run_id)
    before = snapshot(foreign)
    link = tmp_path / "ck" / run_id
    link.parent.mkdir()
    link.symlink_to(foreign, target_is_directory=True)
    assert main(["sync", run_id, "--checkpoint-dir", str(link)]) == errors.EXIT_CONFIG
    assert f"{link} is a symbolic link" in capsys.readouterr().err
    relative = link.relative_to(tmp_path)  # the store fixture's working folder
    assert main(["sync", run_id, "--checkpoint-dir", str(relative)]) == errors.EXIT_CONFIG
    assert "is a symbolic link" in capsys.readouterr().err
    assert snapshot(foreign) == before  # nothing uploaded or deleted from it
    assert client.get_metric_history(run_id, "loss") == []
    link.unlink()
    foreign.rename(link)  # the run's own folder, really there: synced
    assert main(["sync", run_id, "--checkpoint-dir", str(relative)]) == 0
    assert [m.step for m in client.get_metric_history(run_id, "loss")] == [1]


def _tiny_config():
    return config_lib.validate({"task": TINY_TASKS["needle"], **TINY})


@pytest.mark.parametrize("ended", ["RUNNING", "KILLED"])  # kill -9, or Ctrl+C / SIGTERM
def test_resume_without_state_json_refuses_and_ends_the_run_failed(store, capsys, ended):
    client, experiment, tmp_path = store
    run_id = client.create_run(experiment).info.run_id
    folder = tmp_path / "ck" / run_id
    run_folder.claim(folder, run_id)
    (folder / "epoch-0000").mkdir()  # a checkpoint whose state.json was lost
    client.set_tag(run_id, "checkpoint_dir", str(folder))
    client.log_text(run_id, config_lib.to_yaml(_tiny_config()), CONFIG_ARTIFACT)
    if ended == "KILLED":
        client.set_tag(run_id, "killed_by", "SIGTERM")
        client.set_tag(run_id, "resume_with", f"python -m experiments resume {run_id}")
        client.set_terminated(run_id, "KILLED")
    with lock_held(folder, run_id) as holder:  # a live process still trains it: left alone
        assert main(["resume", run_id]) == errors.EXIT_LOCKED
        assert f"pid {holder.pid}" in capsys.readouterr().err
        run = client.get_run(run_id)
        assert run.info.status == ended and "failure_reason" not in run.data.tags
    assert main(["resume", run_id]) == errors.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "state.json" in err and "is missing" in err and "new run" in err
    assert client.get_metric_history(run_id, "loss") == []  # no epoch 1 again
    run = client.get_run(run_id)
    assert run.info.status == "FAILED" and run.info.end_time is not None
    assert "resume refused" in run.data.tags["failure_reason"]
    assert "state.json" in run.data.tags["failure_reason"]
    assert not {"killed_by", "resume_with"} & run.data.tags.keys()  # resume would fail again
    assert len(runs(mlflow.get_tracking_uri())) == 1


def test_sync_refuses_while_a_live_process_owns_the_run(store, capsys):
    client, experiment, tmp_path = store
    run_id = client.create_run(experiment).info.run_id
    folder = tmp_path / "ck" / run_id
    _spool_with_loss(folder, [1], run_id)
    with lock_held(folder, run_id) as holder:
        assert main(["sync", run_id, "--checkpoint-dir", str(folder)]) == errors.EXIT_LOCKED
        err = capsys.readouterr().err
        assert f"pid {holder.pid}" in err and "in use by another live process" in err
        assert (folder / "spool" / "journal.jsonl").is_file()
    deadline = time.monotonic() + 10
    while main(["sync", run_id, "--checkpoint-dir", str(folder)]) != 0:  # the lock died with it
        assert time.monotonic() < deadline
    assert [m.step for m in client.get_metric_history(run_id, "loss")] == [1]


def test_sync_refuses_a_folder_named_after_the_run_without_its_marker(store, capsys):
    # Issue 43, item 4: run C's spool in a folder named after run E, with no run.json, went
    # into run E (its records, and files over E's own artifacts of the same name).
    client, experiment, tmp_path = store
    run_c = client.create_run(experiment).info.run_id
    run_e = client.create_run(experiment).info.run_id
    spool_c = _spool_with_loss(tmp_path / "ck" / run_c, [1, 2, 3], run_c)
    folder_e = tmp_path / "ck" / run_e
    shutil.copytree(spool_c.folder, folder_e / spool_lib.SPOOL_DIR)  # no run.json beside it
    before = snapshot(folder_e)
    assert main(["sync", run_e, "--checkpoint-dir", str(folder_e)]) == errors.EXIT_CONFIG
    err = capsys.readouterr().err
    assert f"--checkpoint-dir: {folder_e} has no run.json naming run {run_e}" in err
    assert f'{{"run_id": "{run_e}"}}' in err  # how to mark it, if it really is run E's
    client.set_tag(run_e, "checkpoint_dir", str(folder_e))
    assert main(["sync", run_e]) == errors.EXIT_CONFIG  # the same from the run's own tag
    assert f"checkpoint_dir tag: {folder_e} has no run.json" in capsys.readouterr().err
    assert client.get_metric_history(run_e, "loss") == []  # nothing of C went into E
    assert snapshot(folder_e) == before  # and the spool was neither uploaded nor deleted


def test_sync_of_a_checkpoint_dir_that_is_not_there_or_holds_no_spool_exits_2(store, capsys):
    # Issue 43, item 4: a mistyped path printed "uploaded 0 spooled record(s); spool empty", 0.
    client, experiment, tmp_path = store
    run_id = client.create_run(experiment).info.run_id
    assert main(["sync", run_id, "--checkpoint-dir", "no/such/folder"]) == errors.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "--checkpoint-dir: 'no/such/folder'" in err and "does not exist" in err
    assert str(tmp_path / "no" / "such" / "folder") in err  # where it was looked for
    folder = tmp_path / "ck" / run_id
    run_folder.claim(folder, run_id)  # the run's own folder, with nothing spooled in it
    assert main(["sync", run_id, "--checkpoint-dir", str(folder)]) == errors.EXIT_CONFIG
    err = capsys.readouterr().err
    assert f"{folder / spool_lib.SPOOL_DIR / 'journal.jsonl'} does not exist" in err
    assert "nothing of run" in err
    assert not (folder / spool_lib.SPOOL_DIR).exists()
