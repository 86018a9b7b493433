"""What training leaves behind once its model is gone: nothing that grows.

A sweep's points and a study's trials train one after another in one process. Each point
used to keep its whole traced training step (about 100 MB on the demo task: 130 MB more
peak memory per point) because TensorFlow keeps every graph-mode custom gradient in a
global registry with the graph it was traced in (tensorflow/tensorflow#27492), and the
feed of `fit` (which TensorFlow's generator registry outlives) held the trained model.
TensorFlow only: its traced graphs are what stayed.
"""

from __future__ import annotations

import gc
import weakref

import keras
import numpy as np
import pytest
from experiments_helpers import TINY_TASKS, use_store, write_config

from experiments import config as config_lib
from experiments.training import run
from keras_attn_rnn import models

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="TensorFlow's traced graphs"
)


def _collect() -> None:
    # Some garbage is only found on a second pass: the decoding's compiled function is
    # freed by a weak reference's callback while the model is collected, and its graphs
    # the pass after.
    for _ in range(5):
        if not gc.collect():
            return


def _graph_ids() -> set[int]:
    return {id(o) for o in gc.get_objects() if type(o).__name__.endswith("FuncGraph")}


def _new_graphs(before: set[int]) -> list[weakref.ref]:
    """Weak references to the traced TensorFlow graphs (`FuncGraph`s and their while
    bodies) made since `before` was taken."""
    _collect()
    graphs = [o for o in gc.get_objects() if type(o).__name__.endswith("FuncGraph")]
    return [weakref.ref(g) for g in graphs if id(g) not in before]


def _alive(refs) -> int:
    _collect()
    return sum(ref() is not None for ref in refs)


def test_a_trained_translator_leaves_no_traced_step_behind():
    # The additive score's step gradient is where a custom gradient would pin the graph.
    rng = np.random.default_rng(0)
    sources = rng.integers(1, 11, (16, 7)).astype("int32")
    targets = rng.integers(1, 9, (16, 6)).astype("int32")
    before = _graph_ids()
    model = models.Seq2Seq(11, 9, embedding_dim=6, units=8, decoder="bahdanau")
    model.compile(optimizer="adam")
    model.fit((sources, targets[:, :-1]), targets[:, 1:], batch_size=8, epochs=1, verbose=0)
    traced = _new_graphs(before)
    assert len(traced) > 10  # the training step, its loops and their gradients
    refs = [weakref.ref(model), *traced]
    del model
    assert _alive(refs) == 0


class _WatchModel(keras.callbacks.Callback):
    """Keeps a weak reference to the model `fit` trains, and nothing stronger."""

    def __init__(self, refs: list):
        super().__init__()
        self.refs = refs

    def set_model(self, model):
        self.refs.append(weakref.ref(model))


def test_runs_in_one_process_keep_neither_their_models_nor_their_traced_steps(
    tmp_path, monkeypatch
):
    use_store(tmp_path, monkeypatch)
    config = write_config(
        tmp_path,
        TINY_TASKS["reverse"],
        model={"decoder": "bahdanau", "attention": {"score": "additive"}},
        tracking={"log_model": False, "system_metrics": False},
    )
    before = _graph_ids()
    refs, runs = [], 2
    for _ in range(runs):
        prepared = run.validate(config_lib.load_config(config))
        run.execute(prepared, callbacks=(_WatchModel(refs),))
    assert len(refs) == runs and _alive(refs) == 0
    assert _alive(_new_graphs(before)) == 0
