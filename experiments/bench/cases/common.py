"""What every benchmark shares: its `Options`, `Skip`, the compiled training step and helpers.

Training steps are compiled the same way on both sides of every benchmark:
one `tf.function` (with `jit_compile` per `--jit-compile`) holding forward,
backward and, for model steps, an Adam update — the same step the tfa peer
script (`bench/tfa_peer.py`) times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from experiments.bench.profiles import PROFILES


class Skip(Exception):
    """The benchmark cannot run here; the message says why."""


@dataclass
class Options:
    """What every benchmark needs to know about the run."""

    profile: str = "full"
    jit_compile: bool = False
    tfa_python: str | None = None
    seed: int = 0
    # tracking_overhead logs to the runner's store (MLFLOW_TRACKING_URI or mlruns/mlflow.db),
    # or, with `--no-mlflow`, to a throw-away SQLite store
    temporary_store: bool = False
    repeats_override: int | None = None  # `--repeats N`: N pairs for every benchmark
    # `--pairs FILE`: length_buckets_speedup measures on this file of pairs too
    pairs_file: str | None = None

    @property
    def sizes(self) -> dict:
        return PROFILES[self.profile]

    @property
    def repeats(self) -> dict:
        counts = dict(PROFILES[self.profile]["repeats"])
        if self.repeats_override:
            for key in ("fast", "step", "slow", "generation", "tracking"):
                counts[key] = self.repeats_override
        return counts


def compiled_step(
    forward: Callable[[], object],
    variables: Callable[[], list],
    jit_compile: bool,
    watch: tuple = (),
    optimizer=None,
) -> Callable[[], float]:
    """One compiled training step: forward + backward (+ optimizer update) in a `tf.function`.

    `forward()` returns a scalar loss. It is run once eagerly first, so every
    layer is built; `variables()` then lists the trainable variables. Tensors
    in `watch` (inputs) get gradients too, so layers without weights still do
    a backward pass. The returned callable runs the step and fetches the loss
    to the host.
    """

    forward()
    weights = list(variables())
    if optimizer is not None:
        optimizer.build(weights)

    @tf.function(jit_compile=jit_compile, autograph=False)  # Keras layers need no autograph
    def step():
        with tf.GradientTape() as tape:
            for tensor in watch:
                tape.watch(tensor)
            loss = forward()
        grads = tape.gradient(loss, weights + list(watch))
        if optimizer is not None:
            optimizer.apply_gradients(zip(grads[: len(weights)], weights))
            return loss, grads[len(weights) :]
        return loss, grads

    def run() -> float:
        loss, _ = step()
        return float(loss)

    return run


def random_generator(options: Options) -> np.random.Generator:
    """The benchmark's random generator, seeded by `--seed`."""
    return np.random.default_rng(options.seed)


def adam():
    """The optimizer both sides of a model step update with."""
    return keras.optimizers.Adam(1e-3)


def mean_square(x):
    """A scalar loss over any output, computed in float32."""
    return ops.mean(ops.square(ops.cast(x, "float32")))
