"""Calling a built model: logits, attention weights and generation, in batches.

The task kinds build the models (`TaskKind.build_model`); everything that
runs one goes through here, so the rest of the runner never touches the
models' call conventions directly.
"""

from __future__ import annotations

import numpy as np

from experiments import backends
from keras_attn_rnn.generation import generate


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


def forward(model, split, batch_size: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """(logits, attention weights) over a whole split, in batches."""
    logits, weights = [], []
    for start in range(0, len(split), batch_size):
        part = split.take(slice(start, start + batch_size))
        lg, w = attention_weights(model, part.inputs)
        logits.append(lg)
        weights.append(w)
    return np.concatenate(logits), np.concatenate(weights)


def decode(
    model,
    gen_cfg,
    prompts,
    max_length: int,
    batch_size: int | None = None,
    min_length=None,
    **token_ids,
) -> np.ndarray:
    """Generate token ids (B, max_length) with the strategy of `gen_cfg` (a `GenerateConfig`),
    `batch_size` prompts at a time (None: all at once).

    `prompts` are source ids (B, S) for a seq2seq model and lists of ids for a
    language model; `token_ids` are the `eos_id`/`start_id` the kind decodes with;
    `min_length` (B,), if given, the tokens each row holds before it may emit `eos_id`.
    """
    if batch_size is not None and len(prompts) > batch_size:
        parts = [
            decode(
                model,
                gen_cfg,
                prompts[start : start + batch_size],
                max_length,
                min_length=None if min_length is None else min_length[start : start + batch_size],
                **token_ids,
            )
            for start in range(0, len(prompts), batch_size)
        ]
        return np.concatenate(parts)
    extra = {} if min_length is None else {"min_length": np.asarray(min_length)}
    result = generate(
        model,
        prompts,
        max_length,
        sampler=gen_cfg.build_sampler(),
        seed=gen_cfg.seed,
        **token_ids,
        **extra,
    )
    return np.asarray(result.tokens)


def _compiled(model, with_attention: bool):
    """`model` in inference mode, compiled by the backend (`Backend.compile_inference`) unless
    the model runs eagerly; cached on the model."""

    def call(inputs):
        if with_attention:
            return model(inputs, training=False, return_attention_scores=True)
        return model(inputs, training=False)

    if getattr(model, "run_eagerly", False):
        return call
    cache = model.__dict__.setdefault("_experiments_calls", {})  # bypasses Keras tracking
    if with_attention not in cache:
        cache[with_attention] = backends.current().compile_inference(model, call)
    return cache[with_attention]


def _slice(inputs, start: int, stop: int):
    if isinstance(inputs, list):
        return [a[start:stop] for a in inputs]
    return inputs[start:stop]
