"""Running a piece of the runner in a child Python under a real memory limit (RLIMIT_AS),
and the small inputs that used to cost gigabytes.

The limit is measured, not guessed: the child first runs the same code on a harmless
input without a limit and reports its peak address space (`VmPeak`, which RLIMIT_AS
bounds: TensorFlow alone maps gigabytes it never touches); the hostile input then runs
under that peak plus an allowance, the extra memory the input may cost by design.
Past the limit an allocation fails (`MemoryError`, or the process aborts).
"""

from __future__ import annotations

import resource
import subprocess
import sys

from scaleout_helpers import child_env

MIB = 1 << 20

# Appended to every child's code: its peak address space, the last line it prints.
_REPORT_PEAK = """
with open("/proc/self/status") as _status:
    _peak = next(line.split()[1] for line in _status if line.startswith("VmPeak:"))
print("VMPEAK_KB", _peak, flush=True)
"""


def alias_bomb(levels: int) -> str:
    """A YAML "billion laughs": `levels` anchors, each a list of nine aliases of the one
    before, so its last one stands for 9**levels strings (9 levels: 387 million, in 543 bytes);
    `task.num_classes` is that list."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 9) + "]")
    lines.append(f"task: {{name: needle, num_classes: *a{levels - 1}}}")
    return "\n".join(lines) + "\n"


def run_python(code: str, *args: str, limit: int | None = None, timeout: float = 300, cwd=None):
    """`python -c CODE ARGS...` (the project importable, CPU only, one thread per BLAS pool,
    the tracking store in `cwd`) with its address space limited to `limit` bytes; the
    `CompletedProcess` (text)."""

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = child_env(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MALLOC_ARENA_MAX="2")
    if cwd is not None:
        env["MLFLOW_TRACKING_URI"] = f"sqlite:///{cwd}/mlruns/mlflow.db"
    return subprocess.run(
        [sys.executable, "-c", code + _REPORT_PEAK, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
        preexec_fn=None if limit is None else limit_memory,
    )


def peak_bytes(result: subprocess.CompletedProcess) -> int:
    """The peak address space a finished `run_python` child reported."""
    lines = [line for line in result.stdout.splitlines() if line.startswith("VMPEAK_KB ")]
    assert lines, f"the child reported no peak (exit {result.returncode}):\n{result.stderr[-3000:]}"
    return int(lines[-1].split()[1]) * 1024


def run_within(
    code: str,
    harmless: list[str],
    hostile: list[str],
    allowance: int,
    timeout: float = 300,
    cwd=None,
):
    """Run `code` with the `harmless` arguments (no limit; must succeed) to measure its peak,
    then with the `hostile` ones limited to that peak plus `allowance` bytes; the hostile
    run's `CompletedProcess` and its limit."""
    calibration = run_python(code, *harmless, timeout=timeout, cwd=cwd)
    assert calibration.returncode == 0, calibration.stderr[-3000:]
    limit = peak_bytes(calibration) + allowance
    return run_python(code, *hostile, limit=limit, timeout=timeout, cwd=cwd), limit
