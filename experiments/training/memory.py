"""The run process's memory: its peak (the high-water mark each run reports), and what a
run gives back once it has trained."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import resource
import sys
from pathlib import Path

PROC_SELF = Path("/proc/self")


def reset_peak_memory() -> None:
    """Start this process's peak resident memory again from its current memory (Linux: `5`
    to `/proc/self/clear_refs`), so that a run of a sweep or a study that shares the process
    with earlier runs reports its own peak; elsewhere the peak stays the process's."""
    with contextlib.suppress(OSError):  # not Linux, or a kernel before 4.0
        (PROC_SELF / "clear_refs").write_text("5")


def peak_memory_mb() -> float:
    """This process's peak resident memory (its high-water mark) since it started or since
    `reset_peak_memory`, in MB."""
    try:
        status = (PROC_SELF / "status").read_text()
    except OSError:
        status = ""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**10  # kB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS, else KiB
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def release_training_step(model) -> None:
    """Training is over: let go of `model`'s compiled training step (its traced graph, on
    TensorFlow the forward and backward pass of every shape it saw) and hand the freed
    memory back to the system, so that what the run does next (test scores, samples, the
    logged model) has it; with it the step `fit` evaluated the validation split with
    (`test_function`: the end scores splits with the kind's own compiled calls). `fit`
    would compile them again.

    On the GNU pairs (`tools/real_text_sweep.yaml`, bahdanau, 2 epochs) letting go of the
    training step took the process from 1,590 to 1,420 MB resident, and the run's end
    then stayed within training's peak, where it had added 51 MB
    (docs/results/real-text.md)."""
    # public: what `compile` resets, what `fit` and `evaluate` make again
    model.train_function = model.test_function = None
    give_back()


def give_back() -> None:
    """Collect Python's garbage and hand the C heap's free pages back to the system
    (glibc's `malloc_trim`; elsewhere the collection only), so that what the process does
    next grows from the memory still in use rather than from the high-water mark of what
    it did before. The end of a run calls it between its phases: each phase (test scores,
    samples, the logged model) frees what it made, but glibc keeps the freed pages between
    live blocks resident, and the next phase's blocks came on top of them. TensorFlow's
    tensors, where `python -m experiments` has it pool them (`experiments.cpu_allocator`),
    are not the C heap's: freed, they stay in TensorFlow's pool for the next phase's.

    At LSTM 256, batch 32 on the GNU pairs (2 epochs; docs/results/real-text.md), trimmed
    after each of its phases in a probe, the end rose 105 MB above where it began instead
    of 168 MB, and stayed below training's peak."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # glibc only
        ctypes.CDLL("libc.so.6").malloc_trim(0)
