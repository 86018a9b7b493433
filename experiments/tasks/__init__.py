"""Tasks: the data a run trains on, by name; each module has `build(task_config) -> Task`.

A new task is one module with `build` and its config section (a subclass of
`experiments.config.TaskSection`), registered with
`register("name", build, Section)`; the config then takes `task.name: name`.
"""

from __future__ import annotations

from collections.abc import Callable

from experiments import config as config_lib
from experiments.data.task import Task
from experiments.tasks import (
    addition,
    charlm,
    copy,
    copy_slots,
    dates,
    lookup,
    needle,
    reverse,
    scan,
    textcls,
)

BUILDERS: dict[str, Callable[..., Task]] = {}


def register(name: str, build: Callable[..., Task], section: type[config_lib.TaskSection]):
    """Make `name` a task: `task.name: name` validates with `section` and builds with
    `build(section_instance) -> Task`. Returns `build`."""
    config_lib.register_task(name, section)
    BUILDERS[name] = build
    return build


def unregister(name: str) -> None:
    """Forget the task registered as `name` (what a test that added one undoes)."""
    BUILDERS.pop(name, None)
    config_lib.unregister_task(name)


for _name, _module, _section in (
    ("needle", needle, config_lib.NeedleTask),
    ("textcls", textcls, config_lib.TextClsTask),
    ("reverse", reverse, config_lib.ReverseTask),
    ("dates", dates, config_lib.DatesTask),
    ("addition", addition, config_lib.AdditionTask),
    ("charlm", charlm, config_lib.CharLMTask),
    ("copy", copy, config_lib.CopyTask),
    ("lookup", lookup, config_lib.LookupTask),
    ("scan", scan, config_lib.ScanTask),
    ("copy_slots", copy_slots, config_lib.CopySlotsTask),
):
    register(_name, _module.build, _section)


def build_task(cfg) -> Task:
    """Build the task named by `cfg.name` (a validated task config section)."""
    return BUILDERS[cfg.name](cfg)
