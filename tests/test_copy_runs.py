"""A trained copy-attention run of `copy_slots` (slow: one real run, trained once for the
module): what it logs, its text model copying names it never saw (loaded through MLflow, and
served over HTTP by `mlflow models serve`), and the export it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pytest
from experiments_helpers import artifact_paths, migrated_store, runs, snapshot, write_config
from serving_helpers import post, served

from experiments.commands import main
from experiments.errors import EXIT_CONFIG

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("copy_runs")]

# Trains to exact match 1.0 on the unseen slot words in ~15 s on one CPU thread.
TASK = {"name": "copy_slots", "num_examples": 1600, "pool_size": 800, "num_probes": 2}
SECTIONS = {
    "model": {"embedding_dim": 16, "units": 32, "copy": True},
    "train": {"epochs": 3, "batch_size": 32, "learning_rate": 0.01, "run_eagerly": False},
    "tracking": {"experiment": "copy", "num_samples": 2, "system_metrics": False},
}
# Names and places no generated pool can hold (they start with no onset the pools use).
UNSEEN = ["meet Zbigniew at Quaybridge on friday", "Ottoline lives in Xanadu"]
COPIED = [("Zbigniew", "Quaybridge"), ("Ottoline", "Xanadu")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("copy_runs")
    uri = migrated_store(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.chdir(folder)
        assert main(["run", str(write_config(folder, TASK, **SECTIONS))]) == 0
    (run,) = runs(uri, "copy")
    return {"store": uri, "folder": folder, "run": run}


def test_the_run_copies_unseen_words_and_logs_p_gen(trained):
    run = trained["run"]
    assert run.info.status == "FINISHED"
    assert run.data.params["model.copy"] == "True" and run.data.params["model.max_oov"] == "3"
    assert run.data.metrics["test_exact_match_greedy"] >= 0.95  # held-out words only
    assert "model_uri" not in run.data.tags
    assert "copy-attention model" in run.data.tags["keras_model_skipped"]
    paths = artifact_paths(trained["store"], run.info.run_id)
    assert {"samples/final.json", "heatmaps/final/probe_0.png"} <= paths
    local = mlflow.artifacts.download_artifacts(
        run_id=run.info.run_id, artifact_path="samples/final.json", tracking_uri=trained["store"]
    )
    table = json.loads(Path(local).read_text(encoding="utf-8"))
    assert "p_gen" in table["columns"]
    for row in table["data"]:
        record = dict(zip(table["columns"], row))
        assert record["correct"] and record["prediction"] == record["target"]
        assert [e.rsplit(":", 1)[0] for e in record["p_gen"].split()] == (
            record["prediction"].split()
        )


def _check_copied(records):
    for record, text, words in zip(records, UNSEEN, COPIED):
        assert set(words) <= set(record["tokens"]), (text, record["text"])
        assert set(words) <= set(record["attended_tokens"])
        for word in words:  # copied, not generated
            assert record["p_gen"][record["tokens"].index(word)] < 0.5, record
        assert len(record["p_gen"]) == len(record["tokens"])


def test_the_text_model_copies_names_it_never_saw(trained):
    mlflow.set_tracking_uri(trained["store"])
    model = mlflow.pyfunc.load_model(trained["run"].data.tags["text_model_uri"])
    records = model.predict(UNSEEN)
    assert records[0]["text"] == "on friday Zbigniew meets you at Quaybridge"
    assert records[1]["text"] == "Xanadu is home to Ottoline"
    _check_copied(records)
    beam = model.predict(UNSEEN, params={"sampler": "beam", "beam_width": 3})
    assert [r["text"] for r in beam] == [r["text"] for r in records]


def test_the_served_text_model_answers_with_the_copied_words(trained, tmp_path):
    uri = f"runs:/{trained['run'].info.run_id}/text_model"
    with served(uri, trained["store"], tmp_path) as url:
        status, body = post(url, {"inputs": UNSEEN})
    assert status == 200, body
    _check_copied(body["predictions"])
    assert body["predictions"][0]["text"] == "on friday Zbigniew meets you at Quaybridge"


def test_export_refuses_a_savedmodel_and_writes_the_keras_file(trained, tmp_path, capsys):
    run_id = trained["run"].info.run_id
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", trained["store"])
        before = snapshot(tmp_path)
        assert main(["export", run_id, "--format", "savedmodel", str(tmp_path / "sm")]) == (
            EXIT_CONFIG
        )
        assert "copy attention (model.copy)" in capsys.readouterr().err
        assert snapshot(tmp_path) == before
        out = tmp_path / "model.keras"
        assert main(["export", run_id, "--format", "keras", str(out)]) == 0
    import keras

    loaded = keras.saving.load_model(out, safe_mode=True)
    assert loaded.copy and loaded.num_oov == 3
    assert np.isfinite(loaded.count_params())
