"""`Backend`: what the runner does differently on each Keras backend."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable


class Backend:
    """The runner's view of one Keras backend; subclasses fill in the framework's parts.

    Attributes:
        name: the `KERAS_BACKEND` name.
        distribute: the `train.distribute` settings it trains with.
        saved_model: whether the Keras-flavor `model` (a TensorFlow SavedModel, whose
            serving function TensorFlow traces) is logged.
    """

    name = ""
    distribute: tuple[str, ...] = ("none",)
    saved_model = False

    def fit_data(self, feed):
        """What `fit` is given for the training feed `feed` (a `keras.utils.PyDataset`): the
        feed itself by default."""
        return feed

    def validation_data(self, inputs, y, batch_size: int) -> dict:
        """`fit`'s arguments for the validation split (`inputs`, `y`), `batch_size` rows a
        batch: the arrays themselves by default."""
        return {"validation_data": (inputs, y), "validation_batch_size": batch_size}

    def jit_compile(self, requested: bool) -> bool:
        """`compile(jit_compile=)` for `train.jit_compile` (`requested`)."""
        return requested

    def pad_multiple(self, requested: bool) -> int:
        """What length-bucketed batches (`LengthBatches`) are padded to a multiple of, for
        `train.jit_compile` (`requested`; the step compiles as `jit_compile()` says): 16 where
        each new batch shape is compiled anew (XLA: JAX, TensorFlow's `jit_compile`), else
        1: TensorFlow's graph step is traced once for any lengths (`fit_data` declares them
        unknown) and PyTorch runs eagerly, so padding a row further only adds steps. On the
        GNU pairs (bahdanau LSTM 128, batch 32, TensorFlow graph mode) an epoch took 18.5 and
        19.0 s padded to a multiple of 1 against 19.8 and 20.9 s to a multiple of 4, the
        same loss (docs/results/benchmarks.md)."""
        return 16 if self.jit_compile(requested) else 1

    def compile_inference(self, model, call: Callable) -> Callable:
        """`call(inputs)` (which runs `model` in inference mode) compiled for repeated use."""
        return call

    def accelerators(self) -> list[str]:
        """Names of the accelerators (GPUs) the backend computes on; empty on CPU."""
        return []

    def versions(self) -> dict[str, str]:
        """`{"jax_version": ...}`: the framework's packages, as run tags."""
        return {}

    def runtime_tags(self) -> dict[str, str]:
        """How the framework runs here beyond its version, as run tags (none by default)."""
        return {}

    def requirements(self) -> list[str]:
        """Pinned pip requirements of the framework, for the logged text model."""
        return []

    def device(self) -> str:
        """What the run computes on, for the `device` tag: GPU names, else the CPU."""
        gpus = self.accelerators()
        return ", ".join(gpus) if gpus else f"cpu ({os.cpu_count()} cores)"

    def replicas(self, distribute: str) -> int:
        """The replicas `distribute` trains on, counted before anything starts."""
        return 1

    def is_chief(self, distribute: str) -> bool:
        """Whether this process logs to MLflow and writes checkpoints."""
        return True

    def process(self) -> tuple[int, int]:
        """`(index, count)` of this process in a multi-process job (`(0, 1)` alone)."""
        return (0, 1)

    def make_distribution(self, distribute: str):
        """The strategy (or Keras distribution) whose `scope()` the model is built in (None
        for `none`)."""
        return None

    def training_scope(self, distribution):
        """The context the whole training runs in (a Keras distribution also shards `fit`'s
        batches); nothing by default."""
        return contextlib.nullcontext()

    def replicas_of(self, distribution) -> int:
        """The replicas `distribution` (from `make_distribution`) trains on."""
        return 1
