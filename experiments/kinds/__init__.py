"""The task kinds, by name: one `TaskKind` subclass per kind, in a `Registry`.

A new kind is one module in this package that defines a `TaskKind` subclass
and registers it (`@kinds.register`, under the class's `name`): every module
here is imported with the package. A kind defined elsewhere (a task module of
a plugin package, a test) registers itself the same way. A task's builder
puts its kind object in its `Task` record; everything that checks or uses a
kind (the runner, tracking, the logged models) asks that object, so nothing
else changes.
"""

from __future__ import annotations

import importlib
import pkgutil

from experiments.kinds.base import TaskKind
from keras_attn_rnn.registry import Registry

__all__ = ["REGISTRY", "TaskKind", "get", "names", "register"]

# The kinds by name (`TaskKind.name`): `get(name)` makes one.
REGISTRY = Registry("kind", TaskKind, "a TaskKind", {})


def register(kind: type[TaskKind]) -> type[TaskKind]:
    """Add the `TaskKind` subclass `kind` under its `name` (a new name, or the same class
    again); return it (a class decorator)."""
    REGISTRY.register(getattr(kind, "name", None), kind)
    return kind


def names() -> tuple[str, ...]:
    """The registered kind names, in registration order."""
    return REGISTRY.names()


def get(name: str) -> TaskKind:
    """The kind registered as `name` (a new object: kinds hold no state)."""
    return REGISTRY.get(name)


for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
