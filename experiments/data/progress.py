"""Progress of the phases of reading a large file: counts and a rate, on standard error.

On a terminal the line of a running phase is rewritten in place twice a second
(`reading pairs.tsv: 1,200,000 rows, 98,000 rows/s`); elsewhere (a CI log, `nohup`, a
pipe) each phase prints one plain line when it ends, with its count, time and rate.
"""

from __future__ import annotations

import sys
import time

REFRESH = 0.5  # seconds between two rewrites of a terminal line


class Progress:
    """One phase: `with Progress("reading pairs.tsv", "rows") as p: p.add(n)`."""

    def __init__(self, phase: str, unit: str = "rows", stream=None):
        self.phase, self.unit = phase, unit
        self.stream = stream or sys.stderr
        self.count = 0
        self.started = self._shown = 0.0
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())

    def __enter__(self) -> Progress:
        self.started = self._shown = time.perf_counter()
        return self

    def add(self, count: int = 1) -> None:
        self.count += count
        if self.live:
            now = time.perf_counter()
            if now - self._shown >= REFRESH:
                self._shown = now
                self.stream.write(f"\r{self._line(now)}\x1b[K")
                self.stream.flush()

    def __exit__(self, kind, error, trace) -> None:
        if kind is not None:
            if self.live:
                self.stream.write("\n")
            return
        line = self._line(time.perf_counter(), done=True)
        self.stream.write(f"\r{line}\x1b[K\n" if self.live else f"{line}\n")
        self.stream.flush()

    def _line(self, now: float, done: bool = False) -> str:
        seconds = max(now - self.started, 1e-9)
        rate = f"{self.count / seconds:,.0f} {self.unit}/s"
        if done:
            return f"{self.phase}: {self.count:,} {self.unit} in {seconds:.1f} s ({rate})"
        return f"{self.phase}: {self.count:,} {self.unit}, {rate}"


def note(text: str, stream=None) -> None:
    """A line of its own about the data (a phase without a count: a cache used)."""
    stream = stream or sys.stderr
    stream.write(f"{text}\n")
    stream.flush()
