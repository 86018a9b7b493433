"""The `champion` alias moves to a study's best model only when it beats the champion on
the study's objective, measured on the same data; otherwise it stays, and the study says why
(the parent run's `champion_verdict` tag, the version's tag, the command's line)."""

from __future__ import annotations

import math

import mlflow
import pytest
from experiments_helpers import TINY_TASKS, runs, use_store, write_config

from experiments.commands import main

DATA = {"task.name": "reverse", "task.num_examples": "96", "validation split digest": "ab12"}


def _standing(value, metric="val_loss", direction="minimize", **data):
    """The arguments of a `registry.Standing` (built in the test, once the module imports)."""
    return (metric, direction, value, {**DATA, **data})


@pytest.mark.parametrize(
    "new, current, moves, words",
    [
        (_standing(2.0), None, True, "there was no champion"),
        (_standing(2.0), _standing(2.5), True, "better on the same data: val_loss 2 vs"),
        (_standing(2.5), _standing(2.0), False, "not better on the same data"),
        (_standing(2.0), _standing(2.0), False, "not better"),  # a tie keeps the champion
        (
            _standing(0.9, "val_accuracy", "maximize"),
            _standing(0.8, "val_accuracy", "maximize"),
            True,
            "better",
        ),
        (
            _standing(0.7, "val_accuracy", "maximize"),
            _standing(0.8, "val_accuracy", "maximize"),
            False,
            "not better",
        ),
        (
            _standing(1.0),
            _standing(2.0, **{"task.num_examples": "600"}),
            False,
            "task.num_examples: 600 (champion) vs 96",
        ),
        (
            _standing(1.0),
            _standing(2.0, **{"validation split digest": "ff00"}),
            False,
            "validation split digest: ff00 (champion) vs ab12",
        ),
        (
            _standing(0.9, "val_accuracy", "maximize"),
            _standing(2.0),
            False,
            "chosen to minimize val_loss, this study to maximize val_accuracy",
        ),
        (_standing(1.0), _standing(None, "", ""), False, "records no objective"),
        (_standing(math.nan), _standing(2.0), False, "no finite val_loss"),
        (_standing(1.0), _standing(None), False, "the champion's run has no finite val_loss"),
    ],
)
def test_judge_moves_the_alias_only_for_a_better_model_on_the_same_data(new, current, moves, words):
    from experiments.tracking.registry import Standing, judge

    verdict = judge(Standing(*new), current and Standing(*current))
    assert verdict.moves is moves
    assert words in verdict.reason, verdict.reason


@pytest.fixture
def store(tmp_path, monkeypatch):
    return use_store(tmp_path, monkeypatch)


def _study(config, capsys, name: str, learning_rate: float, *flags) -> tuple[str, str]:
    """One study of one trial at `learning_rate`; (its parent run id, the command's output)."""
    args = ["tune", str(config), "--study", name, "--trials", "1", "--metric", "val_loss"]
    args += ["--space", f"train.learning_rate=categorical:{learning_rate}", *flags]
    assert main(args) == 0
    out = capsys.readouterr().out
    (parent,) = [
        r
        for r in runs(mlflow.get_tracking_uri())
        if r.data.tags.get("tune_study") == name and r.data.tags.get("tune") == "parent"
    ]
    return parent.info.run_id, out


@pytest.mark.slow
def test_a_worse_second_study_keeps_the_champion_and_a_better_one_takes_it(store, tmp_path, capsys):
    config = write_config(
        tmp_path,
        {**TINY_TASKS["reverse"], "num_examples": 96},
        train={"epochs": 2},
        tracking={"system_metrics": False},
    )
    client = mlflow.MlflowClient(store)

    def champion():
        return client.get_model_version_by_alias("tests", "champion")

    def verdict(parent: str) -> str:
        return client.get_run(parent).data.tags["champion_verdict"]

    # A first study that learns nothing (learning rate 1e-9), then a better one (it learns),
    # then a worse one (a 1-epoch smoke study that learns nothing): the alias goes to the
    # first, moves to the better, and stays there.
    held, studies = [], []
    for name, rate, flags in (
        ("untrained", 1e-9, ()),
        ("trained", 0.05, ()),
        ("smoke", 1e-9, ("--set", "train.epochs=1")),
    ):
        studies.append(_study(config, capsys, name, rate, *flags))
        held.append(int(champion().version))
    assert held == [1, 2, 2]
    (first, _), (better, better_out), (worse, worse_out) = studies

    # Every place says why.
    assert verdict(first) == "there was no champion"
    assert verdict(better).startswith("better on the same data: val_loss ")
    line = (
        f"champion: models:/tests@champion (version 2, the best trial's model): {verdict(better)}"
    )
    assert line in better_out
    reason = verdict(worse)
    assert reason.startswith("not better on the same data (val_loss ") and "kept" in reason
    # The worse study's model is registered (version 3), without the alias.
    assert client.get_model_version("tests", "3").tags["champion_verdict"] == reason
    assert client.get_run(worse).data.tags["registered_version"] == "models:/tests/3"
    assert "champion" not in client.get_run(worse).data.tags
    assert f"(version 2, run {champion().tags['run_id']}): {reason}" in worse_out

    # Other data (another split of the task): not compared, the champion stays.
    other, out = _study(config, capsys, "other-data", 0.05, "--set", "task.num_examples=80")
    assert int(champion().version) == 2
    assert "measured on other data (task.num_examples: 96 (champion) vs 80" in verdict(other)
    assert "not comparable, so the champion is kept" in out

    # Another objective: not compared either.
    args = ["--metric", "val_token_accuracy"]
    _, out = _study(config, capsys, "accuracy", 0.05, *args)  # --metric given twice: the last
    assert int(champion().version) == 2
    assert "this study to maximize val_token_accuracy: not comparable" in out
