"""The tracking benchmark: epochs of the runner's training with its MLflow logging vs without."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import keras
import mlflow

from experiments import backends, config, ready_configs
from experiments.bench import timing
from experiments.bench.cases.common import Options
from experiments.tracking import store
from experiments.tracking.tracker import Tracker
from experiments.training import callbacks as cb
from experiments.training import run
from experiments.training.batches import EpochBatches


class _Store:
    """A scratch folder (checkpoints), and MLflow pointed at the runner's store or, with
    `temporary=True`, at a throw-away SQLite store of the same kind."""

    def __init__(self, temporary: bool):
        self.temporary = temporary

    def __enter__(self):
        self.folder = tempfile.TemporaryDirectory(prefix="bench-tracking-")
        self.previous_env = os.environ.get("MLFLOW_TRACKING_URI")
        if self.temporary:
            uri = f"sqlite:///{Path(self.folder.name) / 'mlflow.db'}"
            os.environ["MLFLOW_TRACKING_URI"] = uri
        return Path(self.folder.name)

    def __exit__(self, *exc):
        if self.previous_env is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = self.previous_env
        # The runner's store (env or mlruns/), never MLflow's cwd default.
        mlflow.set_tracking_uri(store.tracking_uri())
        self.folder.cleanup()


def tracking_overhead(options: Options) -> dict:
    """Epochs of the runner's training with its MLflow logging callback vs without.

    Both sides run the runner's callbacks (`training.run.make_callbacks`: clock,
    evaluation, checkpoint); "with" adds the `RunLogger` that logs the
    epoch's metrics, attention heatmaps and sample generations to an MLflow
    run (experiment `bench-tracking-overhead`) in the runner's store, or in a
    throw-away SQLite store with `--no-mlflow`. Epochs are numbered on, so
    `heatmap_every > 1` draws heatmaps on some of the timed epochs only. A
    sample is `tracking_epochs` consecutive epochs, the logged side including
    the wait for its last images and sample table (uploaded on the artifact thread).
    `gc_pause_s`: the collector's pauses on each side, warm-up included.
    """
    s = options.sizes["tracking"]
    overrides = [
        *s["set"],
        "train.epochs=1000",
        "train.verbose=0",
        f"train.jit_compile={str(options.jit_compile).lower()}",
        "tracking.log_model=false",
        "tracking.experiment=bench-tracking-overhead",
    ]
    cfg = config.load_config(ready_configs.resolve(s["config"]), overrides)
    prepared = run.validate(cfg)
    cfg, task = prepared.cfg, prepared.task
    keras.utils.set_random_seed(cfg.train.seed)
    model = task.kind.build_model(cfg, task)
    run.compile_model(model, cfg, task)
    model(task.train.take(slice(0, 2)).inputs)

    with _Store(options.temporary_store) as folder:
        client = store.connect()
        experiment = store.experiment_id(client, cfg.tracking.experiment)
        run_id = client.create_run(experiment, run_name="tracking-overhead").info.run_id
        where = "temporary sqlite store" if options.temporary_store else store.tracking_uri()
        tracker = Tracker(client, run_id)
        batches = EpochBatches(task.train, cfg.train.batch_size, cfg.train.seed)
        with_logging = run.make_callbacks(cfg, task, tracker, folder / "checkpoints", batches, None)
        without_logging = [c for c in with_logging if not isinstance(c, cb.RunLogger)]
        if len(without_logging) == len(with_logging):
            raise RuntimeError("make_callbacks returned no RunLogger to leave out")
        epoch = [0]
        backend = backends.current()  # both sides fed as the runner feeds them
        data = backend.fit_data(batches)
        validation = backend.validation_data(task.val.inputs, task.val.y, cfg.train.batch_size)

        r = options.repeats
        span = r["tracking_epochs"]

        def epochs(callbacks):
            start = epoch[0]
            epoch[0] += span
            model.fit(
                data,
                shuffle=False,
                **validation,
                initial_epoch=start,
                epochs=start + span,
                callbacks=callbacks,
                verbose=0,
            )

        pauses = {"project": timing.GcPauses(), "peer": timing.GcPauses()}

        def with_tracking():
            with pauses["project"]:
                epochs(with_logging)
                tracker.wait()  # images upload while the next epoch trains; the last is timed

        def without_tracking():
            with pauses["peer"]:
                epochs(without_logging)

        started = time.perf_counter()
        try:
            result = timing.paired(
                with_tracking, without_tracking, r["tracking"], min(1, r["warmup"])
            )
        finally:
            tracker.close()  # the artifact thread, also when a timed epoch failed
        elapsed = time.perf_counter() - started
        tracker.end()
    return {
        **result,
        "project": f"model.fit for {span} epoch(s) with training.run.make_callbacks(...) "
        "(clock, evaluation, checkpoint, RunLogger -> MLflow), then the wait for the artifact thread",
        "peer": "the same epochs with the same callbacks except RunLogger",
        "store": where,
        "mlflow_run": None if options.temporary_store else run_id,
        "logged_per_epoch": "metrics, heatmaps every "
        f"{cfg.tracking.heatmap_every} epoch(s) ({cfg.task.num_probes} probes), "
        f"{cfg.tracking.num_samples} sample generations",
        "wall_s": elapsed,
        "gc_pause_s": {side: round(p.seconds, 3) for side, p in pauses.items()},
        "shapes": {
            "config": s["config"],
            "overrides": s["set"],
            "task": task.name,
            "train_examples": len(task.train),
            "batch_size": cfg.train.batch_size,
            "batches_per_epoch": len(batches),
            "units": cfg.model.units,
        },
    }
