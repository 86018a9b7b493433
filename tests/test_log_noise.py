"""A command's terminal holds the epochs' progress, the result and warnings that mean
something to the user: no MLflow artifact progress bars, no MLflow dataset-source warning,
no system-metrics or input-example INFO lines, no TensorFlow retracing warning from the
models a sweep trains one after another. Each is dropped at its source; other warnings of
the same loggers pass."""

from __future__ import annotations

import logging
import os

import pytest
from experiments_helpers import TINY_TASKS, migrated_store, write_config, write_text_dataset
from scaleout_helpers import child_env, cli_done

NOISE = {
    "progress bar": "Downloading artifacts",
    "dataset source warning": "dataset source can be interpreted in multiple ways",
    "system-metrics INFO": "system_metrics_monitor",
    "input example INFO": "Validating input example against model signature",
    "retracing warning": "triggered tf.function retracing",
}


class _Kept(logging.Handler):
    """The records that reach a logger's handlers."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_quiet_drops_only_the_named_records(monkeypatch):
    from experiments import library_logs

    monkeypatch.delenv(library_logs.PROGRESS_BAR_VARIABLE, raising=False)
    tf_logger = logging.getLogger("tensorflow")
    monitor = logging.getLogger("mlflow.system_metrics.system_metrics_monitor")
    kept = _Kept()
    for logger in (tf_logger, monitor):
        monkeypatch.setattr(logger, "level", logging.INFO)
        logger.addHandler(kept)
    try:
        with library_logs.quiet():
            assert os.environ[library_logs.PROGRESS_BAR_VARIABLE] == "false"
            tf_logger.warning("5 out of the last 5 calls to <f> triggered tf.function retracing.")
            tf_logger.warning("a TensorFlow warning that means something")
            monitor.info("Started monitoring system metrics.")
            monitor.warning("Failed to log system metrics: disk gone")
        assert library_logs.PROGRESS_BAR_VARIABLE not in os.environ  # restored
        monitor.info("after the command")  # the filters go with the block
    finally:
        for logger in (tf_logger, monitor):
            logger.removeHandler(kept)
    assert kept.messages == [
        "a TensorFlow warning that means something",
        "Failed to log system metrics: disk gone",
        "after the command",
    ]


def test_a_user_setting_of_the_progress_bar_is_kept(monkeypatch):
    from experiments import library_logs

    monkeypatch.setenv(library_logs.PROGRESS_BAR_VARIABLE, "true")
    with library_logs.quiet():
        assert os.environ[library_logs.PROGRESS_BAR_VARIABLE] == "true"
    assert os.environ[library_logs.PROGRESS_BAR_VARIABLE] == "true"


@pytest.mark.slow
def test_a_sweep_on_a_text_file_prints_none_of_the_noise(tmp_path):
    # Every source at once: a task read from a file (the dataset warning), logged models (their
    # input example is validated, which downloads artifacts), system metrics, three models
    # compiled one after another in one process (retracing), the heatmaps a sweep copies.
    data = write_text_dataset(tmp_path, rows=96)
    config = write_config(
        tmp_path,
        {**TINY_TASKS["textcls"], "path": str(data)},
        train={"run_eagerly": False},
        tracking={"system_metrics": True, "system_metrics_interval": 0.5},
    )
    done = cli_done(
        ["sweep", str(config), "--grid", "model.attention.score=tanh_dot,additive,general"],
        child_env(MLFLOW_TRACKING_URI=migrated_store(tmp_path)),
        tmp_path,
    )
    both = done.stdout + done.stderr
    found = {what: text for what, text in NOISE.items() if text in both}
    assert found == {}, both[-4000:]
    assert "sweep results (test split" in done.stdout
