"""`python -m experiments bench`: the performance benchmarks, logged to MLflow.

Each benchmark runs the project and its peer side by side in one process on
the same shapes (warm-up, then alternating repeats) and reports the median
ratio with its spread; absolute times on shared machines are noise. The
scaling curves time steps against the sequence length. Results go to a JSON
file and, unless `--no-mlflow`, to an MLflow run (ratios as metrics, the JSON
and the plots as artifacts).

JSON: `{"machine": {...}, "settings": {...}, "results": {NAME: {"ratio",
"goal", "met", "project_s", "peer_s", "spread", "shapes", ...}},
"scaling": {...}}`. `ratio` is project time / peer time for `"<="` goals and
the speedup (peer time / project time) for `">="` goals. A benchmark that
cannot run has `"skipped": reason` (and `ratio`/`met` null); one that failed
has `"error"`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
import traceback
from pathlib import Path

from experiments.bench.cases import BENCHMARKS, GOALS, Options, Skip, goal_met

TINY_ENV = "ATTN_RNN_BENCH_TINY"


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the `bench` sub-command; its handler is `cmd_bench`."""
    names = ", ".join([*BENCHMARKS, "scaling"])
    parser = subparsers.add_parser(
        "bench",
        help="performance benchmarks against peers (ratios), scaling curves",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller shapes and repeats (about 2 min on 2 cores)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        choices=[*BENCHMARKS, "scaling"],
        help=f"run only these benchmarks (any of: {names})",
    )
    parser.add_argument("--out", metavar="FILE.json", help="write the results JSON here")
    parser.add_argument(
        "--tfa-python",
        metavar="PATH",
        help="interpreter with TF 2.15 + tensorflow-addons for decoder_vs_tfa (skipped without it)",
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
    parser.set_defaults(handler=cmd_bench)
    return parser


def profile_of(args) -> str:
    if args.tiny or os.environ.get(TINY_ENV, "") not in ("", "0"):
        return "tiny"
    return "quick" if args.quick else "full"


def cmd_bench(args) -> int:
    """Run the suite, print a summary table, write the JSON and log the MLflow run."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    options = Options(
        profile=profile_of(args),
        jit_compile=args.jit_compile,
        tfa_python=args.tfa_python,
        seed=args.seed,
        temporary_store=args.no_mlflow,
        repeats_override=args.repeats,
    )

    def write(report):
        if args.out:
            report["settings"]["command"] = command_line(args)
            path = Path(args.out)
            path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(report, indent=2, default=_jsonable) + "\n"
            path.write_text(text, encoding="utf-8")

    only = set(args.only) if args.only else None
    report = run_suite(options, only, args.mixed_precision, on_progress=write)
    report["settings"]["command"] = command_line(args)
    print(summary(report))
    if args.out:
        write(report)
        print(f"results: {args.out}")
    if not args.no_mlflow:
        run_id = log_to_mlflow(report)
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


def run_suite(
    options: Options, only: set[str] | None = None, mixed_precision=False, on_progress=None
) -> dict:
    """Run the selected benchmarks and curves; return the report dict.

    `on_progress(partial_report)` is called after each benchmark (so an
    interrupted run still leaves its finished results behind).
    """
    import keras

    from experiments.bench import scaling, timing

    started = time.perf_counter()
    machine = timing.machine_info()
    policy = keras.config.dtype_policy()
    if mixed_precision:
        keras.config.set_dtype_policy("mixed_float16")
    results, curves = {}, {}
    report = {"machine": machine, "settings": {}, "results": results, "scaling": curves}

    def settings():
        return {
            "profile": options.profile,
            "jit_compile": options.jit_compile,
            "mixed_precision": mixed_precision,
            "tfa_python": options.tfa_python,
            "seed": options.seed,
            "repeats": options.repeats,
            "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": _git_commit(),
            "wall_s": round(time.perf_counter() - started, 1),
            "method": "warm-up, then alternating pairs project/peer in one process; ratio = "
            "median of per-pair ratios, spread = their quartiles",
        }

    try:
        for name, bench in BENCHMARKS.items():
            if only is not None and name not in only:
                continue
            results[name] = run_one(name, bench, options)
            _progress(name, results[name])
            if on_progress is not None:
                report["settings"] = settings()
                on_progress(report)
        if only is None or "scaling" in only:
            curves.update(scaling.run_curves(options))
    finally:
        keras.config.set_dtype_policy(policy)
    machine["load_average_end"] = timing.load_average()
    report["settings"] = settings()
    return report


def run_one(name: str, bench, options: Options) -> dict:
    """One benchmark as a result entry: measured, skipped or failed."""
    import gc

    import keras

    goal = GOALS[name]
    base = {"goal": goal, "ratio": None, "met": None}
    keras.backend.clear_session()
    gc.collect()
    started = time.perf_counter()
    try:
        result = bench(options)
    except Skip as skip:
        return {**base, "skipped": str(skip)}
    except Exception as err:  # one broken benchmark must not hide the others
        return {
            **base,
            "error": f"{type(err).__name__}: {err}",
            "traceback": traceback.format_exc(limit=6),
        }
    ratio = float(result["ratio"])
    return {
        **base,
        **result,
        "ratio": ratio,
        "met": goal_met(goal, ratio),
        "kind": "speedup (peer / project)" if goal.startswith(">=") else "project / peer",
        "bench_wall_s": round(time.perf_counter() - started, 1),
    }


def _progress(name: str, result: dict) -> None:
    print(f"  {name}: {_cell(result)}", file=sys.stderr, flush=True)


def _cell(result: dict) -> str:
    if "skipped" in result:
        return f"skipped ({result['skipped']})"
    if "error" in result:
        return f"ERROR {result['error'][:120]}"
    q1, q3 = result["spread"]["iqr"]
    verdict = "met" if result["met"] else "MISSED"
    return f"{result['ratio']:.3f} [IQR {q1:.3f}-{q3:.3f}] goal {result['goal']} {verdict}"


def summary(report: dict) -> str:
    """A plain-text table of the results and curves."""
    lines = [f"benchmarks ({report['settings']['profile']}, {report['machine']['device']}):"]
    for name, result in report["results"].items():
        lines.append(f"  {name:26s} {_cell(result)}")
    for name, curve in report.get("scaling", {}).items():
        if "skipped" in curve:
            lines.append(f"  {name:26s} skipped ({curve['skipped']})")
        elif "exponent" in curve:
            k = curve["exponent"]
            lines.append(
                f"  {name:26s} time ~ T^{k:.2f} (expected {curve['expected']})"
                if k is not None
                else f"  {name:26s} (too few points)"
            )
        elif "exponent_measured" in curve:
            km, ka = curve["exponent_measured"], curve["exponent_analytic"]
            measured = f"T^{km:.2f} measured" if km is not None else "not measurable"
            analytic = f"T^{ka:.2f} analytic" if ka is not None else "too few points"
            lines.append(f"  {name:26s} memory ~ {measured}, {analytic}")
    return "\n".join(lines)


def log_to_mlflow(report: dict) -> str:
    """Log the report as one MLflow run in experiment `bench`; return its id."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from experiments import tracking
    from experiments.bench import scaling

    client = tracking.connect()
    experiment = tracking.experiment_id(client, "bench")
    settings = report["settings"]
    run = client.create_run(
        experiment,
        run_name=f"bench-{settings['profile']}",
        tags={"kind": "bench", "profile": settings["profile"]},
    )
    tracker = tracking.Tracker(client, run.info.run_id)
    status = "FAILED"
    try:
        tracker.set_tags(tracking.environment_tags())
        tracker.log_params(
            {k: v for k, v in settings.items() if k not in ("method", "wall_s")}
            | {
                "cpu": report["machine"].get("processor"),
                "cores": report["machine"]["usable_cores"],
            }
        )
        metrics = {}
        for name, result in report["results"].items():
            if result.get("ratio") is None:
                continue
            metrics[f"{name}.ratio"] = result["ratio"]
            metrics[f"{name}.project_s"] = result["project_s"]
            metrics[f"{name}.peer_s"] = result["peer_s"]
            metrics[f"{name}.met"] = float(result["met"])
        for name, curve in report.get("scaling", {}).items():
            for key in ("exponent", "exponent_measured"):
                if curve.get(key) is not None:
                    metrics[f"{name}.{key}"] = curve[key]
        tracker.log_metrics(metrics, step=0)
        tracker.log_text(json.dumps(report, indent=2, default=_jsonable), "bench.json")
        tracker.log_text(summary(report), "summary.txt")
        if report.get("scaling"):
            fig = scaling.figure(report["scaling"])
            tracker.log_figure(fig, "scaling.png")
            plt.close(fig)
        status = "FINISHED"
    finally:
        tracker.end(status)
    return run.info.run_id


def _git_commit() -> str:
    try:
        from experiments import tracking

        return tracking.git_commit()
    except Exception:
        return "unknown"


def _jsonable(value):
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
