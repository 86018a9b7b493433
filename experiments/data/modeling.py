"""Calling a built model: logits, attention weights and generation, in batches.

The task kinds build the models (`TaskKind.build_model`); everything that
runs one goes through here, so the rest of the runner never touches the
models' call conventions directly.
"""

from __future__ import annotations

import numpy as np

from experiments import backends
from experiments.peers import keras_seq2seq
from keras_attn_rnn import samplers
from keras_attn_rnn.generation import generate

# What the runner decodes with where no sampler is configured (the exact-match metrics, the
# logged models' expected outputs): greedy decoding.
GREEDY = samplers.get("greedy")


def predict_logits(model, inputs, batch_size: int = 256) -> np.ndarray:
    """Logits for `inputs` (an array or `[source, target_in]`), in batches, as float32."""
    n = len(inputs[0]) if isinstance(inputs, list) else len(inputs)
    out = []
    for start in range(0, n, batch_size):
        batch = _slice(inputs, start, start + batch_size)
        out.append(np.asarray(_compiled(model, False)(batch), dtype="float32"))
    return np.concatenate(out)


def attention_weights(model, inputs) -> tuple[np.ndarray, np.ndarray]:
    """(logits, attention weights) for one small batch of inputs (a copying model's
    probabilities for its logits)."""
    logits, weights, _ = attention_outputs(model, inputs)
    return logits, weights


def attention_outputs(model, inputs) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(logits, attention weights, p_gen) for one small batch of inputs: a copying model's
    probabilities and its probability of generating per step `(B, T)`; p_gen is None for
    any other model."""
    if keras_seq2seq.is_peer(model):  # Keras's own model returns no attention
        logits, weights = keras_seq2seq.teacher_forced(model, *inputs[:2])
        return logits, weights, None
    outputs = _compiled(model, True)(inputs)
    logits, weights = (np.asarray(a, dtype="float32") for a in outputs[:2])
    p_gen = np.asarray(outputs[2], dtype="float32") if len(outputs) > 2 else None
    return logits, weights, p_gen


def forward(model, split, batch_size: int = 128):
    """`(rows, logits, attention weights)` for each batch of a split in turn, `rows` the
    batch's slice of the split: a split's logits together are rows x steps x vocabulary
    floats (1,200 test pairs of 54 steps over 1,000 subwords: 259 MB), so whoever needs
    them over a whole split keeps what it needs of each batch instead."""
    for start in range(0, len(split), batch_size):
        rows = slice(start, min(start + batch_size, len(split)))
        logits, weights = attention_weights(model, split.take(rows).inputs)
        yield rows, logits, weights


def decode(
    model,
    sampler,
    prompts,
    max_length: int,
    batch_size: int | None = None,
    min_length=None,
    source_ext=None,
    seed: int | None = 0,
    **token_ids,
) -> np.ndarray:
    """Generate token ids (B, max_length) with `sampler` (a built
    `keras_attn_rnn.samplers.Sampler`: the run's `GenerateConfig.built_sampler`, or
    `GREEDY`) and `seed`, `batch_size` prompts at a time (None: all at once).

    `prompts` are source ids (B, S) for a seq2seq model and lists of ids for a
    language model; `token_ids` are the `eos_id`/`start_id` the kind decodes with;
    `min_length` (B,), if given, the tokens each row holds before it may emit `eos_id`;
    `source_ext` (B, S), for a copying model, the sources in extended ids (its output
    then holds extended ids).
    """
    if batch_size is not None and len(prompts) > batch_size:
        parts = [
            decode(
                model,
                sampler,
                prompts[start : start + batch_size],
                max_length,
                min_length=None if min_length is None else min_length[start : start + batch_size],
                source_ext=None if source_ext is None else source_ext[start : start + batch_size],
                seed=seed,
                **token_ids,
            )
            for start in range(0, len(prompts), batch_size)
        ]
        return np.concatenate(parts)
    result = generated(
        model,
        sampler,
        prompts,
        max_length,
        min_length,
        source_ext=source_ext,
        seed=seed,
        **token_ids,
    )
    return np.asarray(result.tokens)


def generated(
    model, sampler, prompts, max_length: int, min_length=None, source_ext=None, seed=0, **token_ids
):
    """The `generation.GenerationResult` of `prompts` at once (see `decode`): the tokens,
    their scores, the attention, and a copying model's `p_gen`."""
    extra = {} if min_length is None else {"min_length": np.asarray(min_length)}
    if source_ext is not None:
        extra["source_ext"] = np.asarray(source_ext)
    steps = keras_seq2seq.generator(model) if keras_seq2seq.is_peer(model) else model
    return generate(steps, prompts, max_length, sampler=sampler, seed=seed, **token_ids, **extra)


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
