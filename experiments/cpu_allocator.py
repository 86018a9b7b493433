"""TensorFlow's CPU memory allocator for the runner's processes, chosen before TensorFlow starts.

TensorFlow's default CPU allocator takes every tensor from the C heap and frees it when its
last op is done. A training step of an in-loop attention decoder makes and drops several
`(batch, source, units)` tensors at every target step (the additive score's sum and its
gradients), and the heap hands such large blocks back to the system between steps: each
comes back as fresh pages, a page fault per 4 KB. `Seq2Seq(decoder="bahdanau")`'s step at
the benchmark's shapes took 2,000-5,700 minor page faults; with
`TF_CPU_ALLOCATOR_USE_BFC=true` TensorFlow keeps what it allocated in a pool (its
best-fit-with-coalescing allocator, the one it uses for GPU memory) and the step took
almost none. On this project's 2-core machine its time over the plain-Keras translator's
(whose few large tensors live through the step) was a median 1.47 against 1.53 in nine
pairs of processes, and on the real-text budget its epochs took 10-35 % less in two rounds;
the peak memory of those runs rose 2-3 % (docs/results/benchmarks.md, "TensorFlow's CPU
allocator").

The pool's ceiling, `TF_CPU_BFC_MEM_LIMIT_IN_MB` (TensorFlow's default 64 GB), is set to the
machine's memory, so that a larger machine can use all of it as with the default allocator.
A user's own `TF_CPU_ALLOCATOR_USE_BFC` (or ceiling) wins.

Where TensorFlow turns its oneDNN kernels on by itself (CPUs with AVX-512 VNNI or BF16, or
AMX; `TF_ENABLE_ONEDNN_OPTS`), its default CPU allocator is already a pool, oneDNN's, and
`TF_CPU_ALLOCATOR_USE_BFC=true` swaps it for the BFC pool; `false` does not turn the pooling
off there. The figures above were measured on an AVX2 machine, where the default is the C heap.
"""

from __future__ import annotations

import os

USE_BFC = "TF_CPU_ALLOCATOR_USE_BFC"
LIMIT_MB = "TF_CPU_BFC_MEM_LIMIT_IN_MB"


def choose(environ=os.environ) -> None:
    """Sets `TF_CPU_ALLOCATOR_USE_BFC=true` and the pool's ceiling in `environ`, unless the
    user chose the allocator there. Must run before TensorFlow makes its first CPU tensor;
    its processes' children inherit the choice."""
    if USE_BFC in environ:
        return
    environ[USE_BFC] = "true"
    memory = machine_memory_mb()
    if memory is not None:
        environ.setdefault(LIMIT_MB, str(memory))


def uses_bfc(environ=os.environ) -> bool:
    """Whether TensorFlow reads `environ` as asking for the pooling allocator (its
    `ReadBoolFromEnvVar`: "true" or "1", any case)."""
    return environ.get(USE_BFC, "").strip().lower() in ("true", "1")


def describe(environ=os.environ) -> str:
    """The run's `tf_cpu_allocator` tag: "bfc" (pooled) or "default" (the C heap)."""
    return "bfc" if uses_bfc(environ) else "default"


def machine_memory_mb() -> int | None:
    """The machine's physical memory in MB, where the system says."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows), or no such name
        return None
