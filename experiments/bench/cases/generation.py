"""Generation benchmarks: cached decoding against re-running the prefix, beam against greedy."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from experiments.bench import timing
from experiments.bench.cases.common import Options, random_generator
from keras_attn_rnn import samplers
from keras_attn_rnn.generation import generate
from keras_attn_rnn.models import AttentiveLanguageModel


def _language_model(options: Options):

    s = options.sizes["generation"]
    keras.utils.set_random_seed(options.seed)
    model = AttentiveLanguageModel(
        vocabulary_size=s["vocab"],
        embedding_dim=s["embedding_dim"],
        units=s["units"],
        attention={"score": "dot"},
    )
    prompts = random_generator(options).integers(1, s["vocab"], size=(s["batch"], s["prompt_len"]))
    prompts = prompts.astype("int32")
    model(prompts)
    return s, model, prompts


def generation_cache_speedup(options: Options) -> dict:
    """Cached greedy generation vs greedy decoding that re-runs the whole prefix each token."""

    s, model, prompts = _language_model(options)
    n = s["tokens"]

    def cached():
        return generate(model, prompts, n, sampler="greedy", jit_compile=options.jit_compile)

    # Shapes change every token: one trace with a dynamic time axis (no XLA).
    @tf.function(input_signature=[tf.TensorSpec((s["batch"], None), tf.int32)], autograph=False)
    def next_token(tokens):
        logits = model(tokens, training=False)[:, -1]
        logits = tf.concat([tf.fill([tf.shape(logits)[0], 1], -1e30), logits[:, 1:]], axis=-1)
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    def rerun():
        tokens = prompts
        for _ in range(n):
            token = next_token(tokens).numpy()
            tokens = np.concatenate([tokens, token[:, None]], axis=1)
        return tokens[:, prompts.shape[1] :]

    cached()
    next_token(prompts)  # trace both; timed runs are whole generations
    agree = bool(np.array_equal(cached().tokens, rerun()))
    r = options.repeats
    result = timing.paired(cached, rerun, r["generation"], 0, speedup=True)
    return {
        **result,
        "project": "keras_attn_rnn.generation.generate(sampler='greedy'): one RNN step + one "
        "attention over the key cache per token, in a compiled while loop",
        "peer": "greedy decoding that runs the AttentiveLanguageModel on the whole prefix for "
        "every new token (one tf.function with a dynamic time axis)",
        "same_tokens": agree,
        "shapes": dict(s, model="AttentiveLanguageModel(LSTM, dot causal self-attention)"),
    }


def beam4_cost(options: Options) -> dict:
    """Beam search (width 4) vs greedy search, same model, prompts and length."""
    s, model, prompts = _language_model(options)
    n = s["tokens"]

    def beam():
        return generate(
            model, prompts, n, sampler=samplers.BeamSampler(4), jit_compile=options.jit_compile
        )

    def greedy():
        return generate(model, prompts, n, sampler="greedy", jit_compile=options.jit_compile)

    r = options.repeats
    result = timing.paired(beam, greedy, r["generation"], min(1, r["warmup"]))
    return {
        **result,
        "project": "generate(sampler=BeamSampler(4))",
        "peer": "generate(sampler='greedy')",
        "shapes": dict(s, beam_width=4, model="AttentiveLanguageModel"),
    }
