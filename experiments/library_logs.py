"""Keeps the Python log lines of MLflow and TensorFlow that a user cannot act on off the
terminal while a command runs, each at its source; every other line, warnings included,
passes.

- MLflow's artifact progress bars (`Downloading artifacts: 100%|...|`, drawn when a logged
  model is validated or a sweep copies heatmaps): off through MLflow's documented
  `MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR` (unless the user set it).
- MLflow's system-metrics monitor INFO lines (started, stopped, no GPU): a filter on its
  logger drops its INFO records (its warnings pass).
- MLflow's `Validating input example against model signature` INFO line (model logging).
- TensorFlow's `triggered tf.function retracing` warning: TensorFlow counts the traces of
  every function made from the same code, so each new model a sweep or a study trains in
  one process (a new `predict` function, a new decoding loop) counts as a retrace of the
  previous model's.

MLflow's `dataset source can be interpreted in multiple ways` warning (MLflow registers its
local-file dataset source twice) is caught where the runner names that source
(`training.datasets`).
"""

from __future__ import annotations

import contextlib
import logging
import os

PROGRESS_BAR_VARIABLE = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


class DropRecords(logging.Filter):
    """Drops a logger's records at `level` or below whose message contains `text` ("":
    every one of them)."""

    def __init__(self, level: int, text: str = ""):
        super().__init__()
        self.level, self.text = level, text

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > self.level:
            return True
        return self.text not in record.getMessage()


# logger name -> what is dropped from it (a filter sits on the logger that makes the records;
# filters survive MLflow's logging set-up, which resets its loggers' levels).
DROPPED = {
    "mlflow.system_metrics.system_metrics_monitor": DropRecords(logging.INFO),
    "mlflow.pyfunc": DropRecords(logging.INFO, "Validating input example against model signature"),
    "tensorflow": DropRecords(logging.WARNING, "triggered tf.function retracing"),
}


@contextlib.contextmanager
def quiet():
    """Within the block, the lines of the module doc stay off the terminal."""
    set_here = PROGRESS_BAR_VARIABLE not in os.environ
    if set_here:
        os.environ[PROGRESS_BAR_VARIABLE] = "false"
    for name, dropped in DROPPED.items():
        logging.getLogger(name).addFilter(dropped)
    try:
        yield
    finally:
        for name, dropped in DROPPED.items():
            logging.getLogger(name).removeFilter(dropped)
        if set_here:
            os.environ.pop(PROGRESS_BAR_VARIABLE, None)
