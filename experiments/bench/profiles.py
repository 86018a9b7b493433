"""Shapes and repeat counts of the benchmarks per profile: `full`, `quick` and `tiny`.

`full` has the shapes of the benchmark table (docs/results/benchmarks.md); `quick` is a
~2-minute version; `tiny` (smallest shapes, one repeat) is for the test
suite, chosen by `--tiny` or the environment variable `ATTN_RNN_BENCH_TINY=1`.
"""

from __future__ import annotations

import os

TINY_ENV = "ATTN_RNN_BENCH_TINY"

PROFILES = {
    "full": {
        "pooling_overhead": dict(batch=64, time=200, units=128, embedding_dim=128, vocab=5000),
        "causal_dot_vs_keras": dict(batch=32, time=256, dim=128),
        "additive_vs_keras": dict(batch=64, query_len=30, value_len=50, dim=256, units=256),
        "decoder": dict(batch=64, source_len=50, target_len=30, units=256, vocab=1000),
        "translator": dict(
            batch=128, source_len=30, target_len=30, units=128, embedding_dim=128, vocab=1000
        ),
        "generation": dict(
            batch=8, tokens=256, prompt_len=8, units=256, embedding_dim=64, vocab=1000
        ),
        "tracking": dict(config="demo", set=[]),
        "tokenizer": dict(pairs=100_000, vocabulary_size=8000),
        "corpus": dict(small=1_000_000, large=10_000_000, sample=300_000),
        "buckets": dict(epochs=4, units=128, vocabulary_size=2000, batch_size=32),
        "repeats": dict(
            fast=30,
            step=10,
            slow=3,
            generation=3,
            tfa_rounds=2,
            warmup=2,
            tracking_epochs=3,
            tracking=8,  # a ~3 % effect under other jobs' noise needs more pairs than 3
        ),
    },
    "quick": {
        "pooling_overhead": dict(batch=32, time=100, units=64, embedding_dim=64, vocab=2000),
        "causal_dot_vs_keras": dict(batch=16, time=128, dim=64),
        "additive_vs_keras": dict(batch=16, query_len=20, value_len=30, dim=64, units=64),
        "decoder": dict(batch=16, source_len=20, target_len=10, units=64, vocab=200),
        "translator": dict(
            batch=32, source_len=15, target_len=15, units=64, embedding_dim=64, vocab=500
        ),
        "generation": dict(batch=4, tokens=48, prompt_len=4, units=64, embedding_dim=32, vocab=200),
        "tracking": dict(config="needle", set=["task.num_examples=1000"]),
        "tokenizer": dict(pairs=20_000, vocabulary_size=4000),
        "corpus": dict(small=5_000, large=50_000, sample=5_000),
        "buckets": dict(epochs=1, units=32, vocabulary_size=1000, batch_size=32),
        "repeats": dict(
            fast=8,
            step=5,
            slow=2,
            generation=2,
            tfa_rounds=1,
            warmup=1,
            tracking_epochs=2,
            tracking=2,
        ),
    },
    "tiny": {
        "pooling_overhead": dict(batch=4, time=12, units=8, embedding_dim=8, vocab=50),
        "causal_dot_vs_keras": dict(batch=2, time=12, dim=8),
        "additive_vs_keras": dict(batch=2, query_len=5, value_len=7, dim=8, units=8),
        "decoder": dict(batch=4, source_len=7, target_len=5, units=16, vocab=50),
        "translator": dict(batch=4, source_len=7, target_len=5, units=8, embedding_dim=8, vocab=50),
        "generation": dict(batch=2, tokens=6, prompt_len=2, units=8, embedding_dim=8, vocab=30),
        "tracking": dict(
            config="needle",
            set=[
                "task.num_examples=64",
                "task.max_length=12",
                "task.num_probes=1",
                "model.units=8",
                "model.embedding_dim=8",
                "train.eval_examples=16",
                "train.run_eagerly=true",  # no tracing: the test checks the schema only
            ],
        ),
        "tokenizer": dict(pairs=400, vocabulary_size=600),
        "corpus": dict(small=2_000, large=4_000, sample=1_000),
        "buckets": dict(epochs=1, units=8, vocabulary_size=400, batch_size=64),
        "repeats": dict(
            fast=2,
            step=2,
            slow=1,
            generation=1,
            tfa_rounds=1,
            warmup=0,
            tracking_epochs=1,
            tracking=1,
        ),
    },
}


def profile_name(quick: bool, tiny: bool) -> str:
    """`tiny` (flag or `ATTN_RNN_BENCH_TINY`), else `quick` or `full`."""
    if tiny or os.environ.get(TINY_ENV, "") not in ("", "0"):
        return "tiny"
    return "quick" if quick else "full"
