"""Tasks: the data a run trains on, by name; each module has `build(task_config) -> Task`.

A new task is one module with `build`, its config section in
`experiments.config`, and its line in `BUILDERS`.
"""

from __future__ import annotations

from experiments.tasks import addition, charlm, dates, needle, reverse, textcls
from experiments.tasks.task import Task

BUILDERS = {
    "needle": needle.build,
    "textcls": textcls.build,
    "reverse": reverse.build,
    "dates": dates.build,
    "addition": addition.build,
    "charlm": charlm.build,
}


def build_task(cfg) -> Task:
    """Build the task named by `cfg.name` (a validated task config section)."""
    return BUILDERS[cfg.name](cfg)
