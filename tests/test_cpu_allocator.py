"""`python -m experiments` has TensorFlow pool its CPU memory (the BFC allocator) before
TensorFlow starts, unless the user chose the allocator."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from experiments import cpu_allocator

ONEDNN = "TF_ENABLE_ONEDNN_OPTS"  # TensorFlow's switch for its oneDNN kernels


def _environ_without_the_allocator() -> dict[str, str]:
    """This environment without an allocator choice, and with TensorFlow's oneDNN kernels off.

    Where TensorFlow turns oneDNN on by itself (CPUs with AVX-512 VNNI or BF16, or AMX), its
    default CPU allocator is oneDNN's own pool, which keeps statistics too, and oneDNN's kernels
    hold scratch memory that moves a step's peak by a third from run to run: with oneDNN on,
    `TF_CPU_ALLOCATOR_USE_BFC` unset measured pooled, and the memory curve's peak / analytic
    0.37-0.69 against 0.51-0.57 with it off (an AVX-512 EPYC, 2026-12-07). Off, every machine
    starts from TensorFlow's plain heap allocator, which these tests tell from the pool."""
    names = (cpu_allocator.USE_BFC, cpu_allocator.LIMIT_MB, ONEDNN)
    return {**{k: v for k, v in os.environ.items() if k not in names}, ONEDNN: "0"}


def _run_tensorflow(code: str, environ: dict[str, str]) -> str:
    """The stdout of `code` run by a fresh interpreter on TensorFlow in `environ`."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**environ, "KERAS_BACKEND": "tensorflow"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_choose_asks_for_the_pool_with_the_machine_s_memory_as_its_ceiling():
    environ = {}
    cpu_allocator.choose(environ)
    assert environ[cpu_allocator.USE_BFC] == "true"
    memory = int(environ[cpu_allocator.LIMIT_MB])
    assert memory == cpu_allocator.machine_memory_mb()
    # TensorFlow's own ceiling is 64 GB; this machine's memory is a few GB at least
    assert 1024 < memory < 2**24


@pytest.mark.parametrize("given", ["false", "0", "true"])
def test_a_users_own_choice_is_left_as_it_is(given):
    environ = {cpu_allocator.USE_BFC: given}
    cpu_allocator.choose(environ)
    assert environ == {cpu_allocator.USE_BFC: given}


def test_a_users_own_ceiling_is_kept():
    environ = {cpu_allocator.LIMIT_MB: "512"}
    cpu_allocator.choose(environ)
    assert environ == {cpu_allocator.USE_BFC: "true", cpu_allocator.LIMIT_MB: "512"}


@pytest.mark.parametrize(
    ("value", "tag"),
    [("true", "bfc"), ("TRUE", "bfc"), ("1", "bfc"), ("false", "default"), ("0", "default")],
)
def test_the_tag_reads_the_variable_as_tensorflow_does(value, tag):
    assert cpu_allocator.describe({cpu_allocator.USE_BFC: value}) == tag
    assert cpu_allocator.describe({}) == "default"


def test_the_runners_processes_start_tensorflow_with_the_pool():
    """The entry point sets the variable before any command imports TensorFlow (which reads
    it once, when it makes its CPU allocator)."""
    code = (
        "import os, runpy, sys; sys.argv = ['experiments', '--help']\n"
        "try:\n    runpy.run_module('experiments', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        f"print(os.environ[{cpu_allocator.USE_BFC!r}], 'tensorflow' in sys.modules)"
    )
    out = _run_tensorflow(code, _environ_without_the_allocator()).split()
    assert out[-2:] == ["true", "False"]  # chosen before TensorFlow was imported


# TensorFlow's pooled allocator keeps statistics (`get_memory_info` answers for the CPU);
# its default allocator keeps none and the call raises.
_MEMORY_INFO = (
    "import tensorflow as tf\n"
    "x = tf.ones((256, 1024)) * 2.0\n"
    "try:\n"
    "    info = tf.config.experimental.get_memory_info('CPU:0')\n"
    "    print('pooled', info['peak'] >= x.numpy().nbytes)\n"
    "except ValueError:\n"
    "    print('heap')\n"
)


@pytest.mark.parametrize(("chosen", "expected"), [(True, ["pooled", "True"]), (False, ["heap"])])
def test_tensorflow_allocates_from_the_pool_where_it_was_chosen(chosen, expected):
    environ = _environ_without_the_allocator()
    if chosen:
        cpu_allocator.choose(environ)
    out = _run_tensorflow(_MEMORY_INFO, environ).split()
    assert out[-len(expected) :] == expected


_MEMORY_CURVE = (
    "import json\n"
    "from experiments.bench.cases.common import Options\n"
    "from experiments.bench.scaling import pooling_memory_curve\n"
    "curve = pooling_memory_curve(Options(profile='quick'))\n"
    "print(json.dumps({k: curve[k] for k in ('source', 'T', 'peak_bytes_above_start', "
    "'analytic_bytes')}))\n"
)


def test_the_bench_s_memory_curve_reads_the_pool_s_own_peak():
    """With the pool the curve is the allocator's peak above what it held before the step,
    not the resident set (which a pool keeps at its high-water mark): it grows with T as the
    tensors the step keeps do."""
    environ = _environ_without_the_allocator()
    cpu_allocator.choose(environ)
    curve = json.loads(_run_tensorflow(_MEMORY_CURVE, environ).splitlines()[-1])
    assert curve["source"] == "allocator"
    measured = np.asarray(curve["peak_bytes_above_start"], dtype=float)
    analytic = np.asarray(curve["analytic_bytes"], dtype=float)
    assert np.all(np.diff(measured) > 0)
    # linear in T like the tensors the step keeps (about half the analytic count, which
    # adds every gradient as if all were alive at once), not the pool's growth in regions
    ratio = measured / analytic
    assert np.all((ratio > 0.25) & (ratio < 2)) and ratio.max() / ratio.min() < 1.3
