"""The one place where the runner meets the model library.

`build_model` turns a config and a task into an (uncompiled) Keras model;
`attention_weights` and `decode` wrap the models' attention and generation
APIs so the rest of the runner never touches model classes directly.
"""

from __future__ import annotations

import numpy as np

DEFAULT_SCORES = {"classification": "tanh_dot", "seq2seq": "additive", "lm": "dot"}


def model_class(name: str):
    """`keras_attn_rnn.models.<name>`."""
    from keras_attn_rnn import models

    return getattr(models, name)


def resolved_score(cfg, task) -> str:
    """The attention score in use: the configured one or the task kind's default."""
    return cfg.model.attention.score or DEFAULT_SCORES[task.kind]


def model_type(task) -> str:
    """Name of the model class a task trains."""
    return {
        "classification": "AttentiveClassifier",
        "seq2seq": "Seq2Seq",
        "lm": "AttentiveLanguageModel",
    }[task.kind]


def build_model(cfg, task):
    """Build the task's model from `cfg.model` (uncompiled, unbuilt)."""
    m = cfg.model
    attention = {"score": resolved_score(cfg, task), "units": m.attention.units}
    common = dict(embedding_dim=m.embedding_dim, units=m.units, rnn=m.rnn, dropout=m.dropout)
    if task.kind == "classification":
        attention["query"] = m.attention.query
        if m.attention.query_value is not None:
            attention["query_value"] = m.attention.query_value
        return model_class("AttentiveClassifier")(
            vocab_size=len(task.vocab),
            num_classes=len(task.class_names),
            bidirectional=True if m.bidirectional is None else m.bidirectional,
            num_layers=m.num_layers,
            attention=attention,
            **common,
        )
    if task.kind == "seq2seq":
        return model_class("Seq2Seq")(
            source_vocab=len(task.vocab),
            target_vocab=len(task.output_vocab),
            bidirectional=bool(m.bidirectional),
            decoder=m.decoder,
            attention=attention,
            attention_layer_size=m.attention_layer_size,
            **common,
        )
    attention["window"] = m.attention.window
    return model_class("AttentiveLanguageModel")(
        vocab_size=len(task.vocab), num_layers=m.num_layers, attention=attention, **common
    )


def predict_logits(model, inputs, batch_size: int = 256) -> np.ndarray:
    """Logits for `inputs` (an array or `[source, target_in]`), in batches, as float32."""
    n = len(inputs[0]) if isinstance(inputs, list) else len(inputs)
    out = []
    for start in range(0, n, batch_size):
        batch = _slice(inputs, start, start + batch_size)
        out.append(np.asarray(_compiled(model, False)(batch), dtype="float32"))
    return np.concatenate(out)


def attention_weights(model, inputs) -> tuple[np.ndarray, np.ndarray]:
    """(logits, attention weights) for one small batch of inputs."""
    logits, weights = _compiled(model, True)(inputs)
    return np.asarray(logits, dtype="float32"), np.asarray(weights, dtype="float32")


def decode(model, task, gen_cfg, prompts, max_length: int) -> np.ndarray:
    """Generate token ids (B, max_length) with the configured strategy.

    For seq2seq `prompts` are source ids (B, S); for the LM, lists of ids.
    """
    from experiments.tasks.base import END, START
    from keras_attn_rnn.generation import generate

    kwargs = dict(
        strategy=gen_cfg.strategy,
        temperature=gen_cfg.temperature,
        k=gen_cfg.k,
        p=gen_cfg.p,
        beam_width=gen_cfg.beam_width,
        length_penalty=gen_cfg.length_penalty,
        seed=gen_cfg.seed,
    )
    if task.kind == "seq2seq":
        kwargs.update(eos_id=END, start_id=START)
    result = generate(model, prompts, max_length, **kwargs)
    return np.asarray(result.tokens)


def _compiled(model, with_attention: bool):
    """`model` in inference mode: a cached `tf.function` unless the model runs eagerly."""
    import tensorflow as tf

    def call(inputs):
        if with_attention:
            return model(inputs, training=False, return_attention_scores=True)
        return model(inputs, training=False)

    if getattr(model, "run_eagerly", False):
        return call
    cache = model.__dict__.setdefault("_experiments_calls", {})  # bypasses Keras tracking
    if with_attention not in cache:
        cache[with_attention] = tf.function(call, reduce_retracing=True)
    return cache[with_attention]


def _slice(inputs, start: int, stop: int):
    if isinstance(inputs, list):
        return [a[start:stop] for a in inputs]
    return inputs[start:stop]
