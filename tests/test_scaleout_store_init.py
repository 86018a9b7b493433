"""A new local store's first use is safe under concurrency: runs started at the same moment
on a store that does not exist yet all finish (MLflow's tables are created under a lock)."""

from __future__ import annotations

import mlflow
import pytest
from experiments_helpers import TINY_TASKS, store_uri, write_config
from scaleout_helpers import child_env, cli, metric_steps

RUNS = 4
EPOCHS = 2


@pytest.mark.slow
def test_four_runs_at_once_on_a_new_sqlite_store_all_finish(tmp_path):
    uri = store_uri(tmp_path)  # nothing there yet: the first run creates it
    config = write_config(
        tmp_path,
        TINY_TASKS["reverse"],
        train={"epochs": EPOCHS},
        tracking={"log_model": False, "system_metrics": False},
    )
    env = child_env(MLFLOW_TRACKING_URI=uri, OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1")
    procs = [cli(["run", str(config)], env, tmp_path) for _ in range(RUNS)]
    try:
        outputs = [p.communicate(timeout=600)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-3000:]

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("tests")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == RUNS
    for run in runs:
        assert run.info.status == "FINISHED"
        steps = metric_steps(client, run.info.run_id)
        assert steps["loss"] == list(range(1, EPOCHS + 1))
        assert steps["val_loss"] == list(range(1, EPOCHS + 1))
