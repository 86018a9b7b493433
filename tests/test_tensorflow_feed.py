"""The TensorFlow backend's feeds to `fit`: the training batches and the validation split as
`tf.data` datasets without tf.data's autotuning, whose optimization thread made deleting an
iterator (Keras does at every epoch's end) wait up to the iterator's age again."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from test_length_batches import stored

from experiments.backends.tensorflow_backend import TensorFlowBackend
from experiments.training.batches import EpochBatches, LengthBatches


@pytest.mark.parametrize("kind", ["padded alike", "by length"])
def test_the_training_feed_is_every_batch_in_order_without_autotuning(tmp_path, kind):
    split = stored(tmp_path, rows=100)
    if kind == "padded alike":
        feed = EpochBatches(split.take(slice(None)), 16, seed=3)
    else:
        feed = LengthBatches(split, 16, seed=3)
    data = TensorFlowBackend().fit_data(feed)

    assert data.options().autotune.enabled is False
    assert int(data.cardinality()) == len(feed) == 7
    first = keras.tree.flatten(feed[0])
    for spec, array in zip(keras.tree.flatten(data.element_spec), first, strict=True):
        if kind == "padded alike":  # the step is traced for the feed's one shape
            assert spec.shape.as_list() == list(array.shape)
        else:  # the batches' widths differ: any lengths
            assert spec.shape.as_list() == [None] * array.ndim
        assert spec.dtype == tf.as_dtype(array.dtype)
    got = [keras.tree.flatten(batch) for batch in data.as_numpy_iterator()]
    assert len(got) == len(feed)
    for index, batch in enumerate(got):
        for value, expected in zip(batch, keras.tree.flatten(feed[index]), strict=True):
            np.testing.assert_array_equal(value, expected)


def test_the_validation_split_is_batched_without_autotuning_and_sharded_by_rows():
    inputs = (np.arange(50).reshape(25, 2), np.arange(75).reshape(25, 3))
    y = np.arange(25)
    arguments = TensorFlowBackend().validation_data(list(inputs), y, batch_size=8)

    assert set(arguments) == {"validation_data"}
    data = arguments["validation_data"]
    assert data.options().autotune.enabled is False
    shard = data.options().experimental_distribute.auto_shard_policy
    assert shard == tf.data.experimental.AutoShardPolicy.DATA
    batches = list(data.as_numpy_iterator())
    assert [len(b[1]) for b in batches] == [8, 8, 8, 1]
    np.testing.assert_array_equal(np.concatenate([b[0][0] for b in batches]), inputs[0])
    np.testing.assert_array_equal(np.concatenate([b[0][1] for b in batches]), inputs[1])
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), y)
