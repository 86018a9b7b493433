"""Notices about a task's data (rows repeated, inputs cut), printed once per process.

A sweep or a study trains many runs on the same data in one process; each run logs its
counts (`duplicate_rows`, `truncated_*`), but the terminal says each notice once, the
first time, not once per point or trial. Like the `warnings` module's "once" action, the
notices said are remembered for the life of the process (`said`).
"""

from __future__ import annotations

# The notices this process has printed.
said: set[str] = set()


def once(text: str) -> None:
    """Print `text` unless this process has printed it already."""
    if text not in said:
        said.add(text)
        print(text)
