"""The Keras backend a run trains on, and what depends on it: one object per backend.

`current()` is the `Backend` of `keras.backend.backend()` (set by
`KERAS_BACKEND` before Keras is imported). Each backend's module imports its
own framework, and only the current one is ever imported, so the runner
needs TensorFlow only on the TensorFlow backend:

| backend | `train.distribute` | inference calls | Keras-flavor `model` |
|---|---|---|---|
| tensorflow | none, mirrored, multi_worker | `tf.function` | a SavedModel |
| jax | none, data_parallel | `jax.jit` of `stateless_call` | not logged |
| torch | none | eager | not logged |
"""

from __future__ import annotations

import importlib

import keras

from experiments.backends.backend import Backend

__all__ = ["Backend", "current", "names"]

# Backend name -> the module holding its `BACKEND`.
_MODULES = {
    "tensorflow": "experiments.backends.tensorflow_backend",
    "jax": "experiments.backends.jax_backend",
    "torch": "experiments.backends.torch_backend",
}


def names() -> tuple[str, ...]:
    """The backends the runner trains on."""
    return tuple(_MODULES)


def current() -> Backend:
    """The `Backend` Keras runs on (importing its framework on first use)."""
    name = keras.backend.backend()
    if name not in _MODULES:
        from experiments.errors import invalid_config

        raise invalid_config("KERAS_BACKEND", name, f"one of {', '.join(_MODULES)}")
    return importlib.import_module(_MODULES[name]).BACKEND
