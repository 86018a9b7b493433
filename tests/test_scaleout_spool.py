"""Retry, spool and replay of tracking calls, without a server (fast; issue 7, outage logic)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import mlflow
import pytest
import requests
from experiments_helpers import TINY, TINY_TASKS, migrated_store, store_uri
from mlflow.exceptions import MlflowException, RestException
from mlflow.protos.databricks_pb2 import (
    INVALID_PARAMETER_VALUE,
    RESOURCE_DOES_NOT_EXIST,
    TEMPORARILY_UNAVAILABLE,
)
from scaleout_helpers import child_env, free_port

from experiments import config as config_lib
from experiments.data.vocab import END, START
from experiments.errors import ConfigError, Offline, TrackingUnavailable
from experiments.tracking import model_logging, resilient, server
from experiments.tracking import spool as spool_lib
from experiments.tracking.sync import sync_run
from experiments.tracking.tracker import ARTIFACT_THREAD, Tracker
from experiments.tracking.transient import is_transient
from experiments.training import run as training_run
from keras_attn_rnn import generation


class Flaky:
    """An MlflowClient whose calls fail with ConnectionError while `down` is set."""

    def __init__(self, client):
        self.client, self.down, self.calls = client, False, 0

    def __getattr__(self, name):
        target = getattr(self.client, name)

        def call(*args, **kwargs):
            self.calls += 1
            if self.down:
                raise ConnectionError("server down")
            return target(*args, **kwargs)

        return call


@pytest.fixture
def store(tmp_path):
    uri = migrated_store(tmp_path)
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("spool", artifact_location=(tmp_path / "art").as_uri())
    run = client.create_run(experiment)
    return client, run.info.run_id, tmp_path


def test_link_retries_with_backoff_then_stays_offline(monkeypatch):
    sleeps = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    link = resilient.Link(attempts=3, backoff=0.5, cooldown=60)
    calls = []

    def failing():
        calls.append(1)
        raise ConnectionError("refused")

    with pytest.raises(Offline):
        link.call(failing)
    assert len(calls) == 3 and sleeps == [0.5, 1.0]
    with pytest.raises(Offline):
        link.call(failing)  # offline: fails at once, no new attempt
    assert len(calls) == 3
    with pytest.raises(TypeError):  # a bug is not an outage: never spooled
        resilient.Link().call(lambda: (_ for _ in ()).throw(TypeError("bug")))


def test_outage_is_spooled_and_replayed_exactly_once(store, monkeypatch):
    client, run_id, folder = store
    monkeypatch.setattr(time, "sleep", lambda s: None)
    flaky = Flaky(client)
    tracker = resilient.ResilientTracker(flaky, run_id, folder / "ck", resilient.Link(cooldown=0))
    tracker.log_metrics({"loss": 1.0}, 1)
    flaky.down = True
    tracker.log_metrics({"loss": 0.5, "val_loss": 0.7}, 2)
    tracker.log_metrics({"loss": 0.25}, 3)
    tracker.set_tags({"phase": "outage"})
    tracker.log_text("hello", "notes/hello.txt")
    tracker.log_dict({"a": 1}, "data/a.json")
    tracker.log_params({"lr": 0.1})
    assert tracker.logged_steps("loss") == {1, 2, 3}  # from memory and the spool
    # The server got step 3 but the answer was lost: it is both there and spooled.
    client.log_metric(run_id, "loss", 0.25, step=3)
    flaky.down = False
    assert tracker.flush()
    history = sorted(m.step for m in client.get_metric_history(run_id, "loss"))
    assert history == [1, 2, 3]
    assert [m.step for m in client.get_metric_history(run_id, "val_loss")] == [2]
    run = client.get_run(run_id)
    assert run.data.tags["phase"] == "outage" and run.data.params["lr"] == "0.1"
    paths = {a.path for a in client.list_artifacts(run_id, "notes")}
    assert paths == {"notes/hello.txt"}
    assert not tracker.spool.folder.exists()


def test_replay_is_idempotent_after_a_crash_mid_sync(store):
    client, run_id, folder = store
    spool = spool_lib.Spool(folder / "spool")
    spool.append({"op": "metrics", "metrics": [["loss", 1.0, 0, 1], ["loss", 0.5, 0, 2]]})
    spool.append({"op": "tags", "tags": {"k": "v"}})
    with open(spool.journal, "a", encoding="utf-8") as handle:
        handle.write('{"seq": 2, "op": "metr')  # torn by a kill: ignored
    assert [r["seq"] for r in spool.records()] == [0, 1]
    client.log_metric(run_id, "loss", 1.0, step=1)  # uploaded before the crash, not marked
    assert spool_lib.replay(spool, client, run_id) == 2
    assert spool_lib.replay(spool, client, run_id) == 0
    assert sorted(m.step for m in client.get_metric_history(run_id, "loss")) == [1, 2]


def test_end_run_spools_the_status_when_the_server_is_gone(store, monkeypatch):
    client, run_id, folder = store
    monkeypatch.setattr(time, "sleep", lambda s: None)
    flaky = Flaky(client)
    tracker = resilient.ResilientTracker(flaky, run_id, folder / "ck", resilient.Link(cooldown=0))
    mlflow.set_tracking_uri(store_uri(folder))
    mlflow.start_run(run_id=run_id)
    flaky.down = True
    monkeypatch.setattr(mlflow.MlflowClient, "set_terminated", _refuse)
    resilient.end_run(tracker, "FINISHED")
    assert mlflow.active_run() is None
    monkeypatch.undo()
    assert [r["op"] for r in tracker.spool.pending()] == ["status"]
    flaky.down = False
    assert tracker.flush()
    assert client.get_run(run_id).info.status == "FINISHED"


def _refuse(self, *args, **kwargs):
    raise ConnectionError("server down")


def test_check_server_only_checks_http_and_fails_fast():
    server.check_server("sqlite:///x.db", timeout=0.1)  # local stores are not checked
    started = time.monotonic()
    with pytest.raises(TrackingUnavailable, match="did not answer within 0.5 s"):
        server.check_server("http://127.0.0.1:9", timeout=0.5)
    assert time.monotonic() - started < 5


def test_sync_rejects_a_malformed_run_id():
    with pytest.raises(ConfigError, match="run_id"):
        sync_run("../../etc")


def test_a_missing_local_file_fails_the_call_and_is_not_spooled(store, monkeypatch):
    client, run_id, folder = store
    sleeps = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    tracker = resilient.ResilientTracker(client, run_id, folder / "ck")
    with pytest.raises(FileNotFoundError):
        tracker.client.log_artifact(run_id, str(folder / "no-such-file.txt"))
    assert sleeps == []  # not retried: a local error is no outage
    assert not tracker.spool.folder.exists()
    assert tracker.link.offline_until == 0.0


def _response(status: int) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    return response


def test_errors_are_classified_by_type_and_a_raced_insert_by_the_database_s_words(monkeypatch):
    # MLflow's REST client wraps the requests error it caught: the outage is the context.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with pytest.raises(MlflowException) as refused:
        mlflow.MlflowClient(f"http://127.0.0.1:{free_port()}").get_run("0" * 32)
    assert isinstance(refused.value.__context__, requests.ConnectionError)
    transient = [
        refused.value,
        ConnectionRefusedError("refused"),
        TimeoutError("timed out"),
        requests.ReadTimeout("slow"),
        requests.exceptions.RetryError("too many 503 error responses"),
        requests.HTTPError(response=_response(503)),
        requests.HTTPError(response=_response(429)),
        RestException({"error_code": "INTERNAL_ERROR", "message": "database went away"}),
        MlflowException("busy", error_code=TEMPORARILY_UNAVAILABLE),
        # two tune workers logging the same dataset at once (seen in CI on PostgreSQL)
        RestException(
            {
                "error_code": "BAD_REQUEST",
                "message": "(psycopg.errors.UniqueViolation) duplicate key value violates "
                'unique constraint "dataset_pk" DETAIL: Key (experiment_id, name, digest)'
                "=(1, reverse-train, 1196dc2b) already exists.",
            }
        ),
        RestException(
            {"error_code": "BAD_REQUEST", "message": "UNIQUE constraint failed: datasets.name"}
        ),
    ]
    for err in transient:
        assert is_transient(err), repr(err)
    permanent = [
        FileNotFoundError("no-such-file.txt"),
        PermissionError("read-only"),
        IsADirectoryError("a folder"),
        requests.HTTPError(response=_response(404)),
        requests.HTTPError(response=_response(501)),
        RestException({"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no run"}),
        MlflowException("API request to http://x failed", error_code=INVALID_PARAMETER_VALUE),
        MlflowException("API request to http://x: no run", error_code=RESOURCE_DOES_NOT_EXIST),
        ValueError("bad param"),
        RestException({"error_code": "BAD_REQUEST", "message": "Changing param values"}),
    ]
    for err in permanent:
        assert not is_transient(err), repr(err)


def test_spool_appends_10000_records_in_well_under_a_second(tmp_path):
    spool = spool_lib.Spool(tmp_path / "spool")
    started, cpu = time.perf_counter(), time.process_time()
    for step in range(10_000):
        spool.append({"op": "metrics", "metrics": [["loss", 0.5, 0, step]]})
    # CPU time: what the appends cost, whatever else shares the machine (~0.1 s; re-reading
    # the journal per append took minutes).
    cpu, elapsed = time.process_time() - cpu, time.perf_counter() - started
    spool.close()
    assert cpu < 0.5, f"10,000 appends took {cpu:.2f} s of CPU ({elapsed:.2f} s wall)"
    assert [r["seq"] for r in spool.records()] == list(range(10_000))
    again = spool_lib.Spool(tmp_path / "spool")  # a new process continues the numbering
    assert again.append({"op": "tags", "tags": {}})["seq"] == 10_000
    again.close()


KILLED_AFTER_APPEND = r"""
import os, signal, sys
from experiments.tracking import spool
s = spool.Spool(sys.argv[1])
for step in range(3):
    s.append({"op": "metrics", "metrics": [["loss", 1.0, 0, step]]})
os.kill(os.getpid(), signal.SIGKILL)  # right after append returned: no close, no fsync timer
"""


def test_a_record_survives_kill_9_right_after_append_returns(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_APPEND, str(tmp_path / "spool")],
        env=child_env(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr[-2000:]
    records = spool_lib.Spool(tmp_path / "spool").records()
    assert [r["metrics"][0][3] for r in records] == [0, 1, 2]


def _artifact_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(ARTIFACT_THREAD)}


def test_ending_a_run_stops_its_artifact_thread(store):
    client, run_id, folder = store
    before = _artifact_threads()
    tracker = Tracker(client, run_id)
    tracker.submit(lambda: None)
    assert _artifact_threads() - before  # the thread runs while the run does
    tracker.end()
    assert _artifact_threads() == before
    resilient_tracker = resilient.ResilientTracker(client, run_id, folder / "ck")
    resilient_tracker.submit(lambda: None)
    resilient.end_run(resilient_tracker, "FINISHED")
    assert _artifact_threads() == before


def test_per_epoch_tables_stay_out_of_mlflows_capped_table_tag(store, tmp_path):
    # MlflowClient.log_table lists every table in one tag capped at 8000 characters and fails
    # to parse it once truncated: a run logging a sample table per epoch died at epoch 152.
    client, run_id, _ = store
    tracker = Tracker(client, run_id)
    rows = [{"source": "a b", "generated": "b a", "target": "b a"}]
    for epoch in range(1, 161):
        tracker.log_table(rows, f"samples/epoch_{epoch:03d}.json", listed=False)
    tracker.log_table(rows, "samples/final.json")
    tag = json.loads(client.get_run(run_id).data.tags["mlflow.loggedArtifacts"])
    assert tag == [{"path": "samples/final.json", "type": "table"}]
    files = {f.path for f in client.list_artifacts(run_id, "samples")}
    assert {"samples/epoch_160.json", "samples/epoch_160.csv"} <= files
    tables = [
        json.loads(
            Path(client.download_artifacts(run_id, f"samples/{name}.json", tmp_path)).read_text()
        )
        for name in ("epoch_160", "final")
    ]
    assert tables[0] == tables[1] == {"columns": list(rows[0]), "data": [list(rows[0].values())]}


def test_stepped_images_and_dataset_inputs_are_spooled_and_replayed(store, monkeypatch):
    import numpy as np

    from experiments import config as config_lib
    from experiments.tasks import build_task
    from experiments.training import datasets

    client, run_id, folder = store
    monkeypatch.setattr(time, "sleep", lambda s: None)
    flaky = Flaky(client)
    tracker = resilient.ResilientTracker(flaky, run_id, folder / "ck", resilient.Link(cooldown=0))
    cfg = config_lib.validate({"task": {"name": "reverse", "num_examples": 40}})
    inputs = datasets.dataset_inputs(cfg, build_task(cfg.task))
    image = np.arange(4 * 6 * 3, dtype="uint8").reshape(4, 6, 3)
    flaky.down = True
    tracker.log_image(image, "attention_probe_0", 1)
    tracker.log_image(image[::-1], "attention_probe_0", 2)
    tracker.log_inputs(inputs)
    ops = [r["op"] for r in tracker.spool.pending()]
    assert ops == ["image", "image", "inputs"]
    flaky.down = False
    assert tracker.flush()
    names = {a.path for a in client.list_artifacts(run_id, "images")}
    steps = sorted(int(p.split("+")[2]) for p in names if p.endswith(".png"))
    assert steps == [1, 2]
    logged = client.get_run(run_id).inputs.dataset_inputs
    assert sorted(d.dataset.digest for d in logged) == sorted(d.dataset.digest for d in inputs)
    assert {t.value for d in logged for t in d.tags} == {"training", "validation", "testing"}


@pytest.mark.slow
def test_a_spooled_model_is_replayed_as_both_models_with_its_card(store, monkeypatch):
    client, run_id, folder = store
    monkeypatch.setattr(time, "sleep", lambda s: None)
    data = {"task": TINY_TASKS["reverse"], **TINY, "generate": {"max_length": 4}}
    prepared = training_run.validate(config_lib.validate(data))
    task, kind = prepared.task, prepared.task.kind
    model = kind.build_model(prepared.cfg, task)
    model(task.train.take(slice(0, 2)).inputs)  # built, untrained: any weights will do
    card = kind.text_card(task, prepared.cfg)
    logging_models = model_logging.log_models

    def unreachable(model, card):
        raise ConnectionError("server down")

    monkeypatch.setattr(model_logging, "log_models", unreachable)
    tracker = resilient.ResilientTracker(client, run_id, folder / "ck", resilient.Link(cooldown=0))
    mlflow.set_tracking_uri(store_uri(folder))
    with mlflow.start_run(run_id=run_id):
        spooled = tracker.log_model(model, card)
        assert spooled == dict.fromkeys(spool_lib.MODEL_TAGS, resilient.SPOOLED_MODEL_URI)
        (record,) = tracker.spool.pending()
        assert record["op"] == "model" and record["card"] == json.loads(json.dumps(card))
        monkeypatch.setattr(model_logging, "log_models", logging_models)
        assert tracker.flush()
    tags = client.get_run(run_id).data.tags
    assert tags["model_uri"].startswith("models:/")
    # The replayed text model decodes with the spooled card: as the runner would.
    path = list(sys.path)
    try:
        text_model = mlflow.pyfunc.load_model(tags["text_model_uri"])
        (record,) = text_model.predict(["abc"])
    finally:
        sys.path[:] = path  # the model's code_paths
    ids = generation.generate(model, [task.vocab.encode("abc")], 4, eos_id=END, start_id=START)
    assert record["text"] == task.vocab.decode(ids.tokens[0])
