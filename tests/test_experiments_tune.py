"""`tune`: an Optuna study as nested MLflow runs on the local stores (SQLite, journal):
errors before anything is created, the parent's summary, resuming, pruning, the champion."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import numpy as np
import optuna
import psutil
import pytest
from experiments_helpers import TINY_TASKS, runs, use_store, write_config
from scaleout_helpers import child_env, free_port, metric_steps

from experiments.commands import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh SQLite store in tmp_path, used through MLFLOW_TRACKING_URI."""
    return use_store(tmp_path, monkeypatch)


def _config(folder: Path, epochs: int = 1, log_model: bool = False, **tune) -> Path:
    return write_config(
        folder,
        {**TINY_TASKS["reverse"], "num_examples": 96},
        train={"epochs": epochs},
        tracking={"log_model": log_model, "system_metrics": False},
        tune={"space": {"train.learning_rate": "float:1e-3:5e-2:log"}, **tune},
    )


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--space", "model.unitz=int:4:8"], ["model.unitz", "no such key"]),
        (["--space", "model.units=gauss:4:8"], ["model.units", "unknown distribution 'gauss'"]),
        (["--space", "model.units=int:8:4"], ["model.units", "LOW < HIGH"]),
        (["--space", "train.learning_rate=float:0:1:log"], ["log scale needs LOW > 0"]),
        (["--space", "model.dropout=float:0.1:1.5"], ["model.dropout", "1.5"]),
        (["--space", "model.rnn=categorical:lstm,rnn"], ["model.rnn", "'rnn'"]),
        (["--metric", "val_nonsense"], ["val_nonsense", "val_exact_match_greedy"]),
        (["--storage", "nosuch://host/db"], ["--storage", "unsupported database 'nosuch'"]),
        (["--storage", "not a url"], ["--storage", "not a storage URL"]),
        (["--sampler", "grid"], ["grid sampler needs categorical"]),
    ],
)
def test_a_bad_study_exits_2_before_anything_is_created(store, tmp_path, capsys, flags, words):
    config = _config(tmp_path)
    before = sorted(p.name for p in (tmp_path / "mlruns").iterdir())

    assert main(["tune", str(config), *flags]) == 2

    err = capsys.readouterr().err
    assert all(w in err for w in words), err
    assert sorted(p.name for p in (tmp_path / "mlruns").iterdir()) == before  # no optuna.db
    assert runs(store) == []


def test_an_unreachable_storage_exits_3_before_any_run(store, tmp_path, capsys):
    config = _config(tmp_path)
    url = f"postgresql://tuner:s3cret@127.0.0.1:{free_port()}/studies"

    assert main(["tune", str(config), "--storage", url]) == 3

    err = capsys.readouterr().err
    assert "cannot be reached" in err and "127.0.0.1" in err
    assert "s3cret" not in err  # the password is never printed
    assert runs(store) == []


def test_an_unreachable_tracking_server_exits_3_before_the_study_is_made(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("ATTN_RNN_TRACKING_TIMEOUT", "0.5")
    config = _config(tmp_path)
    storage = tmp_path / "study.db"

    assert main(["tune", str(config), "--storage", f"sqlite:///{storage}"]) == 3

    assert "did not answer" in capsys.readouterr().err
    assert not storage.exists() and not (tmp_path / "mlruns").exists()


@pytest.mark.slow
def test_a_study_on_two_workers_is_a_parent_run_with_one_nested_run_per_trial(
    store, tmp_path, capsys
):
    config = _config(tmp_path, log_model=True, trials=3)

    assert main(["tune", str(config), "--workers", "2"]) == 0  # this process and one more
    out = capsys.readouterr().out

    client = mlflow.MlflowClient(store)
    parents = [r for r in runs(store) if r.data.tags.get("tune") == "parent"]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    children = [r for r in runs(store) if r.data.tags.get("mlflow.parentRunId")]
    assert sorted(int(c.data.tags["tune_trial"]) for c in children) == [0, 1, 2]
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert all(c.data.tags["pruned"] == "false" for c in children)
    for child in children:  # per-epoch metrics, once per step
        assert metric_steps(client, child.info.run_id)["val_exact_match_greedy"] == [1]

    study = optuna.load_study(
        study_name="tests-config", storage=f"sqlite:///{tmp_path / 'mlruns' / 'optuna.db'}"
    )
    best = study.best_trial
    by_trial = {int(c.data.tags["tune_trial"]): c for c in children}
    assert parent.data.metrics["best_value"] == pytest.approx(best.value)
    assert parent.data.tags["best_trial"] == str(best.number)
    assert float(parent.data.tags["best.train.learning_rate"]) == pytest.approx(
        best.params["train.learning_rate"]
    )
    assert f"best trial: {best.number}" in out
    files = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"trials.json", "trials.csv", "optimization_history.png", "best_params.json"} <= files
    table = json.loads(
        Path(
            client.download_artifacts(parent.info.run_id, "trials.json", str(tmp_path))
        ).read_text()
    )
    assert [row[0] for row in table["data"]] == [0, 1, 2]

    champion = client.get_model_version_by_alias("tests", "champion")
    assert champion.tags["run_id"] == by_trial[best.number].info.run_id

    # Running the command again resumes the study: one more trial, under the same parent.
    assert main(["tune", str(config), "--trials", "4"]) == 0
    children = [r for r in runs(store) if r.data.tags.get("mlflow.parentRunId")]
    assert sorted(int(c.data.tags["tune_trial"]) for c in children) == [0, 1, 2, 3]
    assert [r for r in runs(store) if r.data.tags.get("tune") == "parent"][0].info.status == (
        "FINISHED"
    )


def test_running_a_finished_study_again_leaves_its_parent_finished(store, tmp_path, capsys):
    config = _config(tmp_path, trials=1)  # tracking.log_model off: nothing to register

    assert main(["tune", str(config)]) == 0
    first = capsys.readouterr().out
    (parent,) = [r for r in runs(store) if r.data.tags.get("tune") == "parent"]
    assert parent.info.status == "FINISHED"

    assert main(["tune", str(config)]) == 0  # nothing left to do: only reported
    again = capsys.readouterr().out
    assert "nothing left to run" not in first
    assert "nothing left to run: study " in again and "has its 1 trial(s)" in again
    (parent,) = [r for r in runs(store) if r.data.tags.get("tune") == "parent"]
    assert parent.info.status == "FINISHED"
    assert len(runs(store)) == 2  # the parent and its one trial, no new run

    # A parent an older version left RUNNING after its summary is ended on the next look.
    client = mlflow.MlflowClient(store)
    client.update_run(parent.info.run_id, "RUNNING")
    assert main(["tune", str(config)]) == 0
    assert client.get_run(parent.info.run_id).info.status == "FINISHED"

    # Nothing was registered, and nothing says a model was.
    assert client.search_registered_models() == []
    for out in (first, again):
        assert "models:/" not in out, out
        assert "champion: none registered under 'tests' (the best trial logged no model)" in out


@pytest.mark.parametrize(
    "stop, status, tag, reason",
    [
        (KeyboardInterrupt(), "KILLED", "killed_by", "SIGINT (Ctrl+C)"),
        (RuntimeError("boom"), "FAILED", "failure_reason", "RuntimeError: boom"),
    ],
)
def test_a_worker_stopped_by_an_interrupt_or_an_error_ends_its_parent_run(
    store, tmp_path, monkeypatch, stop, status, tag, reason
):
    from experiments.training import run as run_module

    config = _config(tmp_path, trials=1)
    real = run_module.execute

    def stopped(*args, **kwargs):
        raise stop

    monkeypatch.setattr(run_module, "execute", stopped)
    with pytest.raises(type(stop)):
        main(["tune", str(config)])
    (parent,) = [r for r in runs(store) if r.data.tags.get("tune") == "parent"]
    assert parent.info.status == status
    assert parent.data.tags[tag] == reason
    study = optuna.load_study(
        study_name="tests-config", storage=f"sqlite:///{tmp_path / 'mlruns' / 'optuna.db'}"
    )
    (trial,) = study.get_trials()
    assert trial.state == optuna.trial.TrialState.FAIL
    assert trial.user_attrs["failure"].startswith("its worker stopped: ")

    # Run again, the study goes on under the same parent, which ends FINISHED, the old
    # reason gone.
    monkeypatch.setattr(run_module, "execute", real)
    assert main(["tune", str(config), "--trials", "2"]) == 0
    parent = mlflow.MlflowClient(store).get_run(parent.info.run_id)
    assert parent.info.status == "FINISHED"
    assert tag not in parent.data.tags


def _training_trials(client, experiment: str = "tests") -> list:
    """The nested runs still RUNNING that have logged an epoch (their worker is mid-trial)."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return []
    running = client.search_runs(
        [found.experiment_id], filter_string="attributes.status = 'RUNNING'"
    )
    return [
        r
        for r in running
        if r.data.tags.get("mlflow.parentRunId")
        and client.get_metric_history(r.info.run_id, "loss")
    ]


def _until_dead(process: psutil.Process, timeout: float) -> None:
    # The helper is the command's child, not ours: once killed it stays a zombie until the
    # command reaps it, which it does only after its own trials, so psutil's wait (which
    # waits for the pid to vanish) timed out on a loaded machine. Dead is enough here.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.1)
    raise AssertionError(f"process {process.pid} still alive {timeout} s after SIGKILL")


@pytest.mark.slow
def test_a_worker_killed_mid_trial_on_a_journal_study_is_failed_and_run_again(
    store, tmp_path, capsys
):
    # Issue 43's repro, small: two workers on a journal file, one SIGKILLed mid-trial, then
    # the command again with one worker.
    config = _config(tmp_path, epochs=3, log_model=True)
    journal = tmp_path / "study.journal"
    args = ["tune", str(config), "--storage", f"journal:{journal}", "--study", "jn"]
    args += ["--trials", "3", "--seed", "1", "--heartbeat", "2", "--pruner", "none"]
    env = child_env(OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    log = tmp_path / "first.log"
    with log.open("w") as sink:
        first = subprocess.Popen(
            [sys.executable, "-m", "experiments", *args, "--workers", "2"],
            cwd=tmp_path,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
    client = mlflow.MlflowClient(store)
    processes = [psutil.Process(first.pid)]
    try:
        # Both workers mid-trial (two nested runs training), then the second one is killed.
        deadline = time.monotonic() + 300
        while len(_training_trials(client)) < 2:
            assert first.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, "no two trials training within 300 s"
            time.sleep(0.2)
        (helper,) = processes[0].children()
        processes.append(helper)
        helper.send_signal(signal.SIGKILL)
        _until_dead(helper, 30)

        assert first.wait(timeout=600) == 0, log.read_text()[-4000:]
    finally:
        for process in processes:
            if process.is_running():
                process.kill()
        psutil.wait_procs(processes, timeout=30)
    out = log.read_text()

    # Optuna: the killed trial failed and ran again once, with its parameters; all ended.
    study = optuna.load_study(
        study_name="jn",
        storage=optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(str(journal))
        ),
    )
    trials = {t.number: t for t in study.get_trials()}
    (killed,) = [n for n, t in trials.items() if t.state == optuna.trial.TrialState.FAIL]
    (retry,) = [t for t in trials.values() if t.system_attrs.get("failed_trial") == killed]
    assert retry.params == trials[killed].params
    assert len(trials) == 4  # the three asked for and the retry
    assert all(
        t.state == optuna.trial.TrialState.COMPLETE for n, t in trials.items() if n != killed
    )

    # MLflow: every run ended; the killed trial's run FAILED with the reason; no step twice.
    parents = [r for r in runs(store) if r.data.tags.get("tune") == "parent"]
    assert [p.info.status for p in parents] == ["FINISHED"]
    children = {
        int(r.data.tags["tune_trial"]): r
        for r in runs(store)
        if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id
    }
    assert sorted(children) == sorted(trials)
    assert children[killed].info.status == "FAILED"
    assert children[killed].data.tags["failure_reason"] == "worker lost (no heartbeat)"
    assert children[retry.number].data.tags["tune_retry_of"] == str(killed)
    for number, child in children.items():
        steps = metric_steps(client, child.info.run_id)
        assert all(len(s) == len(set(s)) for s in steps.values()), (number, steps)
        if number != killed:
            assert child.info.status == "FINISHED"
            assert steps["loss"] == [1, 2, 3]

    # The summary registered the best trial's model, and the command said so, from the registry.
    best = study.best_trial
    champion = client.get_model_version_by_alias("tests", "champion")
    assert champion.tags["run_id"] == children[best.number].info.run_id
    line = f"champion: models:/tests@champion (version {champion.version}, the best trial's model)"
    assert line in out, out[-4000:]
    assert f"best trial: {best.number}" in out

    # The command again, one worker: nothing left, nothing new, the parent stays FINISHED.
    assert main([*args, "--workers", "1"]) == 0
    again = capsys.readouterr().out
    assert "nothing left to run: study jn has its 3 trial(s)" in again
    assert line.replace("champion:", "champion now:", 1) in again  # without the old verdict
    assert len(runs(store)) == len(children) + 1
    assert client.get_run(parents[0].info.run_id).info.status == "FINISHED"


@pytest.mark.slow
def test_a_clearly_worse_trial_is_pruned_early(store, tmp_path):
    journal = f"journal:{tmp_path / 'study.journal'}"
    config = _config(
        tmp_path,
        epochs=2,
        pruner={"name": "median", "n_startup_trials": 1},
        space={"train.learning_rate": "float:1e-9:1e-1:log"},
    )
    # The study's first two trials, in order: a good learning rate, then a hopeless one.
    study = optuna.create_study(
        study_name="prune",
        storage=optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(journal.removeprefix("journal:"))
        ),
        direction="minimize",
    )
    study.enqueue_trial({"train.learning_rate": 0.02})
    study.enqueue_trial({"train.learning_rate": 1e-9})

    args = ["tune", str(config), "--storage", journal, "--study", "prune", "--trials", "2"]
    assert main([*args, "--metric", "val_loss"]) == 0

    client = mlflow.MlflowClient(store)
    children = {
        int(r.data.tags["tune_trial"]): r
        for r in runs(store)
        if r.data.tags.get("mlflow.parentRunId")
    }
    assert children[0].data.tags["pruned"] == "false"
    assert metric_steps(client, children[0].info.run_id)["loss"] == [1, 2]
    assert children[1].data.tags["pruned"] == "true"
    assert children[1].data.tags["pruned_at_epoch"] == "1"
    assert metric_steps(client, children[1].info.run_id)["loss"] == [1]  # stopped early
    states = [t.state for t in optuna.load_study(study_name="prune", storage=study._storage).trials]
    assert states == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED]


def test_tune_help_imports_no_framework():
    code = (
        "import sys\n"
        "from experiments.commands import main\n"
        "try:\n    main(['tune', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('HEAVY', sorted(m for m in ('tensorflow', 'mlflow', 'optuna') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert "--space KEY=SPEC" in done.stdout
    assert "HEAVY []" in done.stdout


def test_register_model_without_a_logged_model_exits_2_before_any_run(store, tmp_path, capsys):
    config = write_config(
        tmp_path,
        TINY_TASKS["reverse"],
        tracking={"log_model": False, "register_model": "reverser"},
    )
    assert main(["run", str(config)]) == 2
    assert "tracking.register_model" in capsys.readouterr().err
    assert runs(store) == []


@pytest.mark.slow
def test_a_plain_run_registers_its_model_as_a_new_version(store, tmp_path):
    config = write_config(
        tmp_path,
        {**TINY_TASKS["reverse"], "num_examples": 96},
        tracking={"register_model": "reverser", "system_metrics": False},
    )
    assert main(["run", str(config)]) == 0
    assert main(["run", str(config)]) == 0

    client = mlflow.MlflowClient(store)
    versions = {v.version: v for v in client.search_model_versions("name='reverser'")}
    assert sorted(int(v) for v in versions) == [1, 2]
    by_run = {r.info.run_id: r for r in runs(store)}
    assert {v.tags["run_id"] for v in versions.values()} == set(by_run)
    for version in versions.values():
        run = by_run[version.tags["run_id"]]
        assert run.data.tags["registered_model"] == f"models:/reverser/{version.version}"
    # Version 2 loads by its registered name and serves what its run recorded.
    run_id = versions[max(versions, key=int)].tags["run_id"]
    folder = Path(client.download_artifacts(run_id, "", str(tmp_path / "artifacts")))
    tokens = np.array(json.loads((folder / "input_example.json").read_text())["tokens"])
    model = mlflow.keras.load_model("models:/reverser/2")
    got = np.asarray(model.serve(tokens.astype("int32")))
    np.testing.assert_array_equal(got, np.load(folder / "expected_output.npy"))
