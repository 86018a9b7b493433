"""The experiment's saved UI view of its attention images, *Attention* (issue 42): what a run
writes, how later runs update it, and that an unreachable server never fails a run over it.
Chromium's view of it: tests/test_ui_attention_view.py."""

from __future__ import annotations

import json
import time

import mlflow
import numpy as np
from experiments_helpers import TINY_TASKS, runs, use_store, write_config, write_text_dataset
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import PERMISSION_DENIED

from experiments.commands import main
from experiments.commands.ui import print_image_views
from experiments.tracking import image_view, resilient


def _state(tag: str) -> dict:
    envelope = json.loads(tag)
    assert envelope["name"] == image_view.NAME and isinstance(envelope["createdAt"], int)
    return json.loads(envelope["state"])  # as MLflow's UI reads a saved view: a JSON string


def _cards(tag: str) -> dict[str, dict]:
    return {card["imageKeys"][0]: card for card in _state(tag)["compareRunCharts"]}


def test_a_run_saves_its_experiments_attention_view(tmp_path, monkeypatch, capsys):
    uri = use_store(tmp_path, monkeypatch)
    task = {**TINY_TASKS["textcls"], "path": str(write_text_dataset(tmp_path)), "num_probes": 2}
    assert main(["run", str(write_config(tmp_path, task, train={"epochs": 2}))]) == 0
    (run,) = runs(uri)
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment(run.info.experiment_id)
    cards = _cards(experiment.tags[image_view.TAG])
    assert set(cards) == {"attention_probe_0", "attention_probe_1"}
    for card in cards.values():
        # An image chart without the run's parameters above it, on the last epoch's images.
        assert card["type"] == "IMAGE" and card["showRunParams"] is False
        assert card["step"] == 2 and card["metricSectionId"] == image_view.SECTION
    (section,) = _state(experiment.tags[image_view.TAG])["compareRunSections"]
    assert section["uuid"] == image_view.SECTION and section["name"] == image_view.NAME
    assert section["columns"] == 2  # one run's images: two charts a row

    # `experiments ui` prints the address that opens it.
    capsys.readouterr()
    print_image_views("127.0.0.1", 5123)
    route = f"experiments/{run.info.experiment_id}/runs?viewStateShareKey=attention"
    expected = (
        f"http://127.0.0.1:5123/#/{route}&compareRunsMode=CHART&workflowType=machine_learning"
    )
    assert expected in capsys.readouterr().out


def test_a_later_run_keeps_the_charts_the_view_has():
    first = image_view.tag_value(["attention_probe_0", "attention_probe_1"], 3, now_ms=1000)
    later = image_view.tag_value(["attention_probe_10", "attention_probe_2"], 7, first, 2000)
    keys = list(_cards(later))
    assert keys == [f"attention_probe_{i}" for i in (0, 1, 2, 10)]  # in the probes' order
    assert {card["step"] for card in _cards(later).values()} == {7}  # the newest images' step
    assert json.loads(later)["createdAt"] == 1000 and json.loads(later)["updatedAt"] == 2000
    # A tag that is not such a view is replaced, not merged.
    assert list(_cards(image_view.tag_value(["attention_probe_0"], 1, "{not json"))) == [
        "attention_probe_0"
    ]


def test_an_unreachable_server_skips_the_view_and_fails_nothing(tmp_path, monkeypatch):
    uri = use_store(tmp_path, monkeypatch)
    client = mlflow.MlflowClient(uri)
    experiment_id = client.create_experiment("offline")
    run_id = client.create_run(experiment_id).info.run_id
    monkeypatch.setattr(time, "sleep", lambda s: None)

    def refuse(*args, **kwargs):
        raise ConnectionError("server down")

    monkeypatch.setattr(mlflow.MlflowClient, "set_experiment_tag", refuse)
    link = resilient.Link(attempts=2, cooldown=60)
    tracker = resilient.ResilientTracker(client, run_id, tmp_path / "ck", link)
    tracker.save_image_view(["attention_probe_0"], 1)  # no error
    assert not tracker.spool.exists()  # and nothing spooled: the next images' view is next
    assert link.offline_until > 0  # the outage is known to the run's other calls
    monkeypatch.undo()
    assert image_view.TAG not in client.get_experiment(experiment_id).tags


def test_a_refused_view_is_a_warning(tmp_path, monkeypatch, capsys):
    uri = use_store(tmp_path, monkeypatch)
    client = mlflow.MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("refused")).info.run_id

    def refuse(*args, **kwargs):
        raise MlflowException("Permission denied", error_code=PERMISSION_DENIED)

    monkeypatch.setattr(mlflow.MlflowClient, "set_experiment_tag", refuse)
    tracker = resilient.ResilientTracker(client, run_id, tmp_path / "ck")
    tracker.save_image_view(["attention_probe_0"], 1)
    assert "Attention view was not saved" in capsys.readouterr().err


def test_the_cards_grow_with_the_runs_whose_images_they_show(tmp_path, monkeypatch):
    uri = use_store(tmp_path, monkeypatch)
    client = mlflow.MlflowClient(uri)
    experiment_id = client.create_experiment("grows")
    for images in (True, True, True, False):  # three runs logged images, one did not
        run_id = client.create_run(experiment_id).info.run_id
        if images:
            client.log_image(run_id, np.zeros((4, 4, 3), np.uint8), key="attention_probe_0", step=1)
    image_view.save(client, experiment_id, ["attention_probe_0"], 1)
    (section,) = _state(client.get_experiment(experiment_id).tags[image_view.TAG])[
        "compareRunSections"
    ]
    # one chart a row, two runs' images a row in it: three runs need two rows
    assert section["columns"] == 1
    assert image_view.columns(1) == 2 and image_view.columns(2) == 1  # one run: two a row
    assert section["cardHeight"] == image_view.card_height(3) == image_view.card_height(4)
    assert image_view.card_height(3) > image_view.card_height(2) == image_view.card_height(1)
    assert image_view.card_height(50) == image_view.card_height(image_view.RUNS_SHOWN)


def test_the_view_follows_the_images_at_most_every_30_seconds_and_at_the_end(monkeypatch):
    """Saving the view costs ~40 ms of requests: not on every epoch (the bench's
    `tracking_overhead`), but with the first images, then when due, and when training ends."""
    from experiments.training import callbacks

    saved, now = [], [0.0]

    class Tracker:
        def submit(self, fn, *args):
            fn(*args)

        def save_image_view(self, keys, step):
            saved.append(step)

    monkeypatch.setattr(callbacks, "log_attention_images", lambda *args: ["attention_probe_0"])
    logger = callbacks.RunLogger(Tracker(), None, None, 1, 0, clock=lambda: now[0])
    for step, at in enumerate([0.0, 2.0, 4.0, 31.0, 33.0, 35.0]):
        now[0] = at
        logger.attention_images(None, step)
    assert saved == [0, 3]  # the first images, then 30 s later
    logger.on_train_end()
    assert saved == [0, 3, 5]  # the newest images, once training ends
    logger.on_train_end()
    assert saved == [0, 3, 5]  # nothing newer: not again
