"""The private Keras APIs the library uses (`keras_attn_rnn._keras_compat`), checked on the
installed Keras: a release that moves or changes one fails here, naming it."""

import inspect

import keras
import numpy as np
import pytest
from helpers import to_numpy
from keras import ops

from keras_attn_rnn import _keras_compat

pytestmark = pytest.mark.layers


def test_keras_src_backend_rnn_is_there_with_its_arguments():
    from keras.src import backend

    rnn = getattr(backend, "rnn", None)
    assert callable(rnn), f"keras.src.backend.rnn is gone in Keras {keras.__version__}"
    parameters = inspect.signature(rnn).parameters
    for name in ("step_function", "inputs", "initial_states", "input_length"):
        assert name in parameters, (
            f"keras.src.backend.rnn lost its argument {name!r} in Keras {keras.__version__}"
        )


def test_the_rnn_loop_runs_a_step_function_over_time():
    x = np.arange(12, dtype="float32").reshape(2, 3, 2)

    def step(inputs, states):
        total = states[0] + inputs
        return total, [total]

    # Backend tensors, as the library passes them (the torch loop takes no NumPy arrays).
    inputs, initial = ops.convert_to_tensor(x), ops.zeros((2, 2), "float32")
    last, outputs, (final,) = _keras_compat.rnn(step, inputs, [initial], 3)
    np.testing.assert_allclose(to_numpy(outputs), np.cumsum(x, axis=1))
    np.testing.assert_allclose(to_numpy(final), x.sum(1))
    np.testing.assert_allclose(to_numpy(last), x.sum(1))


def test_random_seed_dtype_is_the_seed_dtype_keras_random_accepts():
    from keras.src import backend

    assert callable(getattr(backend, "random_seed_dtype", None)), (
        f"keras.src.backend.random_seed_dtype is gone in Keras {keras.__version__}"
    )
    dtype = _keras_compat.random_seed_dtype()
    assert dtype == keras.random.SeedGenerator(0).state.dtype, (
        "keras.src.backend.random_seed_dtype no longer matches the SeedGenerator state dtype"
    )

    class TensorSeed(keras.random.SeedGenerator):
        def __init__(self, seed):
            self._seed = seed

        def next(self, ordered=True):
            return self._seed

    seed = ops.cast(ops.convert_to_tensor([3, 4]), dtype)
    a = keras.random.uniform((4,), seed=TensorSeed(seed))
    b = keras.random.uniform((4,), seed=TensorSeed(seed))
    np.testing.assert_array_equal(to_numpy(a), to_numpy(b))


def test_set_keras_mask_is_there_and_a_loss_reduces_over_the_mask():
    from keras.src import backend

    assert callable(getattr(backend, "set_keras_mask", None)), (
        f"keras.src.backend.set_keras_mask is gone in Keras {keras.__version__}"
    )
    values = ops.convert_to_tensor(np.array([[1.0, 3.0], [5.0, 100.0]], "float32"))
    mask = ops.convert_to_tensor(np.array([[True, True], [True, False]]))
    assert _keras_compat.set_keras_mask(values, mask) is values
    np.testing.assert_array_equal(to_numpy(backend.get_keras_mask(values)), to_numpy(mask))

    class Identity(keras.losses.Loss):
        def call(self, y_true, y_pred):
            return _keras_compat.set_keras_mask(ops.convert_to_tensor(y_pred) * 1.0, mask)

    # the masked value (100) is left out of the mean: (1 + 3 + 5) / 3
    np.testing.assert_allclose(float(Identity()(values, values)), 3.0, rtol=1e-6)
