"""The TensorFlow backend: `tf.distribute` strategies, `tf.function` calls, a SavedModel."""

from __future__ import annotations

import keras
import tensorflow as tf

from experiments import cpu_allocator, thread_pools
from experiments._keras_compat import patch_keras_for_multi_worker
from experiments.backends.backend import Backend


class TensorFlowBackend(Backend):
    name = "tensorflow"
    distribute = ("none", "mirrored", "multi_worker")
    saved_model = True

    def fit_data(self, feed):
        """The training feed `feed` (a `keras.utils.PyDataset`) as a `tf.data` generator
        without tf.data's autotuning (`without_autotuning`), two batches read ahead. A feed
        whose batches vary in shape (`LengthBatches`: each padded to its own longest row)
        has every dimension unknown: Keras reads a `PyDataset`'s shapes from its first two
        batches, and a later batch of another width would not fit them."""
        varying = getattr(feed, "varying_shapes", False)

        def batches():
            for index in range(len(feed)):  # the feed's epoch is read as each batch is made
                yield feed[index]

        spec = keras.tree.map_structure(
            lambda a: tf.TensorSpec((None,) * a.ndim if varying else a.shape, tf.as_dtype(a.dtype)),
            feed[0],
        )
        dataset = tf.data.Dataset.from_generator(batches, output_signature=spec)
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(feed)))
        return without_autotuning(dataset.prefetch(2))

    def validation_data(self, inputs, y, batch_size: int) -> dict:
        """The validation split as a `tf.data` dataset of `batch_size` rows without
        tf.data's autotuning (`without_autotuning`): Keras makes a new iterator of it for
        every epoch's evaluation. Sharded by rows where a strategy spans workers, as Keras
        shards arrays."""
        inputs = tuple(inputs) if isinstance(inputs, list) else inputs
        dataset = tf.data.Dataset.from_tensor_slices((inputs, y)).batch(batch_size)
        dataset = without_autotuning(dataset.prefetch(2))
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA
        )
        return {"validation_data": dataset.with_options(options)}

    def compile_inference(self, model, call):
        return tf.function(call, reduce_retracing=True)

    def accelerators(self) -> list[str]:
        return [gpu.name for gpu in tf.config.list_physical_devices("GPU")]

    def versions(self) -> dict[str, str]:
        return {"tensorflow_version": tf.__version__}

    def runtime_tags(self) -> dict[str, str]:
        """`tf_thread_pools`: the CPU thread pools' sizes (`experiments.thread_pools`);
        `tf_cpu_allocator`: "bfc" or "default" (`experiments.cpu_allocator`)."""
        return {
            "tf_thread_pools": thread_pools.describe(),
            "tf_cpu_allocator": cpu_allocator.describe(),
        }

    def requirements(self) -> list[str]:
        return [f"tensorflow=={tf.__version__}"]

    def replicas(self, distribute: str) -> int:
        """Local replicas, counted without starting TensorFlow's runtime (a multi-worker
        strategy must come first): the visible GPUs, else every logical CPU for
        `mirrored` and one for `multi_worker`."""
        if distribute == "none":
            return 1
        return _logical_count("GPU") or (_logical_count("CPU") if distribute == "mirrored" else 1)

    def make_distribution(self, distribute: str):
        if distribute == "mirrored":
            devices = [d.name for d in tf.config.list_logical_devices("GPU")]
            devices = devices or [d.name for d in tf.config.list_logical_devices("CPU")]
            return tf.distribute.MirroredStrategy(devices=devices)
        if distribute == "multi_worker":  # TF_CONFIG was checked with the config
            strategy = tf.distribute.MultiWorkerMirroredStrategy()
            patch_keras_for_multi_worker()
            return strategy
        return None

    def replicas_of(self, distribution) -> int:
        return distribution.num_replicas_in_sync


def without_autotuning(dataset):
    """`dataset` with tf.data's autotuning off. Each iterator of an autotuned dataset starts
    an optimization thread that sleeps 10 ms, 20 ms, 40 ms, ... between its rounds; deleting
    the iterator must wait for that thread, and on TensorFlow 2.21 the thread is at times
    not woken, so the deletion waits out its sleep: up to the iterator's age again. Keras
    deletes the training iterator at the end of every epoch, so such epochs took twice
    their time (on the GNU pairs, quarters of an epoch of 11 s took 20.5 s, one in three,
    the main thread waiting in `RootDataset::Iterator::~Iterator`; none with autotuning off,
    docs/results/benchmarks.md). Nothing here is tuned: one generator, a fixed prefetch."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def _logical_count(device_type: str) -> int:
    """The logical devices of `device_type` TensorFlow will make of the visible ones."""
    devices = tf.config.get_visible_devices(device_type)
    return sum(len(tf.config.get_logical_device_configuration(d) or [d]) for d in devices)


BACKEND = TensorFlowBackend()
