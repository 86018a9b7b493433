"""`tune` on several workers sharing one study: a real PostgreSQL server as the Optuna
storage and as the backend store of a real `mlflow server`; one worker is SIGKILLed
mid-trial, and the study still completes, its trial failed and retried once."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from pathlib import Path

import mlflow
import mlflow.keras
import numpy as np
import optuna
import pytest
from experiments_helpers import TINY_TASKS, write_config
from postgres_helpers import PostgresServer
from scaleout_helpers import MlflowServer, child_env, cli

TRIALS = 4
STUDY = "two-workers"
STARTED = re.compile(r"tune: trial (\d+): train\.")


class Output:
    """A child's merged output, read on a thread (so its pipe never fills)."""

    def __init__(self, proc):
        self.proc, self.lines = proc, []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def started_trial(self) -> int | None:
        found = [STARTED.search(line) for line in self.lines]
        numbers = [int(m.group(1)) for m in found if m]
        return numbers[-1] if numbers else None


def _until(predicate, seconds: float, what: str, outputs=()):
    deadline = time.monotonic() + seconds
    while not predicate():
        for output in outputs:
            if output.proc.poll() is not None:
                output.thread.join(timeout=10)
                raise AssertionError(
                    f"a worker exited ({output.proc.returncode}) before {what}:\n"
                    + output.text()[-4000:]
                )
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.2)


@pytest.mark.slow
def test_two_workers_on_postgres_and_an_mlflow_server_survive_a_killed_worker(tmp_path):
    previous_uri = mlflow.get_tracking_uri()
    postgres = PostgresServer().start(databases=("studies", "mlflow"))
    server = workers = None
    try:
        server = MlflowServer(tmp_path / "server", backend=postgres.url("mlflow")).start()
        config = write_config(
            tmp_path,
            {**TINY_TASKS["reverse"], "num_examples": 96},
            train={"epochs": 3},
            tracking={"experiment": "tuned", "system_metrics": False},
            tune={"space": {"train.learning_rate": "float:1e-3:5e-2:log"}},
        )
        env = child_env(
            MLFLOW_TRACKING_URI=server.uri,
            OMP_NUM_THREADS="1",
            TF_NUM_INTRAOP_THREADS="1",
            TF_NUM_INTEROP_THREADS="1",
        )
        args = ["tune", str(config), "--storage", postgres.url("studies"), "--study", STUDY]
        args += ["--trials", str(TRIALS), "--heartbeat", "2", "--pruner", "none"]
        workers = [cli(args, env, tmp_path) for _ in range(2)]  # started together
        outputs = [Output(w) for w in workers]
        client = mlflow.MlflowClient(server.uri)

        # Kill worker 0 while its trial's run is training (its nested run exists, RUNNING).
        def training() -> bool:
            number = outputs[0].started_trial()
            if number is None:
                return False
            experiment = client.get_experiment_by_name("tuned")
            found = client.search_runs(
                [experiment.experiment_id],
                filter_string=f"tags.tune_trial = '{number}' and attributes.status = 'RUNNING'",
            )
            return bool(found) and bool(client.get_metric_history(found[0].info.run_id, "loss"))

        _until(training, 300, "a training trial on worker 0", outputs)
        killed = outputs[0].started_trial()
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(timeout=30)

        assert workers[1].wait(timeout=600) == 0, outputs[1].text()[-4000:]
        outputs[1].thread.join(timeout=30)

        study = optuna.load_study(study_name=STUDY, storage=postgres.url("studies"))
        trials = study.get_trials()
        by_number = {t.number: t for t in trials}
        assert by_number[killed].state == optuna.trial.TrialState.FAIL
        retries = [t for t in trials if t.system_attrs.get("failed_trial") == killed]
        assert len(retries) == 1  # retried, once
        assert retries[0].state == optuna.trial.TrialState.COMPLETE
        assert retries[0].params == by_number[killed].params
        assert len(trials) == TRIALS + 1  # as asked, plus the retry of the killed one
        assert all(
            t.state == optuna.trial.TrialState.COMPLETE for t in trials if t.number != killed
        )

        experiment = client.get_experiment_by_name("tuned")
        every = client.search_runs([experiment.experiment_id])
        parents = [r for r in every if r.data.tags.get("tune") == "parent"]
        assert len(parents) == 1
        parent = parents[0]
        assert parent.info.status == "FINISHED"
        children = [r for r in every if r.data.tags.get("mlflow.parentRunId")]
        assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
        numbers = sorted(int(c.data.tags["tune_trial"]) for c in children)
        assert numbers == sorted(by_number)  # every trial exactly once
        runs = {int(c.data.tags["tune_trial"]): c for c in children}
        assert runs[killed].info.status == "FAILED"
        assert runs[killed].data.tags["failure_reason"] == "worker lost (no heartbeat)"
        assert runs[retries[0].number].data.tags["tune_retry_of"] == str(killed)
        for number, run in runs.items():
            if number == killed:
                continue
            assert run.info.status == "FINISHED"
            for key in ("loss", "val_loss", "val_exact_match_greedy"):
                steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
                assert steps == [1, 2, 3], (number, key, steps)  # no step twice

        best = study.best_trial
        assert parent.data.metrics["best_value"] == pytest.approx(best.value)
        champion = client.get_model_version_by_alias("tuned", "champion")
        best_run = runs[best.number].info.run_id
        assert champion.tags["run_id"] == best_run

        # The champion loads by its alias and predicts what its run recorded.
        mlflow.set_tracking_uri(server.uri)
        folder = Path(mlflow.artifacts.download_artifacts(run_id=best_run, dst_path=str(tmp_path)))
        tokens = np.array(json.loads((folder / "input_example.json").read_text())["tokens"])
        expected = np.load(folder / "expected_output.npy")
        model = mlflow.keras.load_model("models:/tuned@champion")
        got = np.asarray(model.serve(tokens.astype("int32")))
        np.testing.assert_array_equal(got, expected)
    finally:
        for worker in workers or []:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
        if server is not None:
            server.stop()
        postgres.stop()
        mlflow.set_tracking_uri(previous_uri)
