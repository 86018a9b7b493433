"""The private Keras APIs `experiments/_keras_compat.py` relies on still exist and still fit.

Each check names the API, so a Keras upgrade that moves, renames or re-shapes
one fails here, loudly, instead of in a multi-worker run.
"""

from __future__ import annotations

import importlib
import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

from experiments import _keras_compat

TRAINER_MODULE = "keras.src.backend.tensorflow.trainer"
# (attribute path in the trainer module, parameter names the patch relies on)
PRIVATE_APIS = {
    "reduce_per_replica": ["values", "strategy", "reduction"],
    "TensorFlowTrainer._maybe_symbolic_build": ["self", "iterator", "data_batch"],
    "TensorFlowTrainer._symbolic_build": ["self", "iterator", "data_batch"],
    "_collective_all_reduce_multi_worker": ["strategy"],
}


def _trainer():
    try:
        return importlib.import_module(TRAINER_MODULE)
    except ImportError as err:
        pytest.fail(f"private Keras module {TRAINER_MODULE} is gone ({err}); see _keras_compat.py")


def _resolve(module, path: str):
    target = module
    for part in path.split("."):
        if not hasattr(target, part):
            pytest.fail(
                f"private Keras API {TRAINER_MODULE}.{path} is gone (no {part!r}); "
                "experiments/_keras_compat.py patches it for keras-team/keras#20585"
            )
        target = getattr(target, part)
    return target


@pytest.mark.parametrize("path", sorted(PRIVATE_APIS))
def test_private_trainer_api_exists_with_the_expected_parameters(path):
    api = _resolve(_trainer(), path)
    assert callable(api), f"private Keras API {TRAINER_MODULE}.{path} is no longer callable"
    names = list(inspect.signature(api).parameters)
    expected = PRIVATE_APIS[path]
    assert names[: len(expected)] == expected, (
        f"private Keras API {TRAINER_MODULE}.{path} changed its parameters: "
        f"expected {expected}, got {names}"
    )


def test_multi_worker_test_still_tells_strategies_apart():
    multi_worker = _resolve(_trainer(), "_collective_all_reduce_multi_worker")
    assert multi_worker(tf.distribute.get_strategy()) is False, (
        f"{TRAINER_MODULE}._collective_all_reduce_multi_worker calls the default strategy "
        "multi-worker"
    )


def test_the_patch_installs_once_and_leaves_other_strategies_alone(monkeypatch):
    trainer = _trainer()
    cls = trainer.TensorFlowTrainer
    originals = trainer.reduce_per_replica, cls._maybe_symbolic_build
    monkeypatch.setattr(trainer, "reduce_per_replica", originals[0])  # restored afterwards
    monkeypatch.setattr(cls, "_maybe_symbolic_build", originals[1])

    _keras_compat.patch_keras_for_multi_worker()
    patched = trainer.reduce_per_replica, cls._maybe_symbolic_build
    _keras_compat.patch_keras_for_multi_worker()  # a second call changes nothing

    assert patched[0] is not originals[0] and patched[1] is not originals[1]
    assert getattr(patched[0], _keras_compat.PATCH_MARK) is True
    assert (trainer.reduce_per_replica, cls._maybe_symbolic_build) == patched
    strategy = tf.distribute.get_strategy()  # not multi-worker: the original reduction runs
    value = tf.constant([1.0, 3.0])
    expected = originals[0](value, strategy, "auto")
    assert np.array_equal(patched[0](value, strategy, "auto"), expected)


def test_detached_construction_uses_what_keras_still_has_and_restores_it():
    from keras.src import backend
    from keras.src.backend.common import global_state

    assert callable(getattr(backend, "cudnn_ok", None)), (
        "private Keras API keras.src.backend.cudnn_ok is gone; see _keras_compat.py"
    )
    cudnn_ok = backend.cudnn_ok
    pending = list(global_state.get_global_attribute("uninitialized_variables") or [])
    with _keras_compat.detached_construction():
        assert backend.cudnn_ok("tanh", "sigmoid", False, True) is False
        layer = keras.layers.LSTM(4, dropout=0.1)  # asks cudnn_ok; makes a seed variable
        made = global_state.get_global_attribute("uninitialized_variables")
        assert made and made[-1] is layer.cell.seed_generator.state
    assert backend.cudnn_ok is cudnn_ok
    assert list(global_state.get_global_attribute("uninitialized_variables") or []) == pending
    assert layer.cell.seed_generator.state._value is None  # never initialised
