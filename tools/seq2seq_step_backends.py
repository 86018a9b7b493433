"""Training-step time of the ready translators on one backend, interleaved in one process.

    KERAS_BACKEND=jax python tools/seq2seq_step_backends.py --jit-compile [--repeats 20]

The shapes of the `seq2seq_vs_keras_peer` benchmark (B=128, S=T=30, 128 units and
embedding, 1,000-word vocabularies; `--quick`: its quick profile), source and target
0-padded to per-example lengths in `[L/2, L]`. Each model is `compile`d (Adam, sparse
cross-entropy from the logits; `--jit-compile` passes `jit_compile=True`: XLA on
TensorFlow and JAX) and `train_on_batch` is timed after two warm-up calls, the models in
turn, the order reversed every other round. The models: `peer`
(`experiments/peers/keras_seq2seq.py`), `bahdanau` (`Seq2Seq`, additive score, input
feeding), `bahdanau_dot` (the same loop with the dot score: what the in-loop additive
score costs), `luong_dot` and `luong_additive` (`Seq2Seq(decoder="luong")`). Prints one
line per model: the median milliseconds and the median of its per-round ratios to the
first model (`--only` chooses and orders them; the first is the reference).

`python -m experiments bench` runs on TensorFlow only (its steps are `tf.function`s); this
script is its counterpart for JAX and PyTorch.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import keras
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's packages, not an installed copy

from experiments.bench.profiles import PROFILES  # noqa: E402 - after the checkout is importable
from experiments.peers import keras_seq2seq  # noqa: E402
from keras_attn_rnn.models import Seq2Seq  # noqa: E402

KINDS = {
    "peer": None,
    "bahdanau": ("bahdanau", "additive"),
    "bahdanau_dot": ("bahdanau", "dot"),
    "luong_dot": ("luong", "dot"),
    "luong_additive": ("luong", "additive"),
}


def data(s, seed=0):
    rng = np.random.default_rng(seed)

    def ids(length):
        x = rng.integers(1, s["vocab"], size=(s["batch"], length))
        lengths = rng.integers(max(1, length // 2), length + 1, size=(s["batch"],))
        return np.where(np.arange(length)[None, :] < lengths[:, None], x, 0).astype("int32")

    source, target = ids(s["source_len"]), ids(s["target_len"] + 1)
    return [source, target[:, :-1]], target[:, 1:]


def model(kind, s, jit_compile):
    sizes = (s["vocab"], s["vocab"], s["embedding_dim"], s["units"])
    if kind == "peer":
        built = keras_seq2seq.build(*sizes)
    else:
        decoder, score = KINDS[kind]
        built = Seq2Seq(
            *sizes[:2],
            embedding_dim=s["embedding_dim"],
            units=s["units"],
            decoder=decoder,
            attention={"score": score},
        )
    built.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return built


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jit-compile", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--only", nargs="+", choices=list(KINDS), default=list(KINDS))
    args = parser.parse_args()
    s = PROFILES["quick" if args.quick else "full"]["translator"]
    x, y = data(s)
    steps = {}
    for kind in args.only:
        built = model(kind, s, args.jit_compile)
        for _ in range(2):  # tracing, compilation
            built.train_on_batch(x, y)
        steps[kind] = lambda built=built: built.train_on_batch(x, y)
    times = {kind: [] for kind in args.only}
    for i in range(args.repeats):
        for kind in args.only if i % 2 == 0 else args.only[::-1]:
            start = time.perf_counter()
            steps[kind]()
            times[kind].append(time.perf_counter() - start)
    reference = args.only[0]
    for kind in args.only:
        ratios = [a / b for a, b in zip(times[kind], times[reference])]
        record = {
            "backend": keras.backend.backend(),
            "jit_compile": args.jit_compile,
            "model": kind,
            "median_ms": round(statistics.median(times[kind]) * 1e3, 1),
            "min_ms": round(min(times[kind]) * 1e3, 1),
            f"ratio_to_{reference}": round(statistics.median(ratios), 3),
            "repeats": args.repeats,
            "shapes": s,
        }
        print(json.dumps(record))


if __name__ == "__main__":
    main()
