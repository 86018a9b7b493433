"""Each benchmark's goal, a bound on its ratio (project / peer), by name in report order.

Light on purpose: the `bench` command's `--only` choices come from here without importing
the benchmarks (TensorFlow).
"""

from __future__ import annotations

GOALS = {
    "pooling_overhead": "<=1.10",
    "causal_dot_vs_keras": "<=1.05",
    "additive_vs_keras": "<=1.00",
    "decoder_vs_tfa": ">=1.3",
    "luong_parallel_speedup": ">=2",
    "monotonic_parallel_cost": "<=1.3",
    "location_cost": "<=1.5",
    "gmm_cost": "<=1.5",
    "dca_cost": "<=1.5",
    "relative_location_cost": "<=1.5",
    "copy_cost": "<=1.3",
    "seq2seq_vs_keras_peer": "<=1.5",
    "generation_cache_speedup": ">=10",
    "beam4_cost": "<=5",
    "tracking_overhead": "<=1.05",
    "tokenizer_training": "<=1.0",  # seconds over the 30 s budget
    "length_buckets_speedup": ">=2",  # time to the same val loss (2 %), buckets over one width
    "corpus_memory": "<=1.2",  # peak memory, 10x the rows over 1x
    "corpus_first_step": "<=1.0",  # seconds to the first step over the 300 s budget
}


def goal_met(goal: str, ratio: float) -> bool:
    """Whether `ratio` meets a goal written `"<=1.10"` or `">=10"`."""
    bound = float(goal[2:])
    return ratio <= bound if goal.startswith("<=") else ratio >= bound
