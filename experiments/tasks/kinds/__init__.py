"""The task kinds, by name: one `TaskKind` object per kind.

A new kind is one module in this package that defines a `TaskKind` subclass
and registers an instance (`register(MyKind())`): every module here is
imported with the package. Everything that lists, checks or uses kinds (the
tasks, the runner, tracking, the logged models) asks the kind object, so
nothing else changes.
"""

from __future__ import annotations

import importlib
import pkgutil

from experiments.tasks.kinds.base import TaskKind
from experiments.tasks.kinds.registry import get, names, register, unregister

__all__ = ["TaskKind", "get", "names", "register", "unregister"]

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
