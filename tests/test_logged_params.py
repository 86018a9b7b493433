"""A run logs the parameters its model read, no others (issue 50): the plain-Keras peer logs
its own dot score and none of the attention's other keys, a classifier logs no decoder, a
language model no decoder and no direction."""

from __future__ import annotations

from experiments_helpers import TINY, TINY_TASKS, runs, use_store, write_config, write_text_dataset

from experiments import config as config_lib
from experiments.commands import main
from experiments.training import run


def _params(task: dict, **model) -> dict:
    """The params `run.validate` + `_log_start` would log (the kind's filter applied)."""
    cfg = config_lib.validate({"task": task, "model": {**TINY["model"], **model}})
    prepared = run.validate(cfg)
    flat = config_lib.flatten(config_lib.to_dict(prepared.cfg))
    return {k: v for k, v in flat.items() if prepared.task.kind.applies(k, prepared.cfg)}


def test_the_keras_peer_logs_its_dot_score_and_no_other_attention_key():
    params = _params(TINY_TASKS["reverse"], decoder="keras", attention={"score": "additive"})
    assert params["model.decoder"] == "keras"
    assert params["model.attention.score"] == "dot"  # keras.layers.Attention's, what it used
    assert not [k for k in params if k.startswith("model.attention.") and k.endswith("units")]
    assert "model.attention.normalizer" not in params
    assert "model.attention_layer_size" not in params
    library = _params(TINY_TASKS["reverse"], attention={"score": "general"})
    assert library["model.attention.score"] == "general"
    assert library["model.decoder"] == "bahdanau"
    assert "model.attention.normalizer" in library and "model.attention_layer_size" in library
    assert "model.attention.query" not in library  # the classifier's pooling query


def test_a_classifier_and_a_language_model_log_no_decoder(tmp_path):
    textcls = {**TINY_TASKS["textcls"], "path": str(write_text_dataset(tmp_path))}
    for task in (textcls, TINY_TASKS["needle"], TINY_TASKS["lm"]):
        params = _params(task)
        assert "model.decoder" not in params and "model.copy" not in params, task["name"]
        assert "model.attention.score" in params and "model.units" in params
    assert "model.attention.query" in _params(textcls)
    assert "model.bidirectional" not in _params(TINY_TASKS["lm"])


def test_a_peer_run_logs_what_it_used(tmp_path, monkeypatch):
    store = use_store(tmp_path, monkeypatch)
    config = write_config(
        tmp_path,
        TINY_TASKS["reverse"],
        model={"decoder": "keras"},
        tracking={"log_model": False, "system_metrics": False, "num_samples": 0},
    )
    assert main(["run", str(config)]) == 0
    (finished,) = runs(store)
    params, tags = finished.data.params, finished.data.tags
    assert params["model.attention.score"] == "dot" and tags["score"] == "dot"
    assert "model.attention.normalizer" not in params
