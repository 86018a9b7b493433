"""Tasks: each module has `build(task_config) -> Task`."""

from __future__ import annotations

import importlib

from experiments.tasks.base import Split, Task, Vocab

__all__ = ["Split", "Task", "Vocab", "build_task"]


def build_task(cfg) -> Task:
    """Build the task named by `cfg.name` (a validated task config section)."""
    return importlib.import_module(f"experiments.tasks.{cfg.name}").build(cfg)
