"""Compiling the decoding loop for the backend: the library's only import of a backend framework.

`compiled(model, key, run, jit_compile)` returns `run` (a function of tensors
that calls the model) compiled for the current Keras backend and cached per
model and `key`, so later calls with the same shapes skip tracing:

- TensorFlow: a `tf.function` (with XLA when `jit_compile`); it captures the
  model's variables by reference, so training in between is seen.
- JAX: `jax.jit`, the model's variables passed in as arguments through a
  `keras.StatelessScope` (the compiled function stays valid after the
  weights change).
- PyTorch: the loop runs eagerly; with `jit_compile` the model's decoding step
  (`next_logits`, one RNN step plus one attention read) is a `torch.compile`d
  function. On the generation benchmark (LSTM 256, 8 x 256 tokens, 2 CPU cores)
  that took generation from 2.73 s to 1.66 s, after a first call of 26 s spent
  compiling; compiling the whole loop instead was slower than eager (3.00 s: the
  data-dependent `while` breaks the graph every step) after 111 s of compiling.
- NumPy: the loop runs eagerly.

The cache holds the model only weakly.

`map_dataset(dataset, function)` runs a Python preprocessing function over a
`tf.data.Dataset` of strings (`tf.numpy_function`): the one other place a
framework is named, since a dataset is TensorFlow's whatever the backend.

`custom_gradients_outlive_graphs()` says where a written gradient would pin its
graph in memory (TensorFlow), so the code that writes one can do without there.

`fuses_elementwise()` says whether the code being traced here is compiled by a fusing
compiler (XLA, `torch.compile`), where a chain of elementwise ops never writes its
intermediate results to memory.

`new_record` / `write_record` / `stack_record` keep a loop's per-step outputs
(tokens, alignments) as a `while_loop` variable that each step writes once.
"""

import weakref

import keras
import numpy as np
from keras import ops

# model -> {key: compiled function}
_FUNCTIONS = weakref.WeakKeyDictionary()


def compiled(model, key, run, jit_compile=False):
    """`run(model, *tensors)` compiled for the backend, as a function of the tensors alone."""
    key = (key, bool(jit_compile))
    try:
        functions = _FUNCTIONS.setdefault(model, {})
    except TypeError:  # neither hashable nor weakly referable: no cache
        functions = {}
    if key not in functions:
        functions[key] = _compile(_model_reference(model), run, bool(jit_compile))
    return functions[key]


def _model_reference(model):
    try:
        return weakref.ref(model)
    except TypeError:
        return lambda: model


def _compile(model_ref, run, jit_compile):
    def call(*tensors):
        return run(model_ref(), *tensors)

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(call, jit_compile=jit_compile, reduce_retracing=True, autograph=False)
    if backend == "jax":
        return _jax_jit(call, model_ref)
    if backend == "torch" and jit_compile:
        return _torch_compiled_step(run, model_ref)
    return call


def _torch_compiled_step(run, model_ref):
    def call(*tensors):
        model = model_ref()
        # Kept on the model (a cycle the collector frees with it), compiled from the bound
        # method: a compiled function that looks the model up through a weak reference is
        # re-guarded every step (17 s instead of 1.7 s on the benchmark).
        step = model.__dict__.get(_STEP_ATTRIBUTE)
        if step is None:
            import torch

            step = torch.compile(model.next_logits)
            model.__dict__[_STEP_ATTRIBUTE] = step
        return run(_WithStep(model, step), *tensors)

    return call


_STEP_ATTRIBUTE = "_keras_attn_rnn_compiled_next_logits"


class _WithStep:
    """The model, with `next_logits` replaced by a compiled step (torch)."""

    def __init__(self, model, next_logits):
        self._model = model
        self.next_logits = next_logits

    def __getattr__(self, name):
        return getattr(self._model, name)


def _jax_jit(call, model_ref):
    import jax

    def stateless(values, *tensors):
        variables = _variables(model_ref())
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return call(*tensors)

    jitted = jax.jit(stateless)

    def run(*tensors):
        return jitted([v.value for v in _variables(model_ref())], *tensors)

    return run


def _variables(model):
    return list(getattr(model, "variables", None) or [])


def new_record(length, shape, dtype):
    """An empty record of `length` per-step values of `shape`: a `while_loop` variable.

    On TensorFlow a `tf.TensorArray`: in a graph-mode `while`, `slice_update`
    of a loop variable copies the whole tensor every step (on the beam-search
    benchmark, the `(T, B, W, S)` alignment history cost ~20 % of the
    generation), a TensorArray write does not. Elsewhere a zero tensor
    `(length, *shape)` written with `slice_update` (in place under `jax.jit`).
    Steps never written read as zeros.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        static = [d if isinstance(d, int) else None for d in shape]
        return tf.TensorArray(dtype, size=length, element_shape=tf.TensorShape(static))
    return ops.zeros((length, *shape), dtype)


def write_record(record, step, value):
    """`record` with `value` (of the record's shape) written at `step`."""
    if keras.backend.backend() == "tensorflow":
        return record.write(step, value)
    return ops.slice_update(record, [step] + [0] * len(value.shape), ops.expand_dims(value, 0))


def stack_record(record):
    """The record as one `(length, *shape)` tensor."""
    if keras.backend.backend() == "tensorflow":
        return record.stack()
    return record


def custom_gradients_outlive_graphs() -> bool:
    """Whether a `keras.ops.custom_gradient` traced into a graph stays alive with that graph
    for the life of the process.

    On TensorFlow, each graph-mode custom gradient is registered under a new name in the
    global gradient registry and never removed; its closure holds tensors of the graph it
    was traced in, so every traced training step (the whole forward and backward graph)
    outlives its model (tensorflow/tensorflow#27492, #97697). In a loop of models (a sweep,
    a tuner) memory grew by the size of a traced step per model.
    """
    return keras.backend.backend() == "tensorflow"


def fuses_elementwise() -> bool:
    """Whether the ops being traced here are compiled by a fusing compiler: always on JAX
    (`jax.jit`, XLA); on TensorFlow inside a `tf.function(jit_compile=True)` (Keras's
    `jit_compile=True`) and its loops; on PyTorch while `torch.compile` traces. Elsewhere
    (TensorFlow's graph mode and eager, PyTorch eager, NumPy) each op writes out its whole
    result.

    TensorFlow says so only through a private function,
    `control_flow_util.GraphOrParentsInXlaContext` (what its own gradient code asks);
    `tests/test_compilation.py` fails if it moves.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        return True
    if backend == "tensorflow":
        import tensorflow as tf
        from tensorflow.python.ops import control_flow_util

        if tf.executing_eagerly():
            return False
        return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())
    if backend == "torch":
        import torch

        return torch.compiler.is_compiling()
    return False


def concrete_values(x):
    """`x` as a NumPy array when its values exist here (eager), else None.

    None inside a compiled function (a `tf.function` graph, a `jax.jit` tracer, a
    `torch.compile` trace) and for symbolic Keras tensors: there a value check
    cannot run.
    """
    if keras.backend.is_keras_tensor(x):
        return None
    if not hasattr(x, "shape") or type(x).__module__.startswith("numpy"):
        return np.asarray(x)
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        if not tf.executing_eagerly() or not hasattr(x, "numpy"):
            return None
    elif backend == "jax":
        import jax

        if isinstance(x, jax.core.Tracer):
            return None
    elif backend == "torch":
        import torch

        if torch.compiler.is_compiling():
            return None
    return np.asarray(ops.convert_to_numpy(x))


def map_dataset(dataset, function):
    """`dataset` with `function` applied to each element through `tf.numpy_function`.

    `function(*arrays)` takes an element's NumPy arrays (strings as bytes) and returns
    `(x, y, sample_weight)`: `x` an array or a list of arrays, `y` and `sample_weight`
    arrays or None. It is run once on the first element to learn that structure; the
    mapped dataset's elements are `x`, `(x, y)` or `(x, y, sample_weight)` (what
    `keras.Model.fit` takes), each array of unknown length along every axis.
    """
    import tensorflow as tf

    first = next(iter(dataset.take(1)))
    first = first if isinstance(first, tuple) else (first,)
    example = function(*[np.asarray(part) for part in first])
    x, rest = example[0], [part for part in example[1:] if part is not None]
    x_is_list = isinstance(x, (list, tuple))
    leaves = [*(list(x) if x_is_list else [x]), *rest]
    dtypes = [tf.as_dtype(np.asarray(leaf).dtype) for leaf in leaves]
    width = len(leaves) - len(rest)

    def flat(*arrays):
        x, *others = function(*arrays)
        others = [part for part in others if part is not None]
        return [np.asarray(leaf) for leaf in (*(list(x) if x_is_list else [x]), *others)]

    def mapped(*element):
        outputs = tf.numpy_function(flat, list(element), dtypes, stateful=False)
        for output, leaf in zip(outputs, leaves):
            output.set_shape([None] * np.ndim(leaf))
        x = tuple(outputs[:width]) if x_is_list else outputs[0]
        others = tuple(outputs[width:])
        return (x, *others) if others else x

    return dataset.map(mapped)
