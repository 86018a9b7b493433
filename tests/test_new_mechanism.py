"""A new mechanism is one class plus its registration: it runs from the runner's config
(`--set model.attention.mechanism=... model.attention.<option>=...`) and from
`AttentionDecoder(attention=...)`, with no edit under `experiments/`."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from experiments_helpers import TINY_TASKS, migrated_store, runs, write_config
from helpers import pytest_with_plugin

from experiments import config as config_lib
from experiments.commands import main
from experiments.training import run as training_run
from keras_attn_rnn import AttentionDecoder, mechanisms


@keras.saving.register_keras_serializable(package="tests")
class SharpAttention(mechanisms.ContentAttention):
    """Content attention with its scores multiplied by `sharpness` (a test's mechanism)."""

    def __init__(self, score="general", sharpness=2.0, **kwargs):
        if not isinstance(sharpness, (int, float)) or sharpness <= 0:
            raise ValueError(f"sharpness must be > 0. Received: sharpness={sharpness!r}")
        super().__init__(score=score, **kwargs)
        self.sharpness = float(sharpness)

    def call(self, query, prepared_keys, memory, memory_mask, state, training=None):
        scores = self.score_layer.score_step(query, prepared_keys) * self.sharpness
        return self.normalize(scores, memory_mask), {}

    def get_config(self):
        return {**super().get_config(), "sharpness": self.sharpness}


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(mechanisms.REGISTRY._members, "sharp", SharpAttention)


def test_the_decoder_runs_it_and_it_round_trips(registered):
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype("float32")
    memory = np.random.default_rng(1).standard_normal((2, 5, 6)).astype("float32")
    decoder = AttentionDecoder(keras.layers.LSTMCell(8), attention=mechanisms.get("sharp"))
    outputs, alignments = decoder([x, memory], return_attention_scores=True)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(alignments).sum(-1), 1.0, atol=1e-5)
    again = AttentionDecoder.from_config(decoder.get_config())
    again([x, memory])
    again.set_weights(decoder.get_weights())
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(again([x, memory])), keras.ops.convert_to_numpy(outputs)
    )
    assert again.mechanisms[0].sharpness == 2.0


def test_its_options_are_checked_by_its_constructor(registered, tmp_path):
    base = {"task": TINY_TASKS["reverse"]}
    good = config_lib.validate(
        {**base, "model": {"attention": {"mechanism": "sharp", "sharpness": 3.0}}}
    )
    assert good.model.attention.model_extra == {"sharpness": 3.0}
    # The run's one check stage (the task's kind) checks them, before anything is made.
    for attention, message in [
        ({"mechanism": "sharp", "sharpness": -1}, "model.attention.sharpness: got -1; .*sharp"),
        ({"mechanism": "sharp", "filters": 3}, "model.attention.filters: .*not an option of "),
        ({"mechanism": "content", "sharpness": 3.0}, "model.attention.sharpness: .*not an opt"),
    ]:
        with pytest.raises(config_lib.ConfigError, match=message):
            training_run.validate({**base, "model": {"attention": attention}})


def test_a_run_trains_it_from_the_command_line(registered, tmp_path):
    uri = migrated_store(tmp_path)
    config = write_config(
        tmp_path, TINY_TASKS["reverse"], tracking={"experiment": "sharp", "log_model": False}
    )
    overrides = ["model.attention.mechanism=sharp", "model.attention.sharpness=4.0"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        argv = ["run", str(config)] + [arg for o in overrides for arg in ("--set", o)]
        assert main(argv) == 0
    (run,) = runs(uri, "sharp")
    assert run.data.params["model.attention.mechanism"] == "sharp"
    assert run.data.params["model.attention.sharpness"] == "4.0"
    assert "test_exact_match_greedy" in run.data.metrics


@pytest.mark.slow  # a fresh pytest process (imports TensorFlow again)
def test_the_mechanism_suites_take_it_from_the_registry(tmp_path):
    """Registered (by a plugin loaded before the tests), it passes the contract suite every
    registered mechanism does, and no list of names in the suites refuses it."""
    plugin = """
        from keras_attn_rnn import mechanisms
        from test_new_mechanism import SharpAttention

        mechanisms.REGISTRY.register("sharp", SharpAttention)
    """
    result = pytest_with_plugin(
        tmp_path,
        plugin,
        "tests/test_mechanisms_regimes.py",
        "tests/test_registry_contract.py",
        "-k",
        "registry_names or sharp",
        "-v",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "mechanism-sharp" in result.stdout and "registry_names" in result.stdout
