"""Training under XLA (`jit_compile=True`) on TensorFlow with fully dynamic batch and time
dimensions: a padded `tf.data` pipeline whose batches differ in size and length, through a
decoder holding every score and every mechanism, in mixed precision (float16 compute, float32
variables: both dtypes' code under XLA). Each model compiles for 50-60 s on 2 cores; float32
alone under XLA is `test_mechanisms.py`'s jit-compiled training of every mechanism."""

import keras
import numpy as np
import pytest

from keras_attn_rnn import AttentionDecoder, mechanisms, scores

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.data + TF XLA"),
]


def _pipeline():
    import tensorflow as tf

    shapes = [(3, 7, 4), (2, 9, 3)]  # (rows, source length, target length)

    def rows():  # the same rows every epoch
        rng = np.random.default_rng(0)
        for count, source, target in shapes:
            for _ in range(count):
                s, t = rng.integers(2, source + 1), rng.integers(2, target + 1)
                yield (rng.integers(1, 10, s), rng.integers(1, 10, t)), rng.integers(1, 10, t)

    spec = tf.TensorSpec([None], tf.int32)
    dataset = tf.data.Dataset.from_generator(rows, output_signature=((spec, spec), spec))
    return dataset.padded_batch(3)  # batches of 3 and 2 rows, each padded to its own length


def _model():
    every = [
        mechanisms.ContentAttention(name, units=6 if name == "additive" else None)
        for name in scores.names()
    ]
    every += [
        mechanisms.MonotonicAttention("additive", units=6, sigmoid_noise=1.0, seed=1),
        mechanisms.MonotonicAttention("general", mode="recursive"),
        mechanisms.MonotonicAttention("dot", mode="hard"),
        mechanisms.LocationSensitiveAttention(6, filters=4, kernel_size=3),
        mechanisms.CoverageAttention(6),
        mechanisms.LocalPredictiveAttention(window=2),
        mechanisms.GMMAttention(6, num_mixtures=2),
        mechanisms.DynamicConvolutionAttention(6, static_filters=2, dynamic_filters=2),
        mechanisms.LocationAttention(6),
    ]
    # every registered mechanism is among them
    assert {type(m) for m in every} == {mechanisms.class_for(n) for n in mechanisms.names()}
    src = keras.Input((None,), dtype="int32")
    tin = keras.Input((None,), dtype="int32")
    source = keras.layers.Embedding(10, 6, mask_zero=True)(src)
    memory, h, c = keras.layers.LSTM(6, return_sequences=True, return_state=True)(source)
    target = keras.layers.Embedding(10, 6, mask_zero=True)(tin)
    decoder = AttentionDecoder(
        keras.layers.LSTMCell(6), attention=every, attention_layer_size=[4] * len(every)
    )
    outputs = decoder([target, memory], initial_state=[h, c])
    logits = keras.layers.Dense(10, dtype="float32")(outputs)
    return keras.Model([src, tin], logits)


def test_every_score_and_mechanism_trains_under_xla_on_dynamic_shapes():
    keras.config.set_dtype_policy("mixed_float16")
    model = _model()
    model.compile(
        keras.optimizers.Adam(1e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    history = model.fit(_pipeline(), epochs=8, verbose=0)  # compiled once per shape
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses))
    assert losses[-1] < losses[0]  # it learns, not only compiles
