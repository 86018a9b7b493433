"""The side-by-side benchmarks, by family: the project against its peer (goals: `goals.py`).

Every benchmark takes the run's `common.Options` and returns the fields of
`timing.paired` plus its `shapes`, what `project` and `peer` are, and
anything it measured on the side; one that cannot run here raises
`common.Skip` with the reason. `BENCHMARKS` is the registry, in report order.
"""

from __future__ import annotations

from experiments.bench.cases import corpus, decoder, generation, layers, text, tracking

BENCHMARKS = {
    "pooling_overhead": layers.pooling_overhead,
    "causal_dot_vs_keras": layers.causal_dot_vs_keras,
    "additive_vs_keras": layers.additive_vs_keras,
    "decoder_vs_tfa": decoder.decoder_vs_tfa,
    "luong_parallel_speedup": decoder.luong_parallel_speedup,
    "monotonic_parallel_cost": decoder.monotonic_parallel_cost,
    "location_cost": decoder.location_cost,
    **{f"{name}_cost": decoder.mechanism_cost(name) for name in decoder.MECHANISM_COSTS},
    "copy_cost": decoder.copy_cost,
    "seq2seq_vs_keras_peer": decoder.seq2seq_vs_keras_peer,
    "generation_cache_speedup": generation.generation_cache_speedup,
    "beam4_cost": generation.beam4_cost,
    "tracking_overhead": tracking.tracking_overhead,
    "tokenizer_training": text.tokenizer_training,
    "length_buckets_speedup": corpus.length_buckets_speedup,
    "corpus_memory": corpus.corpus_memory,
    "corpus_first_step": corpus.corpus_first_step,
}
