"""TensorFlow's two CPU allocators against each other on the translators' training steps.

    python tools/allocator_ab.py [--rounds 3] [--steps 12]

The allocator is chosen when TensorFlow starts, so each side is its own process: the
rounds alternate a process with TensorFlow's default allocator
(`TF_CPU_ALLOCATOR_USE_BFC=false`) and one with the pool the runner chooses
(`experiments.cpu_allocator`). Each process builds the `seq2seq_vs_keras_peer`
benchmark's steps (`experiments.bench.cases.decoder.seq2seq_step`: the plain-Keras peer and
`Seq2Seq(decoder="bahdanau")`, B=128, S=T=30, 128 units, graph mode) in the runner's thread
pools, warms them up and times `--steps` of each in turn, counting the process's minor page
faults over each step. Prints one line per process: each model's median milliseconds and
faults a step, and the median of the per-step ratios bahdanau / peer.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments import cpu_allocator, thread_pools  # noqa: E402


def measure(steps: int) -> dict:
    """In this process: each model's median step time and minor faults a step."""
    from experiments.bench.cases.common import Options
    from experiments.bench.cases.decoder import seq2seq_step

    models = {kind: seq2seq_step(kind, Options(), False) for kind in ("peer", "bahdanau")}
    for step in models.values():
        for _ in range(3):
            step()
    seconds = {kind: [] for kind in models}
    faults = {kind: [] for kind in models}
    for _ in range(steps):
        for kind, step in models.items():
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.perf_counter()
            step()
            seconds[kind].append(time.perf_counter() - start)
            faults[kind].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    ratios = [b / p for b, p in zip(seconds["bahdanau"], seconds["peer"])]
    return {
        "allocator": cpu_allocator.describe(),
        **{f"{kind}_ms": 1e3 * statistics.median(seconds[kind]) for kind in models},
        **{f"{kind}_faults": statistics.median(faults[kind]) for kind in models},
        "ratio": statistics.median(ratios),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.steps)))
        return
    for _ in range(args.rounds):
        for pooled in (False, True):
            environ = dict(os.environ, KERAS_BACKEND="tensorflow")
            environ.pop(cpu_allocator.USE_BFC, None)
            thread_pools.choose(environ)
            if pooled:
                cpu_allocator.choose(environ)
            else:
                environ[cpu_allocator.USE_BFC] = "false"
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--steps", str(args.steps)],
                env=environ,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            r = json.loads(out.splitlines()[-1])
            print(
                f"{r['allocator']:8s} peer {r['peer_ms']:6.1f} ms ({r['peer_faults']:5.0f} faults)"
                f"  bahdanau {r['bahdanau_ms']:6.1f} ms ({r['bahdanau_faults']:5.0f} faults)"
                f"  bahdanau / peer {r['ratio']:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
