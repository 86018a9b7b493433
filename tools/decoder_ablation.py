"""What each part of `AttentionDecoder` costs in a training step, on one backend.

    KERAS_BACKEND=tensorflow python tools/decoder_ablation.py [--jit-compile] [--repeats 10]

A functional model `[source, target] -> Embedding -> decoder -> Dense(V)` at the shapes
of the `seq2seq_vs_keras_peer` benchmark (B=128, S=T=30, 128 units, V=1000; the
memory is the source's embedding, no encoder), trained with `train_on_batch` (Adam,
sparse cross-entropy from the logits), each variant in turn, the order reversed every
other round. The variants: `lstm` (`keras.layers.LSTM`, no attention: the reference),
`full` (`AttentionDecoder(LSTMCell, additive, attention_layer_size=U)` with input
feeding, the target 0-padded to lengths in `[T/2, T]` and masked), `nomask` (the same
without the target mask), `dot` (dot score), `nofeed` (no input feeding), `nolayer` (no
attention layer). Prints the median milliseconds and the median per-round ratio to
`lstm` of each.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import keras
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's packages, not an installed copy

from keras_attn_rnn.layers import AttentionDecoder  # noqa: E402 - after the checkout is importable

B, S, T, U, V = 128, 30, 30, 128, 1000
VARIANTS = ("lstm", "full", "nomask", "dot", "nofeed", "nolayer")


def build(variant, jit_compile):
    source = keras.Input((S,), dtype="int32")
    target = keras.Input((T,), dtype="int32")
    memory = keras.layers.Embedding(V, U)(source)
    x = keras.layers.Embedding(V, U, mask_zero=variant != "nomask")(target)
    if variant == "lstm":
        h = keras.layers.LSTM(U, return_sequences=True)(x)
    else:
        options = dict(score="additive", units=U, attention_layer_size=U, input_feeding=True)
        if variant == "dot":
            options.update(score="dot", units=None)
        if variant == "nofeed":
            options.update(input_feeding=False)
        if variant == "nolayer":
            options.update(attention_layer_size=None)
        h = AttentionDecoder(keras.layers.LSTMCell(U), **options)([x, memory])
    model = keras.Model([source, target], keras.layers.Dense(V)(h))
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jit-compile", action="store_true")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--only", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    source = rng.integers(1, V, (B, S)).astype("int32")
    target = rng.integers(1, V, (B, T)).astype("int32")
    target[np.arange(T)[None] >= rng.integers(T // 2, T + 1, B)[:, None]] = 0
    labels = rng.integers(1, V, (B, T)).astype("int32")
    steps = {}
    for variant in args.only:
        model = build(variant, args.jit_compile)
        for _ in range(2):  # tracing, compilation
            model.train_on_batch([source, target], labels)
        steps[variant] = lambda model=model: model.train_on_batch([source, target], labels)
    times = {variant: [] for variant in args.only}
    for i in range(args.repeats):
        for variant in args.only if i % 2 == 0 else args.only[::-1]:
            start = time.perf_counter()
            steps[variant]()
            times[variant].append(time.perf_counter() - start)
    reference = args.only[0]
    for variant in args.only:
        ratio = statistics.median(a / b for a, b in zip(times[variant], times[reference]))
        print(
            f"{keras.backend.backend()} jit_compile={args.jit_compile} {variant:8s} "
            f"{statistics.median(times[variant]) * 1e3:7.1f} ms  x{reference} {ratio:.2f}"
        )


if __name__ == "__main__":
    main()
