"""Studies that explore (issue 50): with one `--seed`, every worker and every rerun of a
study seeds its sampler differently (the same command on the same study reproduces), and
every registered version records the objective it was judged on, the losing ones too."""

from __future__ import annotations

import optuna
import pytest
from experiments_helpers import use_store

from experiments.tracking import registry, store
from experiments.tuning import tune


def _plan(worker: int = 0, seed: int | None = 7, sampler: str = "tpe") -> tune.Plan:
    return tune.Plan(
        base={},
        experiment="tests",
        dims=[],
        trials=4,
        metric="val_loss",
        direction="minimize",
        sampler=sampler,
        pruner={"name": "none"},
        storage="",
        study="seeds",
        register_as="tests",
        heartbeat=60,
        seed=seed,
        worker=worker,
    )


def _draw(study) -> float:
    trial = study.ask()
    value = trial.suggest_float("learning_rate", 1e-4, 1e-1, log=True)
    study.tell(trial, value)
    return value


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_two_workers_with_one_seed_draw_different_parameters(sampler):
    storage = optuna.storages.InMemoryStorage()
    first, second = (tune._load_study(_plan(w, sampler=sampler), storage) for w in (0, 1))
    assert _draw(first) != _draw(second)


def test_a_study_run_again_draws_new_points():
    storage = optuna.storages.InMemoryStorage()
    earlier = _draw(tune._load_study(_plan(), storage))
    again = _draw(tune._load_study(_plan(), storage))  # the same command, once more
    assert again != earlier


def test_the_same_command_on_a_new_study_draws_the_same_points():
    draws = [_draw(tune._load_study(_plan(), optuna.storages.InMemoryStorage())) for _ in "ab"]
    assert draws[0] == draws[1]
    assert tune.sampler_seed(None, 1, 3) is None  # no --seed: random, as before
    seeds = {tune.sampler_seed(7, w, n) for w in range(3) for n in range(3)}
    assert len(seeds) == 9


def test_each_started_worker_is_given_its_number(monkeypatch):
    started = []
    monkeypatch.setattr(tune.subprocess, "Popen", lambda argv, env: started.append(argv))
    plan = _plan()
    plan.worker_argv = ["demo", "--seed", "7"]
    for number in (1, 2):
        tune._start_worker(plan, number)
    assert [argv[argv.index("--worker") + 1] for argv in started] == ["1", "2"]


def test_a_version_that_loses_records_its_objective(tmp_path, monkeypatch):
    use_store(tmp_path, monkeypatch)
    client = store.connect()  # as `tune` does: MLflow's own calls (registering) go there too
    experiment = client.create_experiment("tests", artifact_location=(tmp_path / "a").as_uri())
    run_ids = []
    for loss in (1.0, 2.0):  # the champion, then a worse model on the same data
        run_id = client.create_run(experiment).info.run_id
        client.log_param(run_id, "task.name", "reverse")
        client.log_metric(run_id, "val_loss", loss)
        client.log_text(run_id, "flavor", "model/MLmodel")
        client.set_tag(run_id, "model_uri", f"runs:/{run_id}/model")
        run_ids.append(run_id)
    _, first = registry.register(client, run_ids[0], "tests", "val_loss", "minimize")
    version, second = registry.register(client, run_ids[1], "tests", "val_loss", "minimize")
    assert first.moves and not second.moves
    assert int(registry.aliased(client, "tests").version) == 1
    tags = version.tags
    assert int(version.version) == 2
    assert (tags["objective_metric"], tags["objective_direction"]) == ("val_loss", "minimize")
    assert float(tags["objective_value"]) == 2.0
    assert tags[registry.VERDICT_TAG].startswith("not better on the same data")
