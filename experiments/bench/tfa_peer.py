"""Peer benchmark: one training step of a TensorFlow Addons attention decoder.

Standalone; runs ONLY under the separate TF 2.15 + tensorflow-addons 0.23 interpreter
(tfa is not a project dependency, and this script does not import the project)::

    /work/tfa-venv/bin/python experiments/bench/tfa_peer.py --jit 0 --repeats 20 --warmup 3
    /work/tfa-venv/bin/python experiments/bench/tfa_peer.py --jit 1 --repeats 20 --warmup 3

Workload (defaults): memory (B=64, S=50, 256) with per-example lengths in [S/2, S]
(``memory_sequence_length`` masking), decoder inputs (64, 30, 256),
``BahdanauAttention(256)`` + ``LSTMCell(256)`` in ``AttentionWrapper(attention_layer_size=256)``
driven by ``tf.keras.layers.RNN(return_sequences=True)``, ``Dense(1000)`` projection, sparse
categorical cross-entropy from logits, and an optimizer apply (Adam by default). The whole
step (setup_memory + forward + backward + apply) is one ``tf.function`` (``jit_compile`` per
``--jit``). Each timed repeat ends by fetching the loss to host.

Prints ONE JSON line to stdout:
``{"peer": "tfa", "tf": ..., "tfa": ..., "jit": bool, "times_s": [...], "median_s": ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
warnings.filterwarnings("ignore")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--source-len", type=int, default=50)
    p.add_argument("--target-len", type=int, default=30)
    p.add_argument("--units", type=int, default=256)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--jit", type=int, choices=(0, 1), default=0)
    p.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="tiny shapes and few repeats (smoke test)")
    a = p.parse_args(argv)
    if a.quick:
        a.batch, a.source_len, a.target_len, a.units, a.vocab = 4, 7, 5, 16, 50
        a.repeats, a.warmup = min(a.repeats, 3), min(a.warmup, 1)
    return a


def main(argv=None):
    args = parse_args(argv)
    # Here, not at the top: only the tfa interpreter has tensorflow_addons, and this file sits
    # in the project's package, where tools that walk it must still be able to import it.
    import numpy as np
    import tensorflow as tf
    import tensorflow_addons as tfa

    tf.random.set_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    B, S, T, U, V = args.batch, args.source_len, args.target_len, args.units, args.vocab

    memory = tf.constant(rng.standard_normal((B, S, U)).astype(np.float32))
    lengths = tf.constant(rng.integers(max(1, S // 2), S + 1, size=(B,)).astype(np.int32))
    dec_inputs = tf.constant(rng.standard_normal((B, T, U)).astype(np.float32))
    targets = tf.constant(rng.integers(0, V, size=(B, T)).astype(np.int32))

    mech = tfa.seq2seq.BahdanauAttention(units=U)
    cell = tfa.seq2seq.AttentionWrapper(
        tf.keras.layers.LSTMCell(U), mech, attention_layer_size=U, output_attention=True
    )
    rnn = tf.keras.layers.RNN(cell, return_sequences=True)
    proj = tf.keras.layers.Dense(V)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if args.optimizer == "adam":
        opt = tf.keras.optimizers.Adam(1e-3)
    else:
        opt = tf.keras.optimizers.SGD(1e-2)

    def forward():
        mech.setup_memory(memory, memory_sequence_length=lengths)
        h = rnn(dec_inputs)
        return loss_fn(targets, proj(h))

    forward()  # build every variable eagerly
    variables = rnn.trainable_variables + mech.trainable_variables + proj.trainable_variables
    # de-duplicate (the mechanism is tracked by the wrapper too)
    seen, uniq = set(), []
    for v in variables:
        if id(v) not in seen:
            seen.add(id(v))
            uniq.append(v)
    variables = uniq

    @tf.function(jit_compile=bool(args.jit))
    def step():
        with tf.GradientTape() as tape:
            loss = forward()
        grads = tape.gradient(loss, variables)
        opt.apply_gradients(zip(grads, variables))
        return loss

    for _ in range(args.warmup):
        float(step())
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        float(step())
        times.append(time.perf_counter() - t0)

    rec = {
        "peer": "tfa",
        "tf": tf.__version__,
        "tfa": tfa.__version__,
        "jit": bool(args.jit),
        "optimizer": args.optimizer,
        "shapes": {"batch": B, "source_len": S, "target_len": T, "units": U, "vocab": V},
        "n_variables": len(variables),
        "times_s": [round(t, 6) for t in times],
        "median_s": statistics.median(times),
    }
    sys.stdout.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
