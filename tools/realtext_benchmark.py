"""The `textcls` config before and after its small-real-text defaults, on fortunes topics.

    python -m tools.realtext_benchmark [--data /tmp/realtext/fortunes.csv] [--seeds 0 1 2]

From the project root. Writes the topic set of `tools/fortunes_dataset.py` (1,610 short
fortunes, 7 topics) unless `--data` exists already, then trains the ready `textcls` config once
per seed as it was (`BEFORE`: its settings until the defaults changed, given as overrides, as
`--set` gives them) and as it ships (`after`: no overrides), each through the runner
(`run.validate`, `run.execute`) into a scratch MLflow store (`--store`, not the project's
`mlruns`), with `task.seed` and `train.seed` both the seed: a seed is a split and an
initialisation. Beside each run, the linear baseline (`experiments.data.baseline`: TF-IDF
words and bigrams + logistic regression on the run's own token ids and splits; the run's own
`baseline_test_*` metrics when it logs them). Prints a Markdown table on stdout: test
accuracy and macro-F1, mean and min-max over the seeds, and the epoch kept.

One training at a time; on a shared machine set OMP_NUM_THREADS=1 TF_NUM_INTRAOP_THREADS=1
TF_NUM_INTEROP_THREADS=1 (under a minute a run on one core).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from pathlib import Path

from tools.seed_table import spread

TOOLS = Path(__file__).resolve().parent

# The ready textcls config's settings before the small-real-text defaults.
BEFORE = [
    "task.max_vocab=2000",
    "task.max_length=40",
    "model.embedding_dim=32",
    "model.units=32",
    "model.rnn=lstm",
    "model.dropout=0.0",
    "train.epochs=10",
    "train.batch_size=32",
    "train.learning_rate=0.003",
    "train.early_stopping={monitor: val_loss, patience: 3}",
]
VARIANTS = {"before": BEFORE, "after": []}
METRICS = ("accuracy", "macro_f1")
COLUMNS = ("model_accuracy", "model_macro_f1", "baseline_accuracy", "baseline_macro_f1")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/tmp/realtext/fortunes.csv"))
    parser.add_argument("--store", default="sqlite:////tmp/realtext/mlflow.db")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--experiment", default="realtext")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        subprocess.run(
            [sys.executable, str(TOOLS / "fortunes_dataset.py"), str(args.data)], check=True
        )
    os.environ["MLFLOW_TRACKING_URI"] = args.store  # before the runner reads it
    results = {
        name: [run_once(args, overrides, seed) for seed in args.seeds]
        for name, overrides in VARIANTS.items()
    }
    print(table(results, args))
    return 0


def run_once(args, overrides: list[str], seed: int) -> dict:
    """Train one config through the runner; its test metrics and the linear baseline's."""
    import keras
    import mlflow

    from experiments import config, ready_configs
    from experiments.data.baseline import linear_baseline
    from experiments.training import run

    keras.backend.clear_session()
    cfg = config.load_config(
        ready_configs.resolve("textcls"),
        [
            *overrides,
            f"task.path={args.data}",
            f"task.seed={seed}",
            f"train.seed={seed}",
            f"tracking.experiment={args.experiment}",
            "tracking.system_metrics=false",
            "tracking.log_model=false",
            "train.verbose=0",
        ],
    )
    with contextlib.redirect_stdout(sys.stderr):  # stdout: the table alone
        prepared = run.validate(cfg)
        task = prepared.task
        run_id = run.execute(prepared)
    logged = mlflow.MlflowClient().get_run(run_id).data.metrics
    out = {f"model_{m}": logged[f"test_{m}"] for m in METRICS}
    out["best_epoch"] = logged.get("best_epoch", float("nan"))
    if all(f"baseline_test_{m}" in logged for m in METRICS):  # the run logged its own
        out.update({f"baseline_{m}": logged[f"baseline_test_{m}"] for m in METRICS})
    else:
        baseline = linear_baseline(task.train, task.test, len(task.class_names), seed)
        out.update({f"baseline_{m}": baseline[m] for m in METRICS})
    print(f"{run_id} seed {seed}: {out}", file=sys.stderr)
    return out


def table(results: dict[str, list[dict]], args) -> str:
    seeds = " ".join(str(s) for s in args.seeds)
    lines = [
        f"textcls on {args.data.name}, seeds {seeds}: mean (min-max) of the test split",
        "",
        "| config | test_accuracy | test_macro_f1 | baseline accuracy | baseline macro-F1 "
        "| best epoch |",
        "|---|---|---|---|---|---|",
    ]
    for name, rows in results.items():
        cells = [spread([r[key] for r in rows], 3) for key in COLUMNS]
        cells.append(spread([r["best_epoch"] for r in rows], 1))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
