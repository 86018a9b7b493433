"""`TrialPruning`: a Keras callback that reports each epoch's metric to an Optuna trial and
stops training when the study's pruner says the trial is hopeless."""

from __future__ import annotations

import math

import keras


class TrialPruning(keras.callbacks.Callback):
    """Report `logs[metric]` to `trial` at step `epoch + 1` (the epoch's MLflow step); when
    `trial.should_prune()`, stop `fit` after this epoch and remember the epoch in `pruned_at`.

    Training stops the way early stopping does (`stop_training`), so the run ends as any
    run ends (evaluated, logged, FINISHED); the caller tells the study the trial was pruned.
    Put it after the callbacks that add the metric to `logs`.
    """

    def __init__(self, trial, metric: str):
        super().__init__()
        self.trial, self.metric = trial, metric
        self.pruned_at: int | None = None

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.metric)
        if value is None or not math.isfinite(float(value)):
            return
        self.trial.report(float(value), epoch + 1)
        if self.trial.should_prune():
            self.pruned_at = epoch + 1
            self.model.stop_training = True
