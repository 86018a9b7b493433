"""Old task names still accepted, by the name that replaced them: one table for the config's
validation, its early check (`config_precheck`) and the ready configs' names.

A config (a file, `--set task.name=...`, the logged config of a run being resumed) that
names a task by its old name is read as naming the new one, and a deprecation notice says
so once a process, on standard error. Light on purpose (nothing imported): the early check
runs before any framework.
"""

from __future__ import annotations

import sys

# old name -> the task's name now
ALIASES = {
    "charlm": "lm",  # it trains on words and subword units too (`task.units`), not only characters
}

# The old names this process has said a notice of.
_said: set[str] = set()


def canonical(name: object, notice: bool = True) -> object:
    """The task name `name` stands for (itself unless it is an old name); with `notice`,
    an old name is reported as deprecated, once a process."""
    if not isinstance(name, str) or name not in ALIASES:
        return name
    if notice and name not in _said:
        _said.add(name)
        print(
            f"notice: task.name {name!r} is deprecated; the task is now {ALIASES[name]!r} "
            f"({name!r} is still accepted, as {ALIASES[name]!r})",
            file=sys.stderr,
        )
    return ALIASES[name]
