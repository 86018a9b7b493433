"""A translator's beam search with its own `reorder_cache` (the encoder memory left in
place) against gathering the whole cache every step, in one process.

    python tools/beam_reorder_speed.py [--decoder bahdanau|luong] [--repeats 9] [--jit-compile]

`Seq2Seq(vocab 1000 -> 1000, embedding 128, LSTM 256, decoder)`, 16 sources of 30
tokens, 30 tokens with `BeamSampler(4)` and greedily; the three generations alternate,
after one warm-up each. Prints one JSON line: median seconds each, the ratios, and
whether both beam searches gave the same tokens and scores.
"""

import argparse
import json
import statistics
import time

import keras
import numpy as np

from keras_attn_rnn import models, samplers
from keras_attn_rnn.generation import generate


class GathersAll:
    """The model without its `reorder_cache`: beam search gathers every tensor of the cache."""

    def __init__(self, model):
        self.model = model

    def __getattr__(self, name):
        if name == "reorder_cache":
            raise AttributeError(name)
        return getattr(self.model, name)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--decoder", default="bahdanau", choices=["bahdanau", "luong"])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--jit-compile", action="store_true")
    args = parser.parse_args()
    keras.utils.set_random_seed(0)
    model = models.Seq2Seq(1000, 1000, embedding_dim=128, units=256, decoder=args.decoder)
    source = np.random.default_rng(0).integers(1, 1000, (16, 30)).astype("int32")
    source[::3, 20:] = 0  # some shorter sources
    model([source, source[:, :5]])
    beam = samplers.BeamSampler(4)
    gathering = GathersAll(model)  # one object: its decoding function is traced once
    options = dict(start_id=1, jit_compile=args.jit_compile)
    runs = {
        "beam": lambda: generate(model, source, 30, sampler=beam, **options),
        "beam_gathering_all": lambda: generate(gathering, source, 30, sampler=beam, **options),
        "greedy": lambda: generate(model, source, 30, sampler="greedy", **options),
    }
    first = {name: run() for name, run in runs.items()}
    times = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(seconds) for name, seconds in times.items()}
    same = bool(
        np.array_equal(first["beam"].tokens, first["beam_gathering_all"].tokens)
        and np.array_equal(first["beam"].scores, first["beam_gathering_all"].scores)
    )
    print(
        json.dumps(
            {
                "backend": keras.backend.backend(),
                "decoder": args.decoder,
                "jit_compile": args.jit_compile,
                "median_s": {name: round(value, 4) for name, value in median.items()},
                "beam_over_gathering_all": round(median["beam"] / median["beam_gathering_all"], 3),
                "beam_over_greedy": round(median["beam"] / median["greedy"], 2),
                "gathering_all_over_greedy": round(
                    median["beam_gathering_all"] / median["greedy"], 2
                ),
                "same_tokens_and_scores": same,
            }
        )
    )


if __name__ == "__main__":
    main()
