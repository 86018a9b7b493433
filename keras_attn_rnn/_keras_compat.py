"""The library's only uses of private Keras APIs, each with why no public API serves.

`tests/test_keras_compat.py` checks every name here on each tested Keras
version and fails, naming the API, when a release moves or changes one.
"""

from keras.src import backend as _backend


def rnn(step_function, inputs, initial_states, input_length=None, mask=None):
    """Keras's backend RNN loop: `keras.src.backend.rnn`, the loop `keras.layers.RNN` runs.

    Why private: `keras.layers.RNN` takes no per-step constants (the memory)
    since Keras 3, and a loop written with `ops.scan` / `ops.while_loop` does
    not compile its gradient under XLA on TensorFlow; this loop does, on every
    backend. With a `(B, T)` boolean `mask`, masked steps carry the states over.
    Returns `(last_output, outputs, final_states)`.
    """
    return _backend.rnn(step_function, inputs, initial_states, input_length=input_length, mask=mask)


def random_seed_dtype():
    """The dtype of a Keras seed tensor on this backend (`uint32` on JAX, `int32` elsewhere).

    Why private: `keras.src.backend.random_seed_dtype` has no public alias;
    a seed tensor built inside a compiled loop (one per generation step) must
    have this dtype for `keras.random` to accept it.
    """
    return _backend.random_seed_dtype()


def set_keras_mask(x, mask):
    """`x` with the Keras mask `mask` attached (`keras.src.backend.set_keras_mask`); returns `x`.

    Why private: a loss whose per-step values carry a mask is reduced by
    `keras.losses.Loss` over the unmasked steps only (Keras' own losses use this
    for `ignore_class`); no public API attaches a mask to a tensor.
    """
    _backend.set_keras_mask(x, mask)
    return x


def accept_python_inputs(layer):
    """Lets `layer(...)` take Python strings and lists (a preprocessing layer's inputs).

    Why private: `Layer.__call__` converts its arguments to tensors and refuses
    non-tensors passed positionally unless two attributes say otherwise
    (`_convert_input_args`, `_allow_non_tensor_positional_args`; keras-hub's
    preprocessing layers set them the same way); no public argument does.
    """
    layer._convert_input_args = False
    layer._allow_non_tensor_positional_args = True
    layer.built = True
