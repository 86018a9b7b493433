"""Results reach the terminal: a run ends with its result block (test metrics, baseline,
best epoch, where to look), a sweep with a table of its points (and its comparison table
holds the baseline and the best epoch), a study with a table of its trials, printed once
however many workers it has, and its workers' epoch lines carry the trial's number."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import mlflow
import pytest
from experiments_helpers import TINY_TASKS, migrated_store, runs, use_store, write_config
from scaleout_helpers import child_env, cli_done

from experiments.commands import main

ROOT = Path(__file__).resolve().parents[1]
EARLY = {"epochs": 2, "early_stopping": {"monitor": "val_accuracy", "mode": "max", "patience": 1}}


@pytest.fixture
def store(tmp_path, monkeypatch):
    return use_store(tmp_path, monkeypatch)


def _needle(tmp_path) -> Path:
    return write_config(
        tmp_path,
        TINY_TASKS["needle"],
        train=EARLY,
        tracking={"log_model": False, "system_metrics": False},
    )


def test_a_run_ends_with_its_result_block(store, tmp_path, capsys):
    assert main(["run", str(_needle(tmp_path))]) == 0
    out = capsys.readouterr().out
    (finished,) = runs(store)
    metrics = finished.data.metrics
    lines = out.splitlines()
    start = lines.index(f"result of run {finished.info.run_name} (FINISHED):")
    block = lines[start : start + 4]
    assert _pairs(block[1], "test") == {
        k.removeprefix("test_"): f"{v:.3f}" for k, v in metrics.items() if k.startswith("test_")
    }
    assert block[2].startswith(
        f"  baseline  accuracy {metrics['baseline_test_accuracy']:.3f}  "
        f"macro_f1 {metrics['baseline_test_macro_f1']:.3f}"
    ), block
    ran = max(
        m.step for m in mlflow.MlflowClient(store).get_metric_history(finished.info.run_id, "loss")
    )
    how = "all ran" if ran == 2 else "early stopping ended the run; 2 configured"
    assert block[3] == f"  weights   best epoch {int(metrics['best_epoch'])} of {ran} ({how})"
    assert f"run id: {finished.info.run_id}" in lines
    views = f"#/experiments/{finished.info.experiment_id}/runs?viewStateShareKey=attention&"
    images = [line for line in lines if line.startswith("  its attention images: ")]
    assert images == [
        f"  its attention images: http://127.0.0.1:5000/{views}compareRunsMode=CHART"
        "&workflowType=machine_learning"
    ]
    page = f"#/experiments/{finished.info.experiment_id}/runs/{finished.info.run_id}"
    assert any(
        line.startswith("  its page there: http://127.0.0.1:5000/") and page in line
        for line in lines
    )


def _pairs(line: str, label: str) -> dict:
    """`  test      accuracy 0.500  macro_f1 0.400` -> {"accuracy": "0.500", ...}."""
    assert line.startswith(f"  {label.ljust(10)}"), line
    words = line.split()[1:]
    return dict(zip(words[::2], words[1::2]))


def test_the_block_shows_each_length_bucket_in_order():
    from experiments.tracking import results

    class Run:
        class info:
            run_name, run_id, status = "r", "abc", "FINISHED"

        class data:
            params = {"train.epochs": "3"}
            metrics = {
                "test_exact_match_greedy": 0.5,
                "test_exact_match_greedy_len_13_16": 0.25,
                "test_exact_match_greedy_len_4_12": 0.98,
                "test_exact_match_greedy_len_17_20": 0.0,
            }

    assert results.run_block(Run, ran=3) == [
        "result of run r (FINISHED):",
        "  test      exact_match_greedy 0.500",
        "  weights   the last epoch's (epoch 3)",
        "  lengths   exact_match_greedy: 4-12 0.980  13-16 0.250  17-20 0.000",
    ]


@pytest.mark.parametrize(
    "best, configured, ran, line",
    [
        (1, "3", 2, "best epoch 1 of 2 (early stopping ended the run; 3 configured)"),
        (8, "8", 8, "best epoch 8 of 8 (all ran)"),
        (None, "3", 3, "the last epoch's (epoch 3)"),
        (None, "5", 2, "the last epoch's (epoch 2)"),  # a run killed after epoch 2
        (2, "4", None, "best epoch 2 (4 epochs configured)"),  # the history did not answer
    ],
)
def test_the_weights_line_counts_the_epochs_that_ran(best, configured, ran, line):
    from experiments.tracking import results

    class Run:
        class info:
            run_name, run_id, status = "r", "abc", "FINISHED"

        class data:
            params = {"train.epochs": configured}
            metrics = {"test_accuracy": 0.5, **({"best_epoch": best} if best else {})}

    assert results.run_block(Run, ran=ran)[-1] == f"  weights   {line}"


@pytest.mark.slow
def test_a_sweep_prints_a_table_and_its_comparison_holds_baseline_and_best_epoch(
    store, tmp_path, capsys
):
    grid = "model.attention.score=dot,tanh_dot"
    assert main(["sweep", str(_needle(tmp_path)), "--grid", grid]) == 0
    out = capsys.readouterr().out
    children = {
        r.data.params["model.attention.score"]: r
        for r in runs(store)
        if "mlflow.parentRunId" in r.data.tags
    }
    lines = out.splitlines()
    header = lines.index("sweep results (test split, whole; comparison.csv on the parent run):")
    assert re.split(r"\s{2,}", lines[header + 1].strip()) == [
        "point",
        "accuracy",
        "alignment_accuracy",
        "attention_entropy",
        "macro_f1",
        "baseline_accuracy",
        "baseline_macro_f1",
        "best_epoch",
        "s/epoch",
        "params",
    ]
    client, printed = mlflow.MlflowClient(store), []
    for offset, score in enumerate(("dot", "tanh_dot"), start=2):
        m = children[score].data.metrics
        epochs = client.get_metric_history(children[score].info.run_id, "epoch_seconds")
        cells = [
            f"{m['test_accuracy']:.3f}",
            f"{m['test_alignment_accuracy']:.3f}",
            f"{m['test_attention_entropy']:.3f}",
            f"{m['test_macro_f1']:.3f}",
            f"{m['baseline_test_accuracy']:.3f}",
            f"{m['baseline_test_macro_f1']:.3f}",
            str(int(m["best_epoch"])),
            f"{sum(e.value for e in epochs) / len(epochs):.3f}",
            str(int(m["model_parameters"])),
        ]
        point = f"model.attention.score={score}"
        assert re.split(r"\s{2,}", lines[header + offset].strip()) == [point, *cells]
        # each point's result is printed as soon as it is trained, before the table
        names = re.split(r"\s{2,}", lines[header + 1].strip())[1:]
        pairs = "  ".join(f"{n} {c}" for n, c in zip(names, cells))
        printed.append(lines.index(f"point {offset - 1}/2 {point}: {pairs}"))
    assert printed == sorted(printed) and printed[-1] < header
    (parent,) = [r for r in runs(store) if "mlflow.parentRunId" not in r.data.tags]
    local = mlflow.artifacts.download_artifacts(
        run_id=parent.info.run_id, artifact_path="comparison.csv", tracking_uri=store
    )
    with open(local, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert {"baseline_test_accuracy", "baseline_test_macro_f1", "best_epoch"} <= set(rows[0])
    for row in rows:
        m = children[row["model.attention.score"]].data.metrics
        assert float(row["best_epoch"]) == m["best_epoch"]
        assert float(row["baseline_test_accuracy"]) == pytest.approx(m["baseline_test_accuracy"])


@pytest.mark.slow
def test_a_study_on_two_workers_reports_once_and_labels_each_epoch_with_its_trial(tmp_path):
    config = write_config(
        tmp_path,
        {**TINY_TASKS["reverse"], "num_examples": 96},
        train={"epochs": 2, "verbose": 2},  # Keras's epoch lines on: a trial's replace them
        tracking={"log_model": False, "system_metrics": False},
    )
    space = "train.learning_rate=float:1e-3:5e-2:log"
    done = cli_done(
        ["tune", str(config), "--trials", "2", "--workers", "2", "--space", space],
        child_env(MLFLOW_TRACKING_URI=migrated_store(tmp_path)),
        tmp_path,
    )
    out, err = done.stdout, done.stderr
    for once in ("study: tests-config (", "best trial: ", "champion: ", "run id: "):
        assert out.count(once) == 1, out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("  trial  state"))
    assert [line.split()[:2] for line in lines[header + 1 : header + 3]] == [
        ["0", "COMPLETE"],
        ["1", "COMPLETE"],
    ]
    assert "Epoch 1/2" not in out and "step - loss" not in out  # Keras's unlabelled lines
    for trial in (0, 1):
        for epoch in (1, 2):
            assert re.search(
                rf"^tune: trial {trial}, epoch {epoch}/2: loss \d\.\d{{3}}  val_loss \d\.\d{{3}}  "
                rf"val_exact_match_greedy \d\.\d{{3}} \(\d+\.\d s\)$",
                err,
                re.MULTILINE,
            ), err


def test_a_sweep_point_s_line_and_table_show_its_budget():
    from experiments.tracking import results

    rows = [
        {"point": "a=1", "test_accuracy": 0.5, "best_epoch": 2.0, "mean_epoch_seconds": 1.25},
        {"point": "a=2", "test_accuracy": 0.75, "model_parameters": 1234},
    ]
    rows[0]["model_parameters"] = 99
    assert results.point_line(rows[0], 1, 2) == (
        "point 1/2 a=1: accuracy 0.500  best_epoch 2  s/epoch 1.250  params 99"
    )
    assert results.point_line(rows[1], 2, 2) == "point 2/2 a=2: accuracy 0.750  params 1234"
    header, first, second = results.test_table(rows, "point")
    assert header.split() == ["point", "accuracy", "best_epoch", "s/epoch", "params"]
    assert first.split() == ["a=1", "0.500", "2", "1.250", "99"]
    assert second.split() == ["a=2", "0.750", "-", "-", "1234"]
