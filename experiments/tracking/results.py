"""What a run, a sweep or a study reached, as the terminal shows it when the command ends.

`run_block(run)`: a few lines from a finished MLflow run, its test metrics (whole test
split), the linear baseline's on the same split (classification), the epoch whose weights
were tested and logged, and the task metric per length bucket; `table(rows, columns)`: a
plain text table (a sweep's points, a study's trials). Read from the store (`read_back`,
one request with a short timeout), so the terminal says what the UI shows.
"""

from __future__ import annotations

import math

import mlflow

from experiments.tracking import server, store

BUCKET = "_len_"
# Seconds the report may wait on the store: a server that is away or slow (the run's end
# went to the spool) costs the report this, not the bound the end of a run keeps.
READ_SECONDS = 2


def read_back(run_id: str):
    """The run as the store has it now, or None when the store does not answer in time."""
    uri = store.tracking_uri()
    server.configure_http(uri)  # no MLflow retries against a server, unless the user set them
    try:
        with server.request_timeout(READ_SECONDS):
            return mlflow.MlflowClient(uri).get_run(run_id)
    except Exception:  # noqa: BLE001 - the run is done; the report says what it can
        return None


def image_view_route(experiment_id: str) -> str | None:
    """The UI route of the experiment's saved view of its attention images (`image_view`),
    or None when it has none (no images logged) or the store does not answer in time."""
    from experiments.tracking import image_view

    uri = store.tracking_uri()
    try:
        with server.request_timeout(READ_SECONDS):
            tags = mlflow.MlflowClient(uri).get_experiment(experiment_id).tags
    except Exception:  # noqa: BLE001 - the report says what it can
        return None
    return image_view.route(experiment_id) if image_view.TAG in tags else None


def epochs_run(run_id: str) -> int | None:
    """The epochs the run trained (the last step of its `loss`: steps are 1-based epochs,
    a resumed run's included), or None when the store does not answer in time."""
    uri = store.tracking_uri()
    try:
        with server.request_timeout(READ_SECONDS):
            history = mlflow.MlflowClient(uri).get_metric_history(run_id, "loss")
    except Exception:  # noqa: BLE001 - the report says what it can
        return None
    return max((m.step for m in history), default=None)


def number(value) -> str:
    """A value as the terminal shows it: a float with 3 decimals (4 significant digits when
    large), anything else as it is, `-` for none."""
    if value is None:
        return "-"
    if not isinstance(value, float) or not math.isfinite(value):
        return str(value)
    return f"{value:.3f}" if abs(value) < 1000 else f"{value:.4g}"


def run_block(run, ran: int | None = None) -> list[str]:
    """The result lines of a finished run (an MLflow `Run`); `ran`: the epochs it trained
    (`epochs_run`; None: unknown, the configured `train.epochs` is named instead)."""
    metrics = run.data.metrics
    name = run.info.run_name or run.info.run_id
    lines = [f"result of run {name} ({run.info.status}):"]
    test = {
        k.removeprefix("test_"): v
        for k, v in sorted(metrics.items())
        if k.startswith("test_") and BUCKET not in k
    }
    lines.append("  test      " + (_pairs(test) or "no test metrics logged"))
    baseline = {
        k.removeprefix("baseline_test_"): v
        for k, v in sorted(metrics.items())
        if k.startswith("baseline_test_")
    }
    if baseline:
        lines.append(
            "  baseline  " + _pairs(baseline) + "  (TF-IDF + logistic regression, same split)"
        )
    lines += _weights_line(metrics.get("best_epoch"), run.data.params.get("train.epochs"), ran)
    return lines + _by_length(metrics, list(test))


def _weights_line(best, configured, ran: int | None) -> list[str]:
    """Which epoch's weights were tested: the best one (early stopping on), out of the
    epochs that ran, saying whether early stopping ended the run; else the last one."""
    if ran is None:
        if best is not None and configured is not None:
            return [f"  weights   best epoch {int(best)} ({configured} epochs configured)"]
        if configured is None:
            return []
        return [f"  weights   the last epoch's ({configured} epochs configured)"]
    if best is None:
        return [f"  weights   the last epoch's (epoch {ran})"]
    stopped = configured is not None and ran < int(configured)
    how = f"early stopping ended the run; {configured} configured" if stopped else "all ran"
    return [f"  weights   best epoch {int(best)} of {ran} ({how})"]


def table(rows: list[dict], columns: list[str], headers: dict | None = None) -> list[str]:
    """`rows` as aligned text lines under a header line; `headers` renames columns."""
    headers = headers or {}
    cells = [[headers.get(c, c) for c in columns]]
    cells += [[number(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


# A sweep point's budget: its mean epoch and its model's size (`sweep._summary_row`).
BUDGET = {"mean_epoch_seconds": "s/epoch", "model_parameters": "params"}


def test_table(rows: list[dict], label: str) -> list[str]:
    """The test metrics of several runs side by side (a sweep's points): the column `label`,
    then every `test_` metric but the per-length ones, the baseline's, `best_epoch`, and the
    budget (`s/epoch`, `params`)."""
    keys, headers = _test_columns(rows)
    shown = [{**r, "best_epoch": _whole(r.get("best_epoch"))} for r in rows]
    return table(shown, [label, *keys], headers)


def point_line(row: dict, index: int, total: int) -> str:
    """A sweep point's result as soon as it is trained (`row`: its `test_table` row):
    `point 1/2 model.attention.score=dot: accuracy 0.812  ...  s/epoch 1.234  params 10818`."""
    keys, headers = _test_columns([row])
    shown = {**row, "best_epoch": _whole(row.get("best_epoch"))}
    pairs = "  ".join(f"{headers[k]} {number(shown[k])}" for k in keys)
    return f"point {index}/{total} {row['point']}: {pairs}"


def _test_columns(rows: list[dict]) -> tuple[list[str], dict]:
    """`test_table`'s columns after the label, and their headers."""
    keys = sorted({k for r in rows for k in r if k.startswith("test_") and BUCKET not in k})
    keys += sorted({k for r in rows for k in r if k.startswith("baseline_test_")})
    keys += ["best_epoch"] if any("best_epoch" in r for r in rows) else []
    keys += [k for k in BUDGET if any(k in r for r in rows)]
    headers = {k: k.removeprefix("test_").replace("baseline_test_", "baseline_") for k in keys}
    return keys, {**headers, **{k: v for k, v in BUDGET.items() if k in keys}}


def _whole(value):
    return None if value is None else int(value)


def _pairs(values: dict) -> str:
    return "  ".join(f"{k} {number(v)}" for k, v in values.items())


def _by_length(metrics: dict, stems: list[str]) -> list[str]:
    """A line per test metric logged per length bucket (`test_<stem>_len_A_B`):
    `lengths   exact_match_greedy: 4-12 0.990  13-16 0.360 ...`."""
    lines = []
    for stem in stems:
        prefix = f"test_{stem}{BUCKET}"
        buckets = {k.removeprefix(prefix): v for k, v in metrics.items() if k.startswith(prefix)}
        if buckets:
            shown = sorted(buckets.items(), key=lambda kv: [int(n) for n in kv[0].split("_")])
            text = "  ".join(f"{b.replace('_', '-')} {number(v)}" for b, v in shown)
            lines.append(f"  lengths   {stem}: {text}")
    return lines
