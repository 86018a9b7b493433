"""`bench [--quick] [--out FILE.json] ...`: the performance benchmarks, logged to MLflow."""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.bench.goals import GOALS
from experiments.bench.profiles import profile_name
from experiments.errors import ConfigError

CHOICES = [*GOALS, "scaling"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the `bench` sub-command; its handler is `handle`."""
    parser = subparsers.add_parser(
        "bench",
        help="performance benchmarks against peers (ratios), scaling curves",
        description="`python -m experiments bench`: the performance benchmarks, logged to MLflow.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller shapes and repeats (about 2 min on 2 cores)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        choices=CHOICES,
        help=f"run only these benchmarks (any of: {', '.join(CHOICES)})",
    )
    parser.add_argument("--out", metavar="FILE.json", help="write the results JSON here")
    parser.add_argument(
        "--tfa-python",
        metavar="PATH",
        help="interpreter with TF 2.15 + tensorflow-addons for decoder_vs_tfa (skipped without it)",
    )
    parser.add_argument(
        "--pairs",
        metavar="FILE.tsv",
        help="length_buckets_speedup: also on this file of pairs (e.g. from "
        "tools/translation_pairs.py), beside the shipped ones",
    )
    parser.add_argument("--no-mlflow", action="store_true", help="do not log an MLflow run")
    parser.add_argument(
        "--jit-compile", action="store_true", help="compile both sides' steps with XLA"
    )
    parser.add_argument(
        "--mixed-precision",
        action="store_true",
        help="build both sides under the mixed_float16 policy (for GPUs)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        metavar="N",
        help="timed pairs per benchmark (default: per benchmark and profile)",
    )
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    # smallest shapes, one repeat: for the test suite (also ATTN_RNN_BENCH_TINY=1)
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(handler=handle)
    return parser


def handle(args) -> int:
    """Run the suite, print a summary table, write the JSON and log the MLflow run."""
    import keras

    if keras.backend.backend() != "tensorflow":  # its steps are tf.functions, its peers tf/tfa
        raise ConfigError(
            "KERAS_BACKEND: the benchmark suite times TensorFlow steps against TensorFlow "
            "peers (Keras layers, tfa); run it with KERAS_BACKEND=tensorflow, or "
            "tools/gpu_check.py on JAX. Received: KERAS_BACKEND="
            f"{keras.backend.backend()!r}"
        )
    from experiments.bench import suite
    from experiments.bench.cases.common import Options

    options = Options(
        profile=profile_name(quick=args.quick, tiny=args.tiny),
        jit_compile=args.jit_compile,
        tfa_python=args.tfa_python,
        seed=args.seed,
        temporary_store=args.no_mlflow,
        repeats_override=args.repeats,
        pairs_file=args.pairs,
    )

    def write(report):
        if args.out:
            report["settings"]["command"] = command_line(args)
            path = Path(args.out)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(suite.to_json(report) + "\n", encoding="utf-8")

    only = set(args.only) if args.only else None
    report = suite.run_suite(options, only, args.mixed_precision, on_progress=write)
    report["settings"]["command"] = command_line(args)
    print(suite.summary(report))
    if args.out:
        write(report)
        print(f"results: {args.out}")
    if not args.no_mlflow:
        run_id = suite.log_to_mlflow(report)
        print(f"MLflow run: {run_id}")
    failed = [n for n, r in report["results"].items() if "error" in r]
    return 1 if failed else 0


def command_line(args) -> str:
    """The `python -m experiments bench ...` command that reproduces this run."""
    parts = ["python -m experiments bench"]
    if args.quick:
        parts.append("--quick")
    if args.tiny:
        parts.append("--tiny")
    if args.only:
        parts.append("--only " + " ".join(args.only))
    for flag, value in (
        ("--repeats", args.repeats),
        ("--tfa-python", args.tfa_python),
        ("--out", args.out),
    ):
        if value:
            parts.append(f"{flag} {value}")
    for flag in ("no_mlflow", "jit_compile", "mixed_precision"):
        if getattr(args, flag):
            parts.append("--" + flag.replace("_", "-"))
    return " ".join(parts)
