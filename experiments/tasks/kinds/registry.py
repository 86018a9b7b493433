"""The registry of task kinds: one `TaskKind` object per name.

A kind's module registers its object (`register(MyKind())`) when imported;
`experiments.tasks.kinds` imports every module of its package, so a new kind
is one new module there. A kind defined elsewhere (a test, a plugin) calls
`kinds.register` itself.
"""

from __future__ import annotations

from experiments.tasks.kinds.base import TaskKind

_KINDS: dict[str, TaskKind] = {}


def register(kind: TaskKind) -> TaskKind:
    """Add `kind` under its `name` (a new name, or the same object again); return it."""
    if not isinstance(kind, TaskKind):
        raise ValueError(f"a task kind must be a TaskKind instance. Received: kind={kind!r}")
    name = getattr(kind, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a task kind's name must be an identifier. Received: name={name!r}")
    if _KINDS.get(name, kind) is not kind:
        raise ValueError(
            f"task kind {name!r} is registered already (to {_KINDS[name]!r}). "
            f"Received: kind={kind!r}"
        )
    _KINDS[name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove the kind registered as `name`, if any (what a test that added one undoes)."""
    _KINDS.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered kind names, in registration order."""
    return tuple(_KINDS)


def get(name: str) -> TaskKind:
    """The kind registered as `name`."""
    if name not in _KINDS:
        choices = ", ".join(repr(n) for n in _KINDS)
        raise ValueError(f"kind must be one of {choices}. Received: kind={name!r}")
    return _KINDS[name]
