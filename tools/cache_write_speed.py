"""The decoding cache's write as a scatter of the step's rows (what `SequenceAttention`
does) against one `where` over the whole cache (what it did), in one process.

    python tools/cache_write_speed.py [--repeats 8]

The `beam4_cost` benchmark's `AttentiveLanguageModel` and prompts, built twice with
the same weights, one generation function traced with each write; greedy and
`BeamSampler(4)` generations alternate between the two, the order flipping each round.
Prints one JSON line: median seconds of each, the medians of the per-round ratios
(scatter over where) and whether both writes gave the same tokens.
"""

import argparse
import json
import statistics

import keras
import numpy as np
from keras import ops

from experiments.bench import timing
from experiments.bench.cases import generation
from experiments.bench.cases.common import Options
from keras_attn_rnn import samplers
from keras_attn_rnn.generation import generate
from keras_attn_rnn.layers import sequence_attention

SCATTER = sequence_attention._write


def where_write(cache, update, index):
    """The former write of a one-position update: a `where` over all `B * L * d` entries."""
    batch, length = ops.shape(cache)[0], ops.shape(cache)[1]
    index = ops.broadcast_to(ops.reshape(ops.cast(index, "int32"), (-1, 1)), (batch, 1))
    hit = ops.equal(ops.arange(length, dtype="int32")[None, :], index)
    return ops.where(ops.expand_dims(hit, -1), ops.cast(update, cache.dtype), cache)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=8)
    args = parser.parse_args()
    options = Options(profile="full")
    runs = {}
    for name, write in (("where", where_write), ("scatter", SCATTER)):
        sizes, model, prompts = generation._language_model(options)
        sequence_attention._write = write  # read when the generation is traced, below
        tokens = sizes["tokens"]
        runs[name] = {
            "beam": lambda m=model, p=prompts, n=tokens: generate(
                m, p, n, sampler=samplers.BeamSampler(4)
            ),
            "greedy": lambda m=model, p=prompts, n=tokens: generate(m, p, n, sampler="greedy"),
        }
        runs[name]["tokens"] = [runs[name][k]().tokens for k in ("beam", "greedy")]
    sequence_attention._write = SCATTER
    times = {name: {"beam": [], "greedy": []} for name in runs}
    for round_index in range(args.repeats):
        order = list(runs) if round_index % 2 == 0 else list(runs)[::-1]
        for name in order:
            for kind in ("beam", "greedy"):
                times[name][kind].append(timing.clock(runs[name][kind]))

    def ratio(kind):
        pairs = zip(times["scatter"][kind], times["where"][kind])
        return round(statistics.median(a / b for a, b in pairs), 3)

    print(
        json.dumps(
            {
                "backend": keras.backend.backend(),
                "seconds": {
                    name: {k: round(statistics.median(v), 4) for k, v in kinds.items()}
                    for name, kinds in times.items()
                },
                "scatter_over_where": {"beam": ratio("beam"), "greedy": ratio("greedy")},
                "beam_over_greedy": {
                    name: round(
                        statistics.median(a / b for a, b in zip(kinds["beam"], kinds["greedy"])),
                        3,
                    )
                    for name, kinds in times.items()
                },
                "same_tokens": all(
                    np.array_equal(a, b)
                    for a, b in zip(runs["where"]["tokens"], runs["scatter"]["tokens"])
                ),
                "repeats": args.repeats,
            }
        )
    )


if __name__ == "__main__":
    main()
