"""Keras callbacks doing the per-epoch work of a run.

Order matters and is fixed by `run.make_callbacks`: the clock and the
evaluation add metrics to `logs` first, early stopping reads them, then the
checkpoint is written, and only then are the metrics logged to MLflow.
"""

from __future__ import annotations

import functools
import random
import time
from pathlib import Path

import keras
import numpy as np

from experiments.training import checkpoints, supervision
from experiments.training.batches import EpochBatches
from experiments.training.memory import peak_memory_mb
from keras_attn_rnn import plotting


class EpochClock(keras.callbacks.Callback):
    """Seeds each epoch and adds `epoch_seconds`, `tokens_per_second` and `peak_memory_mb`
    (the process's peak resident memory so far) to the logs.

    Each epoch reseeds Python's and NumPy's global generators only. TensorFlow's
    and Keras's global seeds are set once, when the run starts: Keras layers draw
    their random numbers from their own seed generators, whose states the
    checkpoint carries (`rng_state`), and `tf.random.set_seed` (what
    `keras.utils.set_random_seed` calls) clears TensorFlow's kernel caches, so
    every compiled function was instantiated again after it: on `demo`, +0.2 s
    for the next probe forward and +0.3 s for the next sample generation, every epoch.
    """

    def __init__(self, batches: EpochBatches, seed: int, tokens_per_epoch: int):
        super().__init__()
        self.batches, self.seed, self.tokens_per_epoch = batches, seed, tokens_per_epoch
        self.started = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self.batches.epoch = epoch
        random.seed(self.seed + epoch)
        np.random.seed(self.seed + epoch)
        self.started = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self.started
        logs["epoch_seconds"] = seconds
        logs["tokens_per_second"] = self.tokens_per_epoch / max(seconds, 1e-9)
        logs["peak_memory_mb"] = peak_memory_mb()


class EvalMetrics(keras.callbacks.Callback):
    """Names each epoch's metrics by their split: the compiled metrics `fit` measures on the
    training batches become `train_<name>`, and the task metrics on the validation subset
    `split` are added as `val_<name>`, except where `fit` has measured that name on the whole
    validation split (`val_accuracy`): a subset's value never replaces a full split's.
    """

    def __init__(self, task, split):
        super().__init__()
        self.task, self.split = task, split

    def on_epoch_end(self, epoch, logs=None):
        for name in self.task.kind.fit_metrics:
            if name in logs:
                logs[f"train_{name}"] = logs.pop(name)
        model = supervision.task_model(self.model)
        for name, value in self.task.kind.evaluate(model, self.task, self.split).items():
            logs.setdefault(f"val_{name}", value)


class ResumableEarlyStopping(keras.callbacks.EarlyStopping):
    """EarlyStopping whose counters, best epoch and stop decision survive a resume.

    The best epoch's weights are kept by `Checkpoint` (not in memory, as
    `restore_best_weights` would), and the run restores them once training ends.
    """

    def __init__(self, restored: dict | None = None, **kwargs):
        super().__init__(**kwargs)
        self.restored = restored

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        if self.restored:
            self.wait = self.restored["wait"]
            self.best = self.restored["best"]
            self.best_epoch = self.restored["best_epoch"]

    def snapshot(self) -> dict:
        best = None if self.best is None else float(self.best)
        return {
            "wait": int(self.wait),
            "best": best,
            "best_epoch": int(self.best_epoch),
            "stopped": bool(self.stopped_epoch > 0),  # Keras stops after epoch 0 at the earliest
        }


class Checkpoint(keras.callbacks.Callback):
    """Writes model + optimizer + run state after every epoch (see `checkpoints`), and with
    early stopping the weights of an epoch that is the best so far."""

    def __init__(
        self,
        folder: Path,
        early_stopping: ResumableEarlyStopping | None = None,
        best_sha256: str | None = None,
    ):
        super().__init__()
        self.folder, self.early_stopping = folder, early_stopping
        self.best_sha256 = best_sha256  # of the best epoch's weights (from a resumed state)

    def on_epoch_end(self, epoch, logs=None):
        state = {"logs": {k: float(v) for k, v in logs.items()}}
        if self.early_stopping is not None:
            state["early_stopping"] = self.early_stopping.snapshot()
            if self.early_stopping.best_epoch == epoch:
                self.best_sha256 = checkpoints.save_best(self.folder, self.model, epoch)
            state["best_sha256"] = self.best_sha256
        checkpoints.save(self.folder, self.model, epoch, state)
        if self.early_stopping is not None:
            checkpoints.prune_best(self.folder, self.early_stopping.best_epoch)


# The experiment's Attention view (`tracking.image_view`) follows the newest images at most this
# often, and once more when training ends: saving it reads the experiment, counts its runs with
# images and writes its tag (~40 ms on the artifact thread; on every epoch of the bench's
# `tracking_overhead` case, ~2 % of an epoch).
VIEW_EVERY_SECONDS = 30.0


class RunLogger(keras.callbacks.Callback):
    """Logs each epoch's metrics (step = 1-based epoch), heatmaps and sample generations.

    A new run's attention images also get step 0, the untrained model: the UI's
    step slider starts at 0, and the alignment is seen forming from there. The
    experiment's Attention view is saved with a run's first images, then at most every
    `VIEW_EVERY_SECONDS` and when training ends, on the newest images' step.
    """

    def __init__(
        self, tracker, task, gen_cfg, heatmap_every: int, num_samples: int, clock=time.monotonic
    ):
        super().__init__()
        self.tracker, self.task, self.gen_cfg = tracker, task, gen_cfg
        self.heatmap_every, self.num_samples = heatmap_every, num_samples
        self.clock = clock
        self.view_saved_at: float | None = None  # when the view was last saved (`clock`)
        self.view_pending: tuple[list[str], int] | None = None  # newer images: keys, step

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 0:
            self.attention_images(supervision.task_model(self.model), 0)

    def on_epoch_end(self, epoch, logs=None):
        step = epoch + 1
        model = supervision.task_model(self.model)
        self.tracker.wait()  # the last epoch's heatmaps: normally done, errors surface here
        self.tracker.log_metrics({k: float(v) for k, v in logs.items()}, step)
        if step % self.heatmap_every == 0:
            self.attention_images(model, step)
        rows = self.task.kind.sample_rows(model, self.task, self.gen_cfg, self.num_samples)
        if rows:  # uploaded on the artifact thread, like the images
            log = functools.partial(self.tracker.log_table, listed=False)
            self.tracker.submit(log, rows, f"samples/epoch_{step:03d}.json")

    def on_train_end(self, logs=None):
        if self.view_pending is not None:
            self.tracker.submit(self.tracker.save_image_view, *self.view_pending)
            self.view_pending = None

    def attention_images(self, model, step: int) -> None:
        """The probes' images at `step`, and the view on them when it is due."""
        keys = log_attention_images(self.tracker, model, self.task, step)
        if not keys:
            return
        now = self.clock()
        if self.view_saved_at is not None and now - self.view_saved_at < VIEW_EVERY_SECONDS:
            self.view_pending = (keys, step)
            return
        # after the images on the artifact thread: the view is saved once they are there
        self.tracker.submit(self.tracker.save_image_view, keys, step)
        self.view_saved_at, self.view_pending = now, None


def image_key(probe: str) -> str:
    """The stepped-image key of a probe (MLflow keys: `[A-Za-z0-9_.-]`, no `/`)."""
    return f"attention_{probe}"


def log_attention_images(tracker, model, task, step: int) -> list[str]:
    """Every probe's attention at this epoch as one step of its stepped image (`attention_probe_0`):
    the UI's image charts show a slider over the epochs. Rendered from the array with the tokens
    drawn beside it (Pillow, no figure); the upload runs on the tracker's artifact thread.
    Returns the images' keys."""
    heatmaps = task.kind.probe_heatmaps(model, task, step)
    images = {
        image_key(name): plotting.attention_image(
            kwargs["weights"],
            source_tokens=kwargs["source_tokens"],
            target_tokens=kwargs["target_tokens"],
        )
        for name, kwargs in heatmaps
    }
    tracker.submit(_log_images, tracker, images, step)
    return list(images)


def _log_images(tracker, images: dict, step: int) -> None:
    for key, image in images.items():
        tracker.log_image(image, key, step)


def log_heatmaps(tracker, model, task, folder: str, epoch: int | None = None) -> None:
    """The fully labelled heatmap of every probe (tokens on both axes, source and target in the
    title, the epoch), logged under `folder`. Plotting and uploading run on the artifact thread."""
    heatmaps = task.kind.probe_heatmaps(model, task, epoch)
    tracker.submit(_render_and_log, tracker, folder, heatmaps, task.kind.heatmap_rows)


def _render_and_log(tracker, folder: str, heatmaps, rows: str = "query") -> None:
    for name, kwargs in heatmaps:
        tracker.log_figure(labelled_heatmap(kwargs, rows), f"{folder}/{name}.png")


def labelled_heatmap(kwargs: dict, rows: str):
    """`plotting.plot_attention(**kwargs)` with its y-axis named: `rows` (what a row is, the
    kind's `heatmap_rows`), or for one long row drawn as lines of text, where each line
    starts."""
    figure = plotting.plot_attention(**kwargs)
    wrapped = len(kwargs["weights"]) == 1 and len(kwargs["source_tokens"]) > plotting.WRAP
    figure.axes[0].set_ylabel("position of the line's first token" if wrapped else rows)
    return figure
