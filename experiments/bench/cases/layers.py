"""Layer benchmarks: the library's attention layers against Keras's own on the same shapes."""

from __future__ import annotations

import keras
from keras import ops

from experiments.bench import timing
from experiments.bench.cases.common import (
    Options,
    adam,
    compiled_step,
    mean_square,
    random_generator,
)
from keras_attn_rnn.layers import AttentionPooling, SequenceAttention


def pooling_overhead(options: Options) -> dict:
    """LSTM classifier step with AttentionPooling vs with GlobalAveragePooling1D."""
    s = options.sizes["pooling_overhead"]
    rng = random_generator(options)
    tokens = rng.integers(1, s["vocab"], size=(s["batch"], s["time"])).astype("int32")
    labels = rng.integers(0, 2, size=(s["batch"],)).astype("int32")
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def classifier(pooling):
        inputs = keras.Input((s["time"],), batch_size=s["batch"], dtype="int32")
        x = keras.layers.Embedding(s["vocab"], s["embedding_dim"])(inputs)
        x = keras.layers.LSTM(s["units"], return_sequences=True)(x)
        outputs = keras.layers.Dense(2)(pooling(x))
        model = keras.Model(inputs, outputs)
        return compiled_step(
            lambda: loss_fn(labels, model(tokens, training=True)),
            lambda: model.trainable_variables,
            options.jit_compile,
            optimizer=adam(),
        )

    project = classifier(AttentionPooling())
    peer = classifier(keras.layers.GlobalAveragePooling1D())
    r = options.repeats
    result = timing.paired(project, peer, r["step"], r["warmup"])
    return {
        **result,
        "project": "Embedding -> LSTM -> AttentionPooling(tanh_dot, learned query) -> Dense, "
        "Adam step",
        "peer": "the same with keras.layers.GlobalAveragePooling1D",
        "shapes": dict(s, classes=2),
    }


def causal_dot_vs_keras(options: Options) -> dict:
    """SequenceAttention(score='dot') causal vs keras.layers.Attention causal, fwd+bwd."""
    s = options.sizes["causal_dot_vs_keras"]
    x = ops.convert_to_tensor(
        random_generator(options)
        .standard_normal((s["batch"], s["time"], s["dim"]))
        .astype("float32")
    )

    def attention_step(layer):
        return compiled_step(
            lambda: mean_square(layer([x, x], use_causal_mask=True)),
            lambda: layer.trainable_variables,
            options.jit_compile,
            watch=(x,),
        )

    project = attention_step(SequenceAttention(score="dot"))
    peer = attention_step(keras.layers.Attention())
    r = options.repeats
    result = timing.paired(project, peer, r["fast"], r["warmup"])
    return {
        **result,
        "project": "SequenceAttention(score='dot'), use_causal_mask=True, forward + backward",
        "peer": "keras.layers.Attention(), use_causal_mask=True, forward + backward",
        "shapes": dict(s, self_attention=True),
    }


def additive_vs_keras(options: Options) -> dict:
    """SequenceAttention(score='additive') vs Dense projections + keras.layers.AdditiveAttention."""
    s = options.sizes["additive_vs_keras"]
    rng = random_generator(options)
    query = ops.convert_to_tensor(
        rng.standard_normal((s["batch"], s["query_len"], s["dim"])).astype("float32")
    )
    value = ops.convert_to_tensor(
        rng.standard_normal((s["batch"], s["value_len"], s["dim"])).astype("float32")
    )

    project_layer = SequenceAttention(score="additive", units=s["units"])
    q_proj = keras.layers.Dense(s["units"], use_bias=False)
    k_proj = keras.layers.Dense(s["units"], use_bias=False)
    keras_additive = keras.layers.AdditiveAttention(use_scale=True)

    def peer_forward():
        return mean_square(keras_additive([q_proj(query), value, k_proj(value)]))

    project = compiled_step(
        lambda: mean_square(project_layer([query, value])),
        lambda: project_layer.trainable_variables,
        options.jit_compile,
        watch=(query, value),
    )
    peer = compiled_step(
        peer_forward,
        lambda: (
            q_proj.trainable_variables
            + k_proj.trainable_variables
            + keras_additive.trainable_variables
        ),
        options.jit_compile,
        watch=(query, value),
    )
    r = options.repeats
    result = timing.paired(project, peer, r["fast"], r["warmup"])
    return {
        **result,
        "project": "SequenceAttention(score='additive', units) on [query, value], fwd + bwd",
        "peer": "Dense(units, no bias) on query and on value + "
        "keras.layers.AdditiveAttention(use_scale=True), fwd + bwd",
        "shapes": s,
    }
