"""TensorFlow's CPU thread pools for the runner's processes, chosen before TensorFlow starts.

TensorFlow's default is as many inter-op threads (ops run side by side) as cores, each op
split over as many intra-op threads again: on two cores four threads busy at once. A
recurrent training step is many small ops, which gain little from being split; on this
project's 2-core machine 2 inter-op threads of 1 intra-op thread each trained the GNU pairs
17-19 % faster (padded and length-bucketed feeds alike) and stepped `Seq2Seq(bahdanau)` 10 %
faster, the plain-Keras peer the same (docs/results/benchmarks.md). Other core counts are
not measured; the rule keeps the two pools within the cores. A user's own
`TF_NUM_INTEROP_THREADS` or `TF_NUM_INTRAOP_THREADS` wins.
"""

from __future__ import annotations

import os

INTER_OP = "TF_NUM_INTEROP_THREADS"
INTRA_OP = "TF_NUM_INTRAOP_THREADS"


def defaults(cores: int) -> dict[str, str]:
    """The pools' sizes on `cores` cores: 2 inter-op threads (1 on one core) of half the
    cores each (at least 1)."""
    inter = min(2, cores)
    return {INTER_OP: str(inter), INTRA_OP: str(max(1, cores // inter))}


def choose(environ=os.environ) -> None:
    """Sets `defaults` for the cores this process may run on in `environ`, unless the user
    set either pool's size there. Must run before TensorFlow creates its pools (the first
    op); its processes' children inherit the choice."""
    if INTER_OP in environ or INTRA_OP in environ:
        return
    environ.update(defaults(usable_cores()))


def sizes(environ=os.environ) -> dict[str, str | None]:
    """Each pool's size as `environ` sets it for TensorFlow (None: left to TensorFlow)."""
    return {name: environ.get(name) for name in (INTER_OP, INTRA_OP)}


def describe(environ=os.environ) -> str:
    """`sizes` for a run's `tf_thread_pools` tag: "2 inter-op x 1 intra-op", "default" for a
    pool left to TensorFlow."""
    inter, intra = (size or "default" for size in sizes(environ).values())
    return f"{inter} inter-op x {intra} intra-op"


def usable_cores() -> int:
    """The cores this process may run on (all of them where the system does not say)."""
    if hasattr(os, "sched_getaffinity"):  # Linux
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
