"""A sweep: a parent MLflow run with one nested run per grid point, and their comparison."""

from __future__ import annotations

import itertools
import sys
import tempfile
from dataclasses import dataclass

import mlflow
import yaml
from matplotlib.figure import Figure

from experiments import config as config_lib
from experiments.errors import ConfigError
from experiments.tracking import results, store
from experiments.tracking.tracker import Tracker
from experiments.training import run


def parse_grid(specs: list[str]) -> list[tuple[str, list[str]]]:
    """`["a.b=1,2", "c=x,y"]` -> `[("a.b", ["1", "2"]), ("c", ["x", "y"])]`."""
    if not specs:
        raise ConfigError(
            "sweep needs at least one --grid KEY=V1,V2 (for example "
            "--grid model.attention.score=dot,general,additive)"
        )
    grid = []
    for spec in specs:
        key, sep, raw = spec.partition("=")
        values = [v.strip() for v in raw.split(",")]
        if not sep or not key.strip() or not all(values):
            raise ConfigError(f"--grid {spec!r}: expected KEY=V1,V2,... with non-empty values")
        grid.append((key.strip(), values))
    return grid


def grid_points(grid) -> list[list[str]]:
    """The cartesian product of the grid as lists of `key=value` overrides."""
    keys = [k for k, _ in grid]
    return [
        [f"{k}={v}" for k, v in zip(keys, combo)]
        for combo in itertools.product(*(v for _, v in grid))
    ]


@dataclass
class Outcome:
    """What a sweep made: its parent run, and one row per point (`comparison.json`'s)."""

    parent_run_id: str
    rows: list[dict]


def run_sweep(path, specs: list[str], overrides: list[str]) -> Outcome:
    """Validate every point, then train each as a nested run; return the parent run id and
    the points' rows."""
    base = config_lib.read_yaml(path)
    points = grid_points(parse_grid(specs))
    prepared = [run.validate(config_lib.apply_overrides(base, overrides + p)) for p in points]
    client = store.connect()
    cfg0 = prepared[0].cfg
    parent = mlflow.start_run(
        experiment_id=store.experiment_id(client, cfg0.tracking.experiment),
        run_name=cfg0.tracking.run_name or f"sweep-{prepared[0].task.name}",
    )
    tracker = Tracker(client, parent.info.run_id)
    status = "FAILED"
    try:
        tracker.set_tags({"sweep": "parent", "task": prepared[0].task.name})
        tracker.log_params({"grid": " ".join(specs), "num_points": len(points)})
        tracker.log_text(yaml.safe_dump(base, sort_keys=False), "base_config.yaml")
        rows = []
        for index, (point, item) in enumerate(zip(points, prepared), start=1):
            _progress(index, len(points), point)
            child = run.execute(item, parent_run_id=parent.info.run_id)
            rows.append(_summary_row(client, child, point))
            print(results.point_line(rows[-1], index, len(points)), flush=True)
            _copy_final_heatmaps(client, child, tracker, point)
        _progress(len(points), len(points), ["done"], end="\n")
        kind = prepared[0].task.kind
        _log_comparison(tracker, rows, kind.primary_metric)
        shown = [kind.primary_metric, *(f"test_{m}" for m in kind.length_plot_metrics)]
        _log_length_comparison(tracker, rows, shown)
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        tracker.close()
        mlflow.end_run(status)
    return Outcome(parent.info.run_id, rows)


def _progress(done: int, total: int, point: list[str], end: str = "\n") -> None:
    width = 20
    filled = int(width * (done - 1 if point != ["done"] else done) / total)
    bar = "#" * filled + "-" * (width - filled)
    print(f"sweep [{bar}] {done}/{total} {' '.join(point)}", file=sys.stderr, end=end, flush=True)


def _copy_final_heatmaps(client, child: str, tracker, point: list[str]) -> None:
    """The point's labelled final heatmaps, on the parent under `heatmaps/<point>/`, so one
    page compares the points' attention."""
    folder = "heatmaps/" + "_".join(p.replace("=", "-") for p in point)
    with tempfile.TemporaryDirectory() as tmp:
        for item in client.list_artifacts(child, "heatmaps/final"):
            local = client.download_artifacts(child, item.path, tmp)
            tracker.client.log_artifact(tracker.run_id, local, folder)


# The metrics a point's row holds: validation (last epoch), test, the linear baseline's test
# figures, and the epoch whose weights were tested.
ROW_METRICS = ("test_", "val_", "baseline_test_", "best_epoch")


def _summary_row(client, run_id: str, point: list[str]) -> dict:
    run = client.get_run(run_id)
    row = {"run_id": run_id, "point": " ".join(point)}
    row.update(dict(p.split("=", 1) for p in point))
    row.update({k: v for k, v in sorted(run.data.metrics.items()) if k.startswith(ROW_METRICS)})
    # the budget side of the comparison: the model's size and its mean epoch
    if "model_parameters" in run.data.metrics:
        row["model_parameters"] = int(run.data.metrics["model_parameters"])
    epochs = [m.value for m in client.get_metric_history(run_id, "epoch_seconds")]
    if epochs:
        row["mean_epoch_seconds"] = sum(epochs) / len(epochs)
    return row


def _log_comparison(tracker, rows: list[dict], metric: str) -> None:
    """The comparison table (JSON + CSV) and a bar plot of the primary metric."""
    tracker.log_table(rows, "comparison.json")
    labels = [r["point"] for r in rows]
    values = [r.get(metric, float("nan")) for r in rows]
    fig = Figure(figsize=(max(4.0, 1.2 * len(rows) + 2), 4))
    ax = fig.add_subplot(1, 1, 1)
    ax.bar(range(len(rows)), values, color="tab:blue")
    ax.set_xticks(range(len(rows)), labels=labels, rotation=30, ha="right")
    ax.set_ylabel(metric)
    ax.set_title(f"sweep: {metric}")
    fig.tight_layout()
    tracker.log_figure(fig, "comparison.png")


def _log_length_comparison(tracker, rows: list[dict], metrics: list[str]) -> None:
    """With length buckets: `length_comparison.json` (+ CSV), a row per point and bucket with
    `metrics` there (`test_exact_match_greedy` and `test_exact_match_oracle` of
    `test_exact_match_greedy_len_13_16` ...), and `length_comparison.png`, a panel per metric
    with a bar per point in each bucket."""
    buckets = sorted(
        {k.split("_len_", 1)[1] for r in rows for k in r if k.startswith(f"{metrics[0]}_len_")},
        key=lambda b: tuple(int(n) for n in b.split("_")),
    )
    if not buckets:
        return
    table = [
        {
            "point": r["point"],
            "bucket": b,
            **{m.removeprefix("test_"): r.get(f"{m}_len_{b}", float("nan")) for m in metrics},
        }
        for r in rows
        for b in buckets
    ]
    tracker.log_table(table, "length_comparison.json")
    width = 0.8 / len(rows)
    fig = Figure(
        figsize=(max(5.0, (1.0 + 0.35 * len(rows)) * len(buckets) + 2), 3.2 * len(metrics))
    )
    for panel, metric in enumerate(metrics, start=1):
        ax = fig.add_subplot(len(metrics), 1, panel)
        for k, r in enumerate(rows):
            values = [r.get(f"{metric}_len_{b}", float("nan")) for b in buckets]
            xs = [i + (k - (len(rows) - 1) / 2) * width for i in range(len(buckets))]
            ax.bar(xs, values, width=width, label=r["point"])
        ax.set_xticks(range(len(buckets)), labels=[b.replace("_", "–") for b in buckets])
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(metric.removeprefix("test_"))
        ax.set_title(f"sweep: {metric} by length (first: seen in training)", fontsize=9)
        if panel == 1:
            ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    tracker.log_figure(fig, "length_comparison.png")
