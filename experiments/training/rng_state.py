"""Random-number state that Keras's weight files leave out: the layers' seed generators.

`model.save_weights` stores weights only; dropout and other random layers keep
their position in the random stream in `SeedGenerator` state variables, which
a checkpoint must carry for a resumed run to draw the same numbers. The
runner seeds the global generators when a run starts and Python's and NumPy's
again at every epoch start (`EpochClock`), so these states are the rest of
what `resume` needs.
"""

from __future__ import annotations

import numpy as np


def seed_states(model) -> list:
    """The model's seed-generator state variables, in a stable order."""
    weights = {id(v) for v in model.weights}
    out = [v for v in model.variables if id(v) not in weights]
    optimizer = getattr(model, "optimizer", None)
    optimizer_vars = {id(v) for v in getattr(optimizer, "variables", [])} if optimizer else set()
    return [v for v in out if id(v) not in optimizer_vars]


def capture(model) -> dict[str, np.ndarray]:
    """`{"s00000": state, ...}` for `np.savez`."""
    return {f"s{i:05d}": np.asarray(v) for i, v in enumerate(seed_states(model))}


def restore(model, saved) -> None:
    """Assign states captured by `capture` (an `np.load` result or dict) back."""
    variables = seed_states(model)
    keys = sorted(saved.keys() if isinstance(saved, dict) else saved.files)
    if len(keys) != len(variables):
        raise RuntimeError(
            f"checkpoint holds {len(keys)} random-generator states, the model has {len(variables)}"
        )
    for variable, key in zip(variables, keys):
        variable.assign(saved[key])
