"""The runner's only use of private Keras APIs, each with why no public one serves.

`tests/test_keras_compat_runner.py` fails loudly, naming the API, when a
Keras release moves, renames or re-shapes any of them.

- `keras.src.backend.tensorflow.trainer.reduce_per_replica`,
  `TensorFlowTrainer._maybe_symbolic_build` and
  `_collective_all_reduce_multi_worker`: Keras 3's `fit` fails under
  `tf.distribute.MultiWorkerMirroredStrategy` (keras-team/keras#20585).
  Keras has no public hook for how the trainer reduces per-replica values or
  builds its compile state from the first batch, so the fix has to replace
  those two functions; the third is Keras's own test for the strategy type,
  reused so the patch switches on exactly when Keras's bug does. Still needed
  with Keras 3.15 and TensorFlow 2.21: without the patch the two-process test
  (`tests/test_scaleout_distribute.py::test_multi_worker_two_processes_log_one_run`)
  fails in `fit` with "ValueError: Attempt to convert a value (PerReplica:{...".
- `Trainer._symbolic_build` and `Trainer._distribute_strategy`: what the
  replaced `_maybe_symbolic_build` calls and reads, as the original does.
- `keras.src.backend.cudnn_ok` and the global `uninitialized_variables` list
  (`keras.src.backend.common.global_state`): `detached_construction` builds
  a model to run its constructors' checks without starting TensorFlow's
  runtime, which a multi-worker strategy must come before. Keras' LSTM and
  GRU constructors ask `cudnn_ok`, which lists TensorFlow's GPUs (starting
  the runtime), and a public `StatelessScope(initialize_variables=False)`
  leaves its variables in that list for the next scope to initialise; no
  public API skips either.
"""

from __future__ import annotations

import contextlib
import importlib

import keras

# Private: Keras' backend functions (`cudnn_ok`) and its global state (see above).
from keras.src import backend as keras_backend
from keras.src.backend.common import global_state

# Private: the TensorFlow trainer module (keras-team/keras#20585, see above). Imported when
# the patch is made (on the TensorFlow backend only): it imports TensorFlow.
TF_TRAINER = "keras.src.backend.tensorflow.trainer"

PATCH_MARK = "_multi_worker_patch"


def patch_keras_for_multi_worker() -> None:
    """Make Keras 3's `fit` work under `MultiWorkerMirroredStrategy` (keras-team/keras#20585).

    Keras 3's TensorFlow trainer breaks in two places when the strategy runs
    in multi-worker mode: it builds the compile state from a first batch
    reduced with `strategy.reduce("MEAN", batch)` (an error for integer
    `PerReplica` batches), and it reduces each step's scalar metrics with
    `strategy.reduce("MEAN", v, axis=0)` (an error for scalars). This takes
    the local replica's batch for the first, and reduces scalars with
    `axis=None` (the mean over all replicas of all workers) for the second.
    Other strategies are untouched; calling this twice is harmless.
    """
    import tensorflow as tf  # the TensorFlow backend's own patch (see TF_TRAINER)

    tf_trainer = importlib.import_module(TF_TRAINER)
    if getattr(tf_trainer.reduce_per_replica, PATCH_MARK, False):
        return
    # Private: how `fit` reduces per-replica step outputs; no public hook replaces it.
    reduce_original = tf_trainer.reduce_per_replica
    # Private: builds metrics/optimizer state from a first batch before the step is traced.
    build_original = tf_trainer.TensorFlowTrainer._maybe_symbolic_build
    # Private: Keras's own "is this a multi-worker strategy" test.
    multi_worker = tf_trainer._collective_all_reduce_multi_worker

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and multi_worker(strategy):
            return tf.nest.map_structure(lambda v: strategy.reduce("MEAN", v, axis=None), values)
        return reduce_original(values, strategy, reduction)

    def maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = self._distribute_strategy  # private: the strategy `compile` captured
        if strategy is None or not multi_worker(strategy):
            return build_original(self, iterator=iterator, data_batch=data_batch)
        if iterator is not None:
            for _, _, it in iterator:
                data_batch = tf.nest.map_structure(
                    lambda v: (
                        strategy.experimental_local_results(v)[0]
                        if isinstance(v, tf.distribute.DistributedValues)
                        else v
                    ),
                    next(it),
                )
                break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)  # private: what the original calls

    setattr(reduce_per_replica, PATCH_MARK, True)
    tf_trainer.reduce_per_replica = reduce_per_replica
    tf_trainer.TensorFlowTrainer._maybe_symbolic_build = maybe_symbolic_build


@contextlib.contextmanager
def detached_construction():
    """Construct layers and models without starting the backend's runtime: their variables
    stay uninitialised and are forgotten on exit (the objects are for their constructors'
    checks only: calling them fails), and the RNN layers do not ask which devices exist."""
    cudnn_ok = keras_backend.cudnn_ok
    pending = list(global_state.get_global_attribute("uninitialized_variables") or [])
    # Private: LSTM/GRU constructors ask it; it lists TensorFlow's GPUs (the runtime starts).
    keras_backend.cudnn_ok = lambda *args, **kwargs: False
    try:
        with keras.StatelessScope(initialize_variables=False):
            yield
    finally:
        keras_backend.cudnn_ok = cudnn_ok
        # Private: the variables made in the scope, which the next scope would initialise.
        global_state.set_global_attribute("uninitialized_variables", pending)
