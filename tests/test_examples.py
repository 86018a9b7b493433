"""The files in `examples/` run and do what their docstrings say (on every backend)."""

import importlib.util
import os

import numpy as np
import pytest

pytestmark = pytest.mark.layers

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tacotron_like_decoder_learns_frames_and_stops_where_the_utterance_ends():
    example = _load("tacotron_like")
    losses, result, true_lengths, error = example.main()
    assert losses[-1] < losses[0] / 10
    # free-running: each predicted frame fed back, stopped by the stop token alone
    assert np.all(np.abs(result.lengths - true_lengths) <= 1), (result.lengths, true_lengths)
    assert error < 0.05
    assert np.all(result.frames[np.arange(result.frames.shape[1]) >= result.lengths[:, None]] == 0)
