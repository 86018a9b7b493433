"""The task kinds, by name: one `TaskKind` object per kind, registered here.

A new kind is one module defining a `TaskKind` subclass, plus its line in
`_KINDS`.
"""

from __future__ import annotations

from experiments.tasks.kinds.base import TaskKind
from experiments.tasks.kinds.classification import Classification
from experiments.tasks.kinds.lm import LanguageModel
from experiments.tasks.kinds.seq2seq import Seq2Seq

_KINDS: dict[str, TaskKind] = {
    kind.name: kind
    for kind in (
        Classification(),
        Seq2Seq(),
        LanguageModel(),
    )
}


def names() -> tuple[str, ...]:
    """The registered kind names, in registry order."""
    return tuple(_KINDS)


def get(name: str) -> TaskKind:
    """The kind registered as `name`."""
    if name not in _KINDS:
        choices = ", ".join(repr(n) for n in _KINDS)
        raise ValueError(f"kind must be one of {choices}. Received: kind={name!r}")
    return _KINDS[name]
