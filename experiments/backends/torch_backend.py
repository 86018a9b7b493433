"""The PyTorch backend: eager calls, one device."""

from __future__ import annotations

import torch

from experiments.backends.backend import Backend


class TorchBackend(Backend):
    name = "torch"

    def compile_inference(self, model, call):
        """`call` eagerly, recording no gradients (its outputs convert to NumPy)."""

        def no_grad(inputs):
            with torch.no_grad():
                return call(inputs)

        return no_grad

    def accelerators(self) -> list[str]:
        if not torch.cuda.is_available():
            return []
        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]

    def versions(self) -> dict[str, str]:
        return {"torch_version": torch.__version__}

    def requirements(self) -> list[str]:
        return [f"torch=={torch.__version__}"]


BACKEND = TorchBackend()
