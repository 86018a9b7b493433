"""The JAX backend: `keras.distribution.DataParallel`, `jax.jit` calls, process 0 logs."""

from __future__ import annotations

import importlib.metadata

import jax
import keras

from experiments.backends.backend import Backend


class JaxBackend(Backend):
    name = "jax"
    distribute = ("none", "data_parallel")

    def jit_compile(self, requested: bool) -> bool:
        """Always: `jax.jit` is JAX's only graph mode (without it each op runs on its own,
        tens of times slower); `train.run_eagerly` is the way to debug op by op."""
        return True

    def compile_inference(self, model, call):
        """`call` as one `jax.jit` of the model's `stateless_call` (with its current weights)."""

        @jax.jit
        def stateless(trainable, non_trainable, inputs):
            with keras.StatelessScope(
                state_mapping=[
                    *zip(model.trainable_variables, trainable),
                    *zip(model.non_trainable_variables, non_trainable),
                ]
            ):
                return call(inputs)

        def compiled(inputs):
            trainable = [v.value for v in model.trainable_variables]
            non_trainable = [v.value for v in model.non_trainable_variables]
            return stateless(trainable, non_trainable, inputs)

        return compiled

    def accelerators(self) -> list[str]:
        return [f"{d.platform}:{d.device_kind}" for d in jax.devices() if d.platform != "cpu"]

    def versions(self) -> dict[str, str]:
        return {"jax_version": jax.__version__}

    def requirements(self) -> list[str]:
        return [f"jax=={jax.__version__}", f"jaxlib=={importlib.metadata.version('jaxlib')}"]

    def replicas(self, distribute: str) -> int:
        """`data_parallel`: every device of every process (`keras.distribution.list_devices`)."""
        return len(keras.distribution.list_devices()) if distribute == "data_parallel" else 1

    def is_chief(self, distribute: str) -> bool:
        return jax.process_index() == 0

    def process(self) -> tuple[int, int]:
        return (jax.process_index(), jax.process_count())

    def make_distribution(self, distribute: str):
        if distribute == "data_parallel":
            # Each process feeds its own shard of every global batch (`EpochBatches.shard`).
            return keras.distribution.DataParallel(
                devices=keras.distribution.list_devices(), auto_shard_dataset=False
            )
        return None

    def training_scope(self, distribution):
        return distribution.scope() if distribution is not None else super().training_scope(None)

    def replicas_of(self, distribution) -> int:
        return int(distribution.device_mesh.devices.size)


BACKEND = JaxBackend()
