"""Callbacks that stop a run cleanly: a non-finite loss fails it, keeping the last checkpoint."""

from __future__ import annotations

import math
from pathlib import Path

import keras

from experiments.errors import NonFiniteLoss
from experiments.training import checkpoints


class NonFiniteLossGuard(keras.callbacks.Callback):
    """Fails the run as soon as the training loss is NaN or infinite.

    Checked after every batch, and placed before the checkpoint callback, so
    the diverged weights are never checkpointed: the last good checkpoint
    stays in place. The run gets the tag `failure_reason` and, through the
    exception, the status FAILED.
    """

    def __init__(self, tracker, folder: Path):
        super().__init__()
        self.tracker, self.folder = tracker, Path(folder)
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self._check(logs, f"epoch {self.epoch + 1}, batch {batch + 1}")

    def on_epoch_end(self, epoch, logs=None):
        self._check(logs, f"epoch {epoch + 1}")

    def _check(self, logs, where: str) -> None:
        value = (logs or {}).get("loss")
        if value is None:
            return
        value = float(value)
        if math.isfinite(value):
            return
        state = checkpoints.load_state(self.folder)
        kept = (
            f"the last good checkpoint (epoch {state['epoch'] + 1}) is kept in {self.folder}"
            if state
            else "no epoch finished, so there is no checkpoint"
        )
        reason = f"non-finite training loss ({value}) at {where}; {kept}"
        self.tracker.set_tags({"failure_reason": reason})
        raise NonFiniteLoss(
            f"{reason}. Lower train.learning_rate or set train.clipnorm, then start a new run."
        )
