"""Greedy generation time of one backend, on the `generation` benchmark's shapes.

    KERAS_BACKEND=torch python tools/bench_generation_backends.py [--torch-compile] [--quick]

Builds `AttentiveLanguageModel(vocab 1000, embedding 64, LSTM 256, dot attention)`,
generates 256 tokens for 8 prompts of 8 tokens (what `python -m experiments bench`
measures as `generation_cache_speedup`'s project side), once to warm up (tracing,
compilation), then `--repeats` times, and prints one JSON line with the median
seconds per generation. `--torch-compile` wraps the decoding function in
`torch.compile` instead of running it eagerly (torch only); `--jit-compile` passes
`jit_compile=True` to `generate` (XLA on TensorFlow; on torch a compiled step).
"""

import argparse
import json
import statistics
import time

import keras
import numpy as np

from keras_attn_rnn import _compilation, models
from keras_attn_rnn.generation import generate

FULL = dict(batch=8, tokens=256, prompt_len=8, units=256, embedding_dim=64, vocab=1000)
QUICK = dict(batch=4, tokens=48, prompt_len=4, units=64, embedding_dim=32, vocab=200)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--torch-compile", action="store_true")
    parser.add_argument("--jit-compile", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sampler", default="greedy")
    args = parser.parse_args()
    s = QUICK if args.quick else FULL
    if args.torch_compile:
        import torch

        assert keras.backend.backend() == "torch", "--torch-compile needs KERAS_BACKEND=torch"
        eager = _compilation._compile
        _compilation._compile = lambda ref, run, jit: torch.compile(eager(ref, run, jit))
    keras.utils.set_random_seed(0)
    model = models.AttentiveLanguageModel(
        s["vocab"], embedding_dim=s["embedding_dim"], units=s["units"], attention={"score": "dot"}
    )
    prompts = np.random.default_rng(0).integers(1, s["vocab"], (s["batch"], s["prompt_len"]))
    prompts = prompts.astype("int32")
    model(prompts)

    def once():
        start = time.perf_counter()
        result = generate(
            model, prompts, s["tokens"], sampler=args.sampler, jit_compile=args.jit_compile
        )
        tokens = result.tokens
        return time.perf_counter() - start, tokens

    first, tokens = once()
    times = [once()[0] for _ in range(args.repeats)]
    print(
        json.dumps(
            {
                "backend": keras.backend.backend(),
                "torch_compile_loop": args.torch_compile,
                "jit_compile": args.jit_compile,
                "sampler": args.sampler,
                "first_call_s": round(first, 3),
                "median_s": round(statistics.median(times), 3),
                "times_s": [round(t, 3) for t in times],
                "tokens_checksum": int(tokens.astype("int64").sum()),
                "shapes": s,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
