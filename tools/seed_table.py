"""A sweep's finished runs as a Markdown table: one row per value of a parameter, each figure
the mean (min-max) over the runs that share it (the seeds of `--grid train.seed=...`).

    MLFLOW_TRACKING_URI=... python tools/seed_table.py EXPERIMENT [--by model.decoder] \
        [--metrics test_bleu_greedy test_chrf_greedy ...]

Seconds per epoch and tokens a second are each run's median `epoch_seconds` and
`tokens_per_second` (the median resists an epoch slowed by another process), then averaged
over the runs; parameters are `model_parameters`; peak memory is the process's resident
high-water mark in MB: at the last epoch's end (`peak_memory_mb`), by the end of training
with its evaluations and checkpoints (`train_peak_memory_mb`, runs since 2026-12-06) and by
the end of the run (`run_peak_memory_mb`, test scores and model logging included). Prints
the run ids under the table, so every figure can be traced to its run in the MLflow UI.
"""

from __future__ import annotations

import argparse
import statistics

from mlflow import MlflowClient

METRICS = [
    "test_bleu_greedy",
    "test_chrf_greedy",
    "test_bleu_beam",
    "test_chrf_beam",
    "test_exact_match_greedy",
    "test_copy_baseline_chrf",
    "best_epoch",
]


# per-epoch metrics and their column: each run's median epoch
PER_EPOCH = {"epoch_seconds": "seconds_per_epoch", "tokens_per_second": "tokens_per_second"}
# the budget's columns: seconds and tokens a second (medians), parameters, peak memory (MB)
# at the last epoch, by the end of training and over the whole run
BUDGET = ["seconds_per_epoch", "tokens_per_second", "model_parameters"]
PEAKS = ["peak_memory_mb", "train_peak_memory_mb", "run_peak_memory_mb"]
BUDGET += PEAKS
WHOLE = {"model_parameters", "tokens_per_second", *PEAKS}


def collect(client: MlflowClient, experiment: str, by: str) -> dict[str, list[dict]]:
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"no experiment named {experiment!r} in {client.tracking_uri}")
    groups: dict[str, list[dict]] = {}
    for run in client.search_runs([found.experiment_id], "attributes.status = 'FINISHED'"):
        if by not in run.data.params:  # the sweep's parent run
            continue
        figures = dict(run.data.metrics)
        for metric, column in PER_EPOCH.items():
            history = client.get_metric_history(run.info.run_id, metric)
            if history:
                figures[column] = statistics.median(m.value for m in history)
        figures["run_id"] = run.info.run_id
        groups.setdefault(run.data.params[by], []).append(figures)
    return groups


def spread(values: list[float], digits: int) -> str:
    mean = f"{statistics.fmean(values):.{digits}f}"
    if len(values) == 1:
        return mean
    return f"{mean} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def table(groups: dict[str, list[dict]], by: str, metrics: list[str]) -> str:
    columns = [*metrics, *BUDGET]
    lines = [
        "| " + " | ".join([by, "runs", *columns]) + " |",
        "|" + "---|" * (len(columns) + 2),
    ]
    for value, runs in groups.items():
        cells = [value, str(len(runs))]
        for column in columns:
            present = [run[column] for run in runs if column in run]
            digits = 3 if "exact_match" in column else 0 if column in WHOLE else 1
            cells.append(spread(present, digits) if present else "–")
        lines.append("| " + " | ".join(cells) + " |")
    for value, runs in groups.items():
        lines.append(f"\n{by}={value}: " + ", ".join(run["run_id"] for run in runs))
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment")
    parser.add_argument("--by", default="model.decoder", help="the parameter of a row")
    parser.add_argument("--metrics", nargs="+", default=METRICS)
    args = parser.parse_args(argv)
    client = MlflowClient()
    print(table(collect(client, args.experiment, args.by), args.by, args.metrics))


if __name__ == "__main__":
    main()
