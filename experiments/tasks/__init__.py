"""The tasks, by name: one module per task, found automatically.

A task module defines its config section, a `TaskSection` subclass (from
`experiments.data.sections`) with `name: Literal["<task>"]`, its keys and
`build(self) -> Task`, and registers it with `@tasks.register`; a config then
takes `task.name: <task>`, validated by that section and built by its `build`.
Every module of this package is imported with it, and so is every module of
each package that the environment variable `ATTN_RNN_TASK_PACKAGES` names
(comma-separated, importable from `sys.path`): a task of your own is one
module of such a package plus its YAML, with no edit here.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import typing

from experiments.data.sections import TaskSection
from experiments.data.task import Task
from experiments.errors import ConfigError
from keras_attn_rnn.registry import Registry

__all__ = ["PACKAGES_VARIABLE", "REGISTRY", "build_task", "discover", "names", "register"]

# Packages of task modules besides this one: comma-separated names.
PACKAGES_VARIABLE = "ATTN_RNN_TASK_PACKAGES"

# The task sections by task name (`task.name`).
REGISTRY = Registry("task", TaskSection, "a TaskSection", {})


def register(section: type[TaskSection]) -> type[TaskSection]:
    """Make `section` a task under the name its `name: Literal["<task>"]` field holds (a new
    name, or the same section again); return it (a class decorator)."""
    name = section.model_fields["name"].annotation if _is_section(section) else None
    choices = typing.get_args(name) if typing.get_origin(name) is typing.Literal else ()
    if len(choices) != 1:
        raise ValueError(
            "a task section must be a TaskSection subclass whose `name` is "
            f'Literal["<task>"]. Received: section={section!r}'
        )
    REGISTRY.register(choices[0], section)
    return section


def _is_section(section) -> bool:
    return isinstance(section, type) and issubclass(section, TaskSection)


def discover() -> None:
    """Import every task module: this package's (at its import) and those of the packages
    `ATTN_RNN_TASK_PACKAGES` names (a `ConfigError` names one that does not import)."""
    packages = [p.strip() for p in os.environ.get(PACKAGES_VARIABLE, "").split(",")]
    for package in filter(None, packages):
        try:
            _import_modules(package)
        except ImportError as err:
            raise ConfigError(
                f"{PACKAGES_VARIABLE}: {package!r} is not an importable package of task "
                f"modules ({err})"
            ) from None


def names() -> tuple[str, ...]:
    """Every task name, in registration order (this package's tasks first)."""
    discover()
    return REGISTRY.names()


def section(name: str) -> type[TaskSection]:
    """The section of task `name` (a `ValueError` lists the task names for any other)."""
    discover()
    return REGISTRY.class_for(name)


def build_task(cfg: TaskSection) -> Task:
    """Build the task `cfg` (a validated task section) describes."""
    return cfg.build()


def _import_modules(package: str) -> None:
    module = importlib.import_module(package)
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        importlib.import_module(f"{package}.{info.name}")


_import_modules(__name__)
