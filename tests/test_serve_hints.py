"""What `serve` tells a user (issue 50): each record says how many input units the run's
vocabulary did not know, and the curl line the command prints sends an input from the
run's own data."""

from __future__ import annotations

import json

import mlflow
import numpy as np
from experiments_helpers import TINY, TINY_TASKS, use_store

from experiments import config as config_lib
from experiments.commands import serve
from experiments.tracking import text_model
from experiments.training import run


def _text_model(task: dict) -> text_model.TextModel:
    """The run's text model as `load_context` makes it, from an untrained tiny model."""
    prepared = run.validate(config_lib.validate({"task": task, **TINY}))
    cfg, task = prepared.cfg, prepared.task
    served = text_model.TextModel()
    served.card = json.loads(json.dumps(task.kind.text_card(task, cfg)))
    served.codec = text_model.TextCodec(served.card)
    served.model = task.kind.build_model(cfg, task)
    return served


def test_each_record_counts_the_input_units_the_vocabulary_did_not_know():
    served = _text_model(TINY_TASKS["reverse"])  # letters a-l
    known, partly, unknown = served.predict(None, ["abc", "abXYZ", "!!!!"], {"max_length": 3})
    assert (known["unknown_inputs"], partly["unknown_inputs"], unknown["unknown_inputs"]) == (
        0,
        3,
        4,
    )


def test_a_classifier_s_records_count_them_too():
    served = _text_model(TINY_TASKS["needle"])
    (record,) = served.predict(None, ["zzzz qqqq"])
    assert record["unknown_inputs"] == np.sum(np.array(served.codec.input.encode("zzzz qqqq")) == 3)
    assert record["unknown_inputs"] > 0


def test_the_curl_example_is_an_input_of_the_run_s_own_data(tmp_path, monkeypatch):
    client = mlflow.MlflowClient(use_store(tmp_path, monkeypatch))
    experiment = client.create_experiment("hints", artifact_location=(tmp_path / "a").as_uri())
    logged = client.create_logged_model(experiment, name="text_model")
    example = tmp_path / "input_example.json"
    example.write_text(json.dumps(["bonjour le monde", "merci"]))
    client.log_model_artifact(logged.model_id, str(example))
    uri = f"models:/{logged.model_id}"
    assert serve.example_request(uri, "text_model") == {"inputs": ["bonjour le monde"]}
    example.write_text(json.dumps({"inputs": [[4, 5, 6], [7, 8]]}))  # the Keras model's
    client.log_model_artifact(logged.model_id, str(example))
    assert serve.example_request(uri, "model") == {"inputs": [[4, 5, 6]]}
    # a model whose example cannot be read: the generic one
    assert serve.example_request("models:/m-none", "text_model") == serve.MODELS["text_model"][1]
