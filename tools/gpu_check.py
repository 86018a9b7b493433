"""The GPU check of issue 28: one script for a lent GPU machine (JAX; no TensorFlow, no MLflow).

Three parts, written to one JSON file:

1. `demo`: the ready config `demo` (its task, its model, built by the runner's task kind)
   trained with `fit` under `jit_compile` and mixed precision (`mixed_bfloat16` by
   default), in two child processes, one on the accelerator and one with
   `JAX_PLATFORMS=cpu`: epochs/s and tokens/s of each, and their ratio.
2. `decoder_step`: the training step (forward, backward, Adam) of an `AttentionDecoder`
   with each registered mechanism, against a plain `keras.layers.LSTM` of the same
   size (cuDNN-backed where the backend uses cuDNN: PyTorch; JAX's Keras LSTM has no
   cuDNN path), as `ratio = decoder_s / lstm_s`, all in one process.
3. `generation`: cached greedy generation of a `Seq2Seq` (`keras_attn_rnn.generation`)
   against one forward pass of the plain LSTM over as many steps.

`--device cpu` is the dry run (tiny sizes, two timed repeats; CI runs it): it checks
the script end to end on any machine. On the device machine (see docs/results/benchmarks.md, "GPU
check"), carry the pure-Python wheels it lacks (keras, namex, optree, pydantic and
its parts) and run:

    KERAS_BACKEND=jax python3 tools/gpu_check.py --device gpu --out $OUT/bench_gpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments import backends, ready_configs  # noqa: E402 - after the checkout is importable
from experiments import config as config_lib  # noqa: E402
from experiments.tasks import build_task  # noqa: E402
from experiments.training import supervision  # noqa: E402
from experiments.training.batches import epoch_batches  # noqa: E402
from keras_attn_rnn import AttentionDecoder, mechanisms  # noqa: E402
from keras_attn_rnn.generation import generate  # noqa: E402
from keras_attn_rnn.models import Seq2Seq  # noqa: E402

SIZES = {
    # batch, source length, target length, embedding, units, vocabulary, timed repeats
    "gpu": {
        "batch": 256,
        "source": 64,
        "target": 64,
        "embed": 128,
        "units": 512,
        "vocab": 1000,
        "repeats": 20,
        "demo_epochs": 4,
        "demo_examples": 20000,
    },
    "cpu": {
        "batch": 4,
        "source": 6,
        "target": 5,
        "embed": 8,
        "units": 8,
        "vocab": 20,
        "repeats": 2,
        "demo_epochs": 2,
        "demo_examples": 128,
    },
}
# What each mechanism needs besides the defaults (the registry lists the required ones).
MECHANISM_ARGUMENTS = {"units": None, "score": "additive"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--out", default="docs/bench_gpu.json")
    parser.add_argument(
        "--precision",
        choices=("bfloat16", "float16", "float32"),
        default="bfloat16",
        help="demo's mixed precision (float32: none)",
    )
    parser.add_argument("--demo-only-on", choices=("gpu", "cpu"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = SIZES[args.device]
    if args.demo_only_on:  # a child process: the demo part on one platform, JSON on stdout
        print("DEMO " + json.dumps(demo(sizes, args.precision)))
        return 0
    if args.device == "gpu" and not backends.current().accelerators():
        parser.error(f"--device gpu: no accelerator visible to {keras.backend.backend()}")
    report = {
        "device": backends.current().device(),
        "mode": args.device,
        "backend": keras.backend.backend(),
        "keras_version": keras.__version__,
        "python": platform.python_version(),
        "sizes": sizes,
        "demo": {
            p: _demo_child(p, args) for p in (["gpu", "cpu"] if args.device == "gpu" else ["cpu"])
        },
        "decoder_step": decoder_steps(sizes),
        "generation": generation(sizes),
    }
    if "gpu" in report["demo"]:
        report["demo"]["speedup_tokens_per_second"] = (
            report["demo"]["gpu"]["tokens_per_second"] / report["demo"]["cpu"]["tokens_per_second"]
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(markdown(report))
    print(f"written: {out}")
    return 0


def _demo_child(where: str, args) -> dict:
    """The demo part in a child process on `where` (the CPU one with JAX_PLATFORMS=cpu)."""
    env = dict(os.environ)
    if where == "cpu":
        env.update(JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")
    command = [
        sys.executable,
        __file__,
        "--device",
        args.device,
        "--precision",
        args.precision,
        "--demo-only-on",
        where,
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(f"demo on {where} failed:\n{done.stderr[-3000:]}")
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("DEMO ")]
    return json.loads(line.removeprefix("DEMO "))


def demo(sizes: dict, precision: str) -> dict:
    """`demo` trained with fit (jit, mixed precision): epochs/s and tokens/s after epoch 1."""
    cfg = config_lib.load_config(
        ready_configs.resolve("demo"),
        [f"task.num_examples={sizes['demo_examples']}", f"train.epochs={sizes['demo_epochs']}"],
    )
    task = build_task(cfg.task)
    kind = task.kind
    cfg = kind.resolve(cfg, task)
    if precision != "float32":
        keras.config.set_dtype_policy(f"mixed_{precision}")
    keras.utils.set_random_seed(0)
    model = kind.build_model(cfg, task)
    model.compile(
        optimizer=keras.optimizers.Adam(cfg.train.learning_rate),
        loss=kind.loss(model),
        jit_compile=True,
    )
    batches = epoch_batches(
        task.train, cfg.train.batch_size, 0, 0, lambda part: supervision.fit_inputs(model, part)
    )
    clock = _EpochTimes()
    model.fit(batches, epochs=sizes["demo_epochs"], callbacks=[clock], verbose=0)
    timed = clock.seconds[1:]  # epoch 1 compiles
    seconds = statistics.median(timed)
    return {
        "device": ", ".join(backends.current().accelerators()) or "cpu",
        "precision": precision,
        "epoch_seconds": seconds,
        "epochs_per_second": 1.0 / seconds,
        "tokens_per_second": kind.tokens_per_epoch(task.train) / seconds,
        "first_epoch_seconds": clock.seconds[0],
        "train_rows": len(task.train),
        "batch_size": cfg.train.batch_size,
    }


class _EpochTimes(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.start)


def _median_seconds(step, repeats: int) -> float:
    step()  # compiles
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _train_step(model, inputs, targets):
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    return lambda: model.train_on_batch(inputs, targets)  # returns the loss: synchronised


def _mechanism(name: str, units: int):
    required = set(mechanisms.REGISTRY.arguments(name)) - set(mechanisms.REGISTRY.defaults(name))
    kwargs = {
        k: (units if k == "units" else v) for k, v in MECHANISM_ARGUMENTS.items() if k in required
    }
    return mechanisms.get(name, **kwargs)


def decoder_steps(sizes: dict) -> dict:
    """Each mechanism's decoder training step against a plain LSTM's, in one process."""
    b, s, t, e, u, v = (sizes[k] for k in ("batch", "source", "target", "embed", "units", "vocab"))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(b, t, e)).astype("float32")
    memory = rng.normal(size=(b, s, u)).astype("float32")
    y = rng.integers(0, v, size=(b, t)).astype("int32")

    def lstm_model():
        inputs = keras.Input((t, e))
        hidden = keras.layers.LSTM(u, return_sequences=True)(inputs)
        return keras.Model(inputs, keras.layers.Dense(v)(hidden))

    lstm_s = _median_seconds(_train_step(lstm_model(), x, y), sizes["repeats"])
    out = {"lstm_s": lstm_s}
    for name in mechanisms.names():
        keras.utils.set_random_seed(0)
        x_in, m_in = keras.Input((t, e)), keras.Input((s, u))
        decoder = AttentionDecoder(keras.layers.LSTMCell(u), attention=_mechanism(name, u))
        model = keras.Model([x_in, m_in], keras.layers.Dense(v)(decoder([x_in, m_in])))
        seconds = _median_seconds(_train_step(model, [x, memory], y), sizes["repeats"])
        out[name] = {"decoder_s": seconds, "ratio_to_lstm": seconds / lstm_s}
    return out


def generation(sizes: dict) -> dict:
    """Cached greedy generation of `target` tokens against one plain-LSTM forward pass."""
    b, s, t, e, u, v = (sizes[k] for k in ("batch", "source", "target", "embed", "units", "vocab"))
    keras.utils.set_random_seed(0)
    model = Seq2Seq(source_vocabulary_size=v, target_vocabulary_size=v, embedding_dim=e, units=u)
    source = np.random.default_rng(0).integers(3, v, size=(b, s)).astype("int32")
    model([source, source[:, :t]])
    cached = _median_seconds(
        lambda: np.asarray(
            generate(model, source, t, sampler="greedy", start_id=1, eos_id=2).tokens
        ),
        sizes["repeats"],
    )
    inputs = keras.Input((t, e))
    lstm = keras.Model(inputs, keras.layers.LSTM(u, return_sequences=True)(inputs))
    lstm.compile(jit_compile=True)  # predict_on_batch: compiled, as generation is
    x = np.zeros((b, t, e), "float32")
    forward = _median_seconds(lambda: lstm.predict_on_batch(x), sizes["repeats"])
    return {
        "cached_greedy_s": cached,
        "tokens_per_second": b * t / cached,
        "lstm_forward_s": forward,
        "ratio_to_lstm_forward": cached / forward,
    }


def markdown(report: dict) -> str:
    """The benchmarks page's GPU column, ready to paste."""
    rows = [
        f"| decoder step, {name} | {r['ratio_to_lstm']:.2f}× LSTM |"
        for name, r in report["decoder_step"].items()
        if name != "lstm_s"
    ]
    g = report["generation"]
    rows.append(
        f"| cached greedy generation | {g['tokens_per_second']:.0f} tokens/s "
        f"({g['ratio_to_lstm_forward']:.2f}× an LSTM forward) |"
    )
    for where, d in report["demo"].items():
        if isinstance(d, dict):
            rows.append(
                f"| demo on {where} ({d['precision']}) | {d['epochs_per_second']:.2f} "
                f"epochs/s, {d['tokens_per_second']:.0f} tokens/s |"
            )
    return "\n".join([f"| {report['device']} ({report['backend']}) | |", "|---|---|", *rows])


if __name__ == "__main__":
    sys.exit(main())
