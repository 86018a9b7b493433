"""`TrialProgress`: each epoch of a trial as one line labelled with the trial's number.

A study's workers train side by side on one terminal; Keras's own epoch lines carry no
trial number, so a trial trains with Keras's verbose output off and this callback prints
`tune: trial 3, epoch 2/5: loss 0.412  val_loss 0.389  val_exact_match_greedy 0.520 (4.1 s)`
instead (the loss, the validation loss and the study's metric), on stderr with the study's
other progress lines.
"""

from __future__ import annotations

import sys

import keras

from experiments.tracking.results import number


class TrialProgress(keras.callbacks.Callback):
    """Print trial `number`'s epoch `e/epochs` line after each epoch (see the module doc)."""

    def __init__(self, number: int, epochs: int, metric: str):
        super().__init__()
        self.number, self.epochs, self.metric = number, epochs, metric

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        shown = dict.fromkeys(("loss", "val_loss", self.metric))
        values = "  ".join(f"{k} {number(_float(logs.get(k)))}" for k in shown if k in logs)
        seconds = logs.get("epoch_seconds")
        took = f" ({float(seconds):.1f} s)" if seconds is not None else ""
        print(
            f"tune: trial {self.number}, epoch {epoch + 1}/{self.epochs}: {values}{took}",
            file=sys.stderr,
            flush=True,
        )


def _float(value):
    return None if value is None else float(value)
