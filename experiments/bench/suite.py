"""The benchmark suite: run the benchmarks and curves, summarise them, log them to MLflow.

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

import datetime as dt
import gc
import json
import sys
import time
import traceback

import keras
import matplotlib

from experiments.bench import scaling, timing
from experiments.bench.cases import BENCHMARKS
from experiments.bench.cases.common import Options, Skip
from experiments.bench.goals import GOALS, goal_met
from experiments.tracking import store
from experiments.tracking.tracker import Tracker


def run_suite(
    options: Options, only: set[str] | None = None, mixed_precision=False, on_progress=None
) -> dict:
    """Run the selected benchmarks and curves; return the report dict.

    `on_progress(partial_report)` is called after each benchmark (so an
    interrupted run still leaves its finished results behind).
    """
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
            "git_commit": store.git_commit(),
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
    goal = GOALS[name]
    base = {"goal": goal, "ratio": None, "met": None}
    keras.backend.clear_session()
    # What earlier cases left alive stays out of the collector's passes, so each case
    # pays for its own garbage only, as in a process of its own.
    gc.collect()
    gc.freeze()
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
    finally:
        gc.unfreeze()
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
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt  # after the backend choice: pyplot picks one on import

    client = store.connect()
    experiment = store.experiment_id(client, "bench")
    settings = report["settings"]
    run = client.create_run(
        experiment,
        run_name=f"bench-{settings['profile']}",
        tags={"kind": "bench", "profile": settings["profile"]},
    )
    tracker = Tracker(client, run.info.run_id)
    status = "FAILED"
    try:
        tracker.set_tags(store.environment_tags())
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
        tracker.log_text(to_json(report), "bench.json")
        tracker.log_text(summary(report), "summary.txt")
        if report.get("scaling"):
            fig = scaling.figure(report["scaling"])
            tracker.log_figure(fig, "scaling.png")
            plt.close(fig)
        status = "FINISHED"
    finally:
        tracker.end(status)
    return run.info.run_id


def to_json(report: dict) -> str:
    """The report as indented JSON (NumPy values as plain numbers)."""
    return json.dumps(report, indent=2, default=_jsonable)


def _jsonable(value):
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
