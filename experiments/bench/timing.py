"""Side-by-side timing: warm-up, then alternating repeats of project and peer.

Absolute times on a shared machine are noise; the ratio of two measurements
taken back to back is much steadier. Each pair runs the project and its peer
one right after the other, the order alternating from pair to pair (so
neither side always runs on a cache or a CPU-frequency state the other left
behind), and the reported ratio is the median of the per-pair ratios, with
their interquartile range as the spread.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import time
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from experiments import cpu_allocator, thread_pools


def quantiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile) of `values` (linear interpolation)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0], ordered[0], ordered[0]
    q1, q2, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    return q1, q2, q3


def clock(fn: Callable[[], object]) -> float:
    """Seconds one call of `fn` takes; `fn` must block until its work is done."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def paired(
    project: Callable[[], object],
    peer: Callable[[], object],
    repeats: int,
    warmup: int,
    speedup: bool = False,
) -> dict:
    """Time `project` against `peer` in alternating pairs.

    Args:
        project, peer: zero-argument callables doing one unit of work each
            (a training step, a whole generation...) and returning only when
            it is finished (e.g. after fetching a value to the host).
        repeats: number of pairs timed.
        warmup: untimed calls of each side first (tracing, compilation).
        speedup: report `peer / project` (a speedup, for ">=" goals) instead
            of `project / peer` (a cost ratio, for "<=" goals).

    Returns:
        A dict with `ratio` (median per-pair ratio), `spread` (its quartiles
        and extremes), `project_s` / `peer_s` (median seconds) and the raw
        per-repeat times.
    """
    for _ in range(warmup):
        project()
        peer()
    project_times, peer_times = [], []
    for i in range(repeats):
        if i % 2 == 0:
            a = clock(project)
            b = clock(peer)
        else:
            b = clock(peer)
            a = clock(project)
        project_times.append(a)
        peer_times.append(b)
    return summarize(project_times, peer_times, speedup)


def summarize(project_times: list[float], peer_times: list[float], speedup: bool) -> dict:
    """The result fields of paired measurements (see `paired`)."""
    ratios = [(b / a if speedup else a / b) for a, b in zip(project_times, peer_times)]
    q1, median, q3 = quantiles(ratios)
    return {
        "ratio": median,
        "spread": {
            "iqr": [q1, q3],
            "min": min(ratios),
            "max": max(ratios),
            "what": "quartiles and extremes of the per-pair ratios",
        },
        "project_s": statistics.median(project_times),
        "peer_s": statistics.median(peer_times),
        # cross-checks, steadier when other processes share the CPU: the fastest repeat of
        # each side is the one least disturbed
        "ratio_of_medians": _ratio(
            statistics.median(project_times), statistics.median(peer_times), speedup
        ),
        "ratio_of_minimums": _ratio(min(project_times), min(peer_times), speedup),
        "repeats": len(ratios),
        "project_times_s": [round(t, 6) for t in project_times],
        "peer_times_s": [round(t, 6) for t in peer_times],
    }


def _ratio(project: float, peer: float, speedup: bool) -> float:
    return peer / project if speedup else project / peer


def median_time(fn: Callable[[], object], repeats: int, warmup: int) -> float:
    """Median seconds of `repeats` calls after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    return statistics.median(clock(fn) for _ in range(repeats))


class GcPauses:
    """Seconds the garbage collector paused this process while `with` blocks ran (summed)."""

    def __init__(self):
        self.seconds, self._started = 0.0, None

    def _callback(self, phase, info):
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self._started = None

    def __enter__(self):
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self._callback)


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info() -> dict:
    """What the numbers were measured on."""
    gpus = tf.config.list_physical_devices("GPU")
    cores = thread_pools.usable_cores()
    info = {
        "platform": platform.platform(),
        "processor": _cpu_model() or platform.processor(),
        "cpu_count": os.cpu_count(),
        "usable_cores": cores,
        "gpus": [g.name for g in gpus],
        "device": ", ".join(g.name for g in gpus) if gpus else f"cpu ({cores} cores)",
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "keras_backend": keras.backend.backend(),
        "numpy": np.__version__,
        "load_average_start": load_average(),
        # TensorFlow's thread pools (`experiments.thread_pools`; unset: TensorFlow's own)
        "tf_thread_pools": thread_pools.sizes(),
        # TensorFlow's CPU allocator (`experiments.cpu_allocator`): "bfc" or "default"
        "tf_cpu_allocator": cpu_allocator.describe(),
    }
    return info


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def peak_rss_reset() -> bool:
    """Reset this process's peak resident set size (Linux `clear_refs` 5); False if unsupported."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return True


def rss_bytes(field: str = "VmRSS") -> int | None:
    """`VmRSS` (current) or `VmHWM` (peak since the last reset) of this process, in bytes."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
