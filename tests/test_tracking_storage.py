"""A full local tracking store is a storage error, not a server that went away (issue 30, 43)."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import mlflow
import pytest
import sqlalchemy
from experiments_helpers import TINY_TASKS, runs, use_store, write_config
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import TEMPORARILY_UNAVAILABLE

from experiments import errors
from experiments.commands import main
from experiments.errors import StorageError
from experiments.tracking import resilient, transient


def _as_mlflow_raises_it(run):
    """What MLflow's SQL store raises for an `OperationalError` (`make_managed_session`)."""
    try:
        run()
    except sqlalchemy.exc.OperationalError as err:
        raise MlflowException(message=err, error_code=TEMPORARILY_UNAVAILABLE) from err


def _fill(tmp_path):
    """A real SQLite "database or disk is full": a database capped at a few pages."""
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'full.db'}")
    with engine.begin() as db:
        db.exec_driver_sql("CREATE TABLE metrics (value BLOB)")
    with engine.begin() as db:
        db.exec_driver_sql("PRAGMA max_page_count = 4")
        for _ in range(100):
            db.exec_driver_sql("INSERT INTO metrics VALUES (zeroblob(4096))")


def _lock(tmp_path):
    """A real SQLite "database is locked": another connection holds the write lock."""
    path = tmp_path / "busy.db"
    holder = sqlalchemy.create_engine(f"sqlite:///{path}").connect()
    holder.exec_driver_sql("CREATE TABLE t (x)")
    holder.commit()
    holder.exec_driver_sql("BEGIN EXCLUSIVE")
    other = sqlalchemy.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0})
    try:
        with other.begin() as db:
            db.exec_driver_sql("INSERT INTO t VALUES (1)")
    finally:
        holder.close()


def _raised(run) -> BaseException:
    with pytest.raises(MlflowException) as raised:
        _as_mlflow_raises_it(run)
    return raised.value


def test_a_full_sqlite_store_is_a_storage_error_and_a_locked_one_stays_transient(tmp_path):
    full = _raised(lambda: _fill(tmp_path))
    assert transient.storage_failure(full) is not None
    assert not transient.is_transient(full)  # not "server not answering": nothing spooled
    busy = _raised(lambda: _lock(tmp_path))
    assert transient.storage_failure(busy) is None
    assert transient.is_transient(busy)  # a locked store is busy: retried, then spooled


def test_a_full_store_fails_the_call_with_one_clear_line(tmp_path, monkeypatch, capsys):
    full = _raised(lambda: _fill(tmp_path))
    sleeps = []
    monkeypatch.setattr(resilient.time, "sleep", sleeps.append)
    link = resilient.Link(attempts=3, cooldown=60)

    def log():
        raise full

    with pytest.raises(StorageError) as raised:
        link.call(log)
    message = str(raised.value)
    assert "database or disk is full" in message and "free space" in message
    assert "resume" in message and "\n" not in message
    assert sleeps == [] and link.offline_until == 0.0  # not retried, not marked offline
    assert "not answering" not in capsys.readouterr().err


def test_a_full_disk_under_an_artifact_names_the_file():
    err = OSError(errno.ENOSPC, "No space left on device", "/store/artifacts/loss.png")
    with pytest.raises(StorageError, match=r"/store/artifacts/loss\.png: No space left on dev"):
        resilient.Link().call(lambda: (_ for _ in ()).throw(err))


@pytest.mark.slow
def test_a_full_artifact_disk_names_the_store_and_leaves_neither_model(
    tmp_path, monkeypatch, capsys
):
    uri = use_store(tmp_path, monkeypatch)
    root = tmp_path / "mlruns" / "artifacts"  # the runner's experiment keeps them there
    config = write_config(tmp_path, TINY_TASKS["reverse"], generate={"max_length": 4})
    copyfile = shutil.copyfile

    def full_from_the_text_models_code(src, dst, *args, **kwargs):
        # The disk fills up as the text model's code is copied in (the Keras-flavor model
        # is in already). The kernel refuses the write, and shutil names both files: the
        # one it read (in a temporary folder) and the one it wrote.
        if Path(dst).is_relative_to(root) and "code" in Path(dst).relative_to(root).parts:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(src), None, str(dst))
        return copyfile(src, dst, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", full_from_the_text_models_code)
    assert main(["run", str(config)]) == errors.EXIT_RUN_FAILED
    err = capsys.readouterr().err
    assert f"the artifact store {root} is full; {root}/models/" in err
    assert "free space there" in err and "Traceback" not in err
    (run,) = runs(uri)
    assert run.info.status == "FAILED"
    assert f"the artifact store {root} is full" in run.data.tags["failure_reason"]
    models = mlflow.MlflowClient(uri).search_logged_models(
        [run.info.experiment_id], filter_string=f"source_run_id = '{run.info.run_id}'"
    )
    assert models == []  # neither model: never a READY `model` beside a failed `text_model`
    assert not {"model_uri", "text_model_uri"} & run.data.tags.keys()
