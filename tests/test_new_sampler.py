"""A new sampler is one class plus its registration: its arguments reach the runner's
`generate.sampler` and the text model's params, with no edit under `experiments/`."""

from __future__ import annotations

import keras
import pytest
from helpers import pytest_with_plugin

from experiments import config as config_lib
from experiments.kinds.base import generate_defaults
from experiments.tracking.model_logging import text_signature
from keras_attn_rnn import samplers


# Its own serialization name: tests/test_samplers.py registers another MarginSampler, and
# whichever module a pytest worker imports last would otherwise own "tests>MarginSampler".
@keras.saving.register_keras_serializable(package="tests", name="RunnerMarginSampler")
class MarginSampler(samplers.Sampler):
    """Greedy among the tokens within `margin` of the best (a test's sampler)."""

    def __init__(self, margin=2.0, temperature=1.0):
        if not isinstance(margin, (int, float)) or margin < 0:
            raise ValueError(f"margin must be >= 0. Received: margin={margin!r}")
        super().__init__(temperature)
        self.margin = float(margin)

    def get_next_token(self, logits, seed):
        best = keras.ops.max(logits, axis=-1, keepdims=True)
        kept = keras.ops.where(logits >= best - self.margin, logits, -1e30)
        noise = samplers.gumbel_noise(keras.ops.shape(kept), seed)
        return keras.ops.argmax(kept + noise, axis=-1)

    def get_config(self):
        return {**super().get_config(), "margin": self.margin}


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(samplers.REGISTRY._members, "margin", MarginSampler)


def _config(sampler):
    return config_lib.validate(
        {"task": {"name": "charlm"}, "generate": {"sampler": sampler, "max_length": 5}}
    )


def test_the_config_takes_it_by_name_with_its_own_arguments(registered):
    cfg = _config({"name": "margin", "margin": 0.5})
    sampler = cfg.generate.built_sampler
    assert isinstance(sampler, MarginSampler) and sampler.margin == 0.5
    with pytest.raises(config_lib.ConfigError, match="margin must be >= 0"):
        _config({"name": "margin", "margin": -1})
    with pytest.raises(config_lib.ConfigError, match="beam_width is not an argument"):
        _config({"name": "margin", "beam_width": 3})


def test_its_argument_is_a_text_model_param_with_the_run_value(registered):
    card = {
        "kind": "lm",
        "generate": generate_defaults(_config({"name": "margin", "margin": 0.5})),
        "examples": {"text": ["ab"]},
    }
    assert card["generate"]["margin"] == 0.5
    params = {p.name: p.default for p in text_signature(card).params.params}
    assert params["margin"] == 0.5 and params["sampler"] == "greedy"
    assert params["k"] == 5 and params["beam_width"] == 4  # the other samplers' defaults


@pytest.mark.slow  # a fresh pytest process (imports TensorFlow again)
def test_the_sampler_suites_take_it_from_the_registry(tmp_path):
    """Registered (by a plugin loaded before the tests), it is in every suite that lists the
    samplers, and no list of names in them refuses it: they read the registry."""
    plugin = """
        from keras_attn_rnn import samplers
        from test_new_sampler import MarginSampler

        samplers.REGISTRY.register("margin", MarginSampler)
    """
    result = pytest_with_plugin(
        tmp_path,
        plugin,
        "tests/test_samplers.py",
        "tests/test_generation.py",
        "tests/test_registry_contract.py",
        "-k",
        "names or errors_name or margin",
        "-v",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "sampler-margin" in result.stdout and "test_names_come_from" in result.stdout
