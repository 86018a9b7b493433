"""One tracked run: seed, data, model, a single `fit`, evaluation and logging.

`validate` makes every check of a config, in one stage, before MLflow, the
file system or a strategy is touched; `execute` then makes the strategy,
creates or reopens the run and trains. What depends on the kind of task
(model, loss, metrics, artifacts) is asked of `task.kind`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import keras
import mlflow
import numpy as np

from experiments import _keras_compat, backends, interrupts
from experiments import config as config_lib
from experiments.config import ExperimentConfig
from experiments.data import length_buckets
from experiments.data.stored_split import StoredSplit
from experiments.data.task import Task
from experiments.errors import NonFiniteLoss, Terminated, exit_for, invalid_config
from experiments.tasks import build_task
from experiments.tracking import model_logging, registry, resilient, run_folder, run_lock, store
from experiments.tracking.tracker import VOCAB_ARTIFACT
from experiments.training import callbacks as cb
from experiments.training import (
    checkpoints,
    datasets,
    distribute,
    guards,
    memory,
    notices,
    supervision,
)
from experiments.training.batches import epoch_batches

# Logged every epoch whatever the task: by fit, and by `EpochClock`.
RUN_METRICS = frozenset(
    {"loss", "val_loss", "epoch_seconds", "tokens_per_second", "peak_memory_mb"}
)
# `train.mixed_precision` -> Keras dtype policy.
MIXED_POLICIES = {True: "mixed_float16", "float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}
# Longest `failure_reason` tag (MLflow takes tag values of up to 8000 characters).
MAX_REASON = 4000


@dataclass
class Prepared:
    """A validated config with its task data, ready to train (what `validate` returns)."""

    cfg: ExperimentConfig
    task: Task


def validate(cfg: ExperimentConfig | dict) -> Prepared:
    """Every check of a run's config, in one order whatever `train.distribute` is, before
    any run is created, any file written or any strategy made.

    In order: the schema (when given a mapping), the distribute setting against this
    environment (TF_CONFIG, the global batch over the replicas), the task's data, the
    defaults and checks of the task's kind (and the task as the model trains on it:
    `TaskKind.prepare`), the losses the task can take, the model's own
    argument checks (a trial build that starts no backend runtime: a multi-worker
    strategy must come before TensorFlow's first op), and what depends on the metrics
    the task logs. Every failure is a `ConfigError` naming the key.
    """
    if not isinstance(cfg, ExperimentConfig):
        cfg = config_lib.validate(cfg)
    distribute.check(cfg)
    distribute.check_batch(distribute.planned_replicas(cfg.train.distribute), cfg.train.batch_size)
    task = build_task(cfg.task)
    kind = task.kind
    cfg = kind.resolve(cfg, task)
    kind.check(cfg)
    task = kind.prepare(cfg, task)
    if cfg.train.alignment_loss_weight and task.train.alignment is None:
        raise invalid_config(
            "train.alignment_loss_weight",
            cfg.train.alignment_loss_weight,
            f"0 for task {task.name!r}, which has no ground-truth alignment (only a task "
            "that generates its data can know one)",
        )
    if cfg.train.batch_tokens and not isinstance(task.train, StoredSplit):
        raise invalid_config(
            "train.batch_tokens",
            cfg.train.batch_tokens,
            f"unset for task {task.name!r}, whose training rows are generated in memory (a "
            "token budget batches the rows a task read from a file by length: pairs, "
            "textcls, lm); use "
            "train.batch_size",
        )
    _check_model(cfg, task)
    known = epoch_metric_names(task)
    es = cfg.train.early_stopping
    if es and es.monitor not in known:
        raise invalid_config(
            "train.early_stopping.monitor",
            es.monitor,
            f"a metric this task logs, one of {', '.join(sorted(known))}",
        )
    directed = {"loss", *kind.fit_metrics}  # Keras knows which way these go, for mode 'auto'
    if es and es.mode == "auto" and es.monitor.removeprefix("val_") not in directed:
        raise invalid_config(
            "train.early_stopping.mode",
            "auto",
            f"'max' or 'min' with monitor {es.monitor!r} (whether it should rise or fall "
            "is known for loss, val_loss and val_<compiled metric> only)",
        )
    return Prepared(cfg, task)


def _check_model(cfg: ExperimentConfig, task: Task) -> None:
    """Build the model once, detached from the backend's runtime, for the checks its
    constructors make (e.g. a mechanism the decoder cannot take); the model is dropped."""
    try:
        with _keras_compat.detached_construction():
            task.kind.build_model(cfg, task)
    except ValueError as err:  # the library's words, which end with `Received: ...`
        raise invalid_config("model", task.kind.model_type, f"arguments it takes: {err}") from None


def epoch_metric_names(task: Task) -> set[str]:
    """Names of the metrics logged each epoch for this task."""
    return set(RUN_METRICS) | task.kind.epoch_metric_names(task)


def execute(
    prepared: Prepared,
    *,
    resume_run_id: str | None = None,
    parent_run_id: str | None = None,
    checkpoint_folder: Path | None = None,
    callbacks: tuple = (),
) -> str:
    """Train and log one run (new, nested under `parent_run_id`, or resumed); return its id.

    A resumed run continues from the checkpoint in `checkpoint_folder`. `callbacks` are
    Keras callbacks `fit` runs after the runner's own (e.g. `tune`'s trial pruning).
    """
    cfg, task = prepared.cfg, prepared.task
    strategy = distribute.make_strategy(cfg.train.distribute)  # before TensorFlow's first op
    train = functools.partial(_train, strategy=strategy, extra_callbacks=tuple(callbacks))
    if not distribute.is_chief(cfg.train.distribute):
        return distribute.run_worker(prepared, train)  # trains, logs and saves nothing
    client = store.connect()
    if cfg.tracking.system_metrics:
        mlflow.set_system_metrics_sampling_interval(cfg.tracking.system_metrics_interval)
        mlflow.set_system_metrics_samples_before_logging(1)
    if resume_run_id is None:
        run = mlflow.start_run(
            experiment_id=store.experiment_id(client, cfg.tracking.experiment),
            run_name=cfg.tracking.run_name,
            parent_run_id=parent_run_id,
            nested=parent_run_id is not None,
            log_system_metrics=cfg.tracking.system_metrics,
        )
        run_id = run.info.run_id
        folder = Path(checkpoint_folder or store.checkpoint_root(cfg) / run_id).absolute()
        try:
            lock = _own(folder, run_id)
        except BaseException as err:
            if isinstance(err, Exception):
                with contextlib.suppress(Exception):  # the error to report is `err`
                    client.set_tag(run_id, "failure_reason", _failure_text(err))
            mlflow.end_run("FAILED")
            raise
    else:
        run_id = resume_run_id
        folder = Path(checkpoint_folder or store.checkpoint_root(cfg) / run_id).absolute()
        lock = _own(folder, run_id)  # before the run is reopened: another process may own it
        try:
            mlflow.start_run(
                run_id=resume_run_id,
                nested=mlflow.active_run() is not None,
                log_system_metrics=cfg.tracking.system_metrics,
            )
        except BaseException:
            lock.release()
            raise
    try:
        _execute(cfg, task, train, client, run_id, folder, resume_run_id)
        if not cfg.train.keep_checkpoints:
            _discard(folder, run_id)
        return run_id
    finally:
        lock.release()


def _discard(folder: Path, run_id: str) -> None:
    """Delete the finished run's checkpoint folder (`train.keep_checkpoints: false`), unless
    something in it is still to be uploaded; a folder that cannot be deleted is a warning."""
    try:
        kept = run_folder.discard(folder, run_id)
    except OSError as err:
        kept = f"it could not be deleted ({err})"
    if kept is not None:
        print(f"checkpoints of run {run_id} kept in {folder}: {kept}", file=sys.stderr)


def _own(folder: Path, run_id: str) -> run_lock.RunLock:
    """Mark `folder` as run `run_id`'s and lock it for this process (see `run_lock`)."""
    run_folder.claim(folder, run_id)
    return run_lock.acquire(folder, run_id, "train it")


def _execute(cfg, task, train, client, run_id: str, folder: Path, resume_run_id) -> str:
    tracker = resilient.ResilientTracker(client, run_id, folder)  # retries, then spools
    policy = keras.config.dtype_policy()
    status = "FAILED"
    try:
        if resume_run_id is None:
            _log_start(tracker, cfg, task, folder)
        train(cfg, task, tracker, folder)
        status = "FINISHED"
    except KeyboardInterrupt as err:
        status = "KILLED"
        _tag_killed(tracker, run_id, err)
        raise
    except NonFiniteLoss:
        raise  # the guard has tagged the run
    except Exception as err:
        _tag_failure(tracker, run_id, err)
        raise
    finally:
        keras.config.set_dtype_policy(policy)
        with interrupts.deferred():  # a SIGTERM now waits until the run has ended
            resilient.end_run(tracker, status)  # uploads the spool, stops the artifact thread
    return run_id


def _failure_text(err: Exception) -> str:
    """What a run's `failure_reason` tag says of `err`: the runner's own message, or the type
    and text of an unexpected error; at most `MAX_REASON` characters."""
    reason = str(err) if exit_for(err) else f"{type(err).__name__}: {err}"
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 3] + "..."


def _tag_failure(tracker, run_id: str, err: Exception) -> None:
    """The run's `failure_reason` tag (spooled when the server is away; never raises)."""
    try:
        tracker.set_tags({"failure_reason": _failure_text(err)})
    except Exception as failure:  # noqa: BLE001 - the run must still end FAILED
        print(f"warning: could not tag run {run_id}: {failure!r}", file=sys.stderr)


def _tag_killed(tracker, run_id: str, err: KeyboardInterrupt) -> None:
    """Say on the run what stopped it and how to continue (the checkpoint is kept)."""
    how = "SIGTERM" if isinstance(err, Terminated) else "SIGINT (Ctrl+C)"
    try:
        tracker.set_tags(
            {"killed_by": how, "resume_with": f"python -m experiments resume {run_id}"}
        )
    except Exception as failure:  # noqa: BLE001 - the run must still end KILLED
        print(f"warning: could not tag run {run_id} as killed: {failure!r}", file=sys.stderr)


def _log_start(tracker, cfg, task, folder: Path) -> None:
    params = config_lib.flatten(config_lib.to_dict(cfg))  # those the run's model reads:
    params = {k: v for k, v in params.items() if task.kind.applies(k, cfg)}
    tracker.log_params({**params, "val_eval_rows": _val_rows(cfg, task)})
    tracker.set_tags(
        {
            "task": task.name,
            "task_kind": task.kind.name,
            "model": task.kind.model_type,
            "score": cfg.model.attention.score,
            "checkpoint_dir": str(folder),
            **store.environment_tags(),
            **cfg.tracking.tags,
        }
    )
    tracker.log_config(cfg)
    tracker.log_dict(task.vocabularies(), VOCAB_ARTIFACT)
    tracker.log_inputs(datasets.dataset_inputs(cfg, task))
    tracker.log_metrics({"duplicate_rows": task.duplicate_rows, **task.data_counts}, 0)
    if task.duplicate_rows:  # said once per process: a sweep's points, a study's trials
        notices.once(
            f"{task.name}: {task.duplicate_rows} rows repeat an earlier row's input; "
            "all copies of an input are in one split, so no validation or test input "
            "is a training input"
        )
    for key, cut in task.data_counts.items():  # truncated_sources, truncated_texts, ...
        if key.startswith("truncated_") and cut:
            what = key.removeprefix("truncated_")
            length = "max_length" if what == "texts" else f"max_{what[:-1]}_length"
            notices.once(
                f"{task.name}: {cut} {what} are longer than {task.data_counts.get(length)} "
                f"tokens and were cut there (task.{length} sets it)"
            )


def _val_rows(cfg, task) -> int:
    """How many validation rows the per-epoch task metrics are measured on."""
    return min(cfg.train.eval_examples, len(task.val))


def compile_model(model, cfg, task) -> None:
    """Optimizer (with its learning-rate schedule), loss, metrics, jit/eager, as configured."""
    learning_rate = cfg.train.learning_rate
    if cfg.train.lr_schedule == "cosine":
        batches = epoch_batches(
            task.train, cfg.train.batch_size, cfg.train.seed, **feed_options(cfg)
        )
        steps = cfg.train.epochs * len(batches)  # the steps fit will take
        learning_rate = keras.optimizers.schedules.CosineDecay(learning_rate, steps)
    kwargs = {"learning_rate": learning_rate}
    if cfg.train.clipnorm:
        kwargs["clipnorm"] = cfg.train.clipnorm
    model.compile(
        optimizer=cfg.train.build_optimizer(**kwargs),
        loss=task.kind.loss(supervision.task_model(model)),
        metrics=list(task.kind.fit_metrics) or None,
        jit_compile=backends.current().jit_compile(cfg.train.jit_compile),
        run_eagerly=cfg.train.run_eagerly,
    )


def _train(cfg, task, tracker, folder: Path, *, strategy, extra_callbacks=()) -> None:
    memory.reset_peak_memory()  # the run's own peak, not an earlier sweep point's
    keras.utils.set_random_seed(cfg.train.seed)
    if cfg.train.mixed_precision:
        keras.config.set_dtype_policy(MIXED_POLICIES[cfg.train.mixed_precision])
    with backends.current().training_scope(strategy):  # JAX's data_parallel shards fit's batches
        _train_in_scope(cfg, task, tracker, folder, strategy, extra_callbacks)


def _train_in_scope(cfg, task, tracker, folder: Path, strategy, extra_callbacks) -> None:
    seed = cfg.train.seed
    with strategy.scope() if strategy else contextlib.nullcontext():
        model = task.kind.build_model(cfg, task)
        trained = supervision.wrap(model, cfg)  # model, or model + attention losses
        compile_model(trained, cfg, task)
        trained(supervision.fit_inputs(trained, task.train.take(slice(0, 2))))  # build weights
    tracker.log_metrics_once({"model_parameters": model.count_params()}, 0)  # resumed: once
    state = checkpoints.load_state(folder)
    initial_epoch, stopped = 0, False
    if state is not None:
        checkpoints.restore(folder, trained, state, tracker.run_id)
        initial_epoch = state["epoch"] + 1  # also the 1-based step of the checkpointed epoch
        if initial_epoch not in tracker.logged_steps("loss"):
            # Interrupted between checkpoint and logging: log that epoch now, once.
            tracker.log_metrics(state["logs"], initial_epoch)
        stopped = state.get("early_stopping", {}).get("stopped", False)
    batches = epoch_batches(
        task.train,
        cfg.train.batch_size,
        seed,
        initial_epoch,
        supervision.inputs_function(trained),
        shard=backends.current().process(),
        **feed_options(cfg),
    )
    callbacks = [*make_callbacks(cfg, task, tracker, folder, batches, state), *extra_callbacks]
    if initial_epoch < cfg.train.epochs and not stopped:
        trained.fit(
            backends.current().fit_data(batches),
            shuffle=False,  # the feed orders each epoch itself, from (seed, epoch)
            **backends.current().validation_data(
                supervision.fit_inputs(trained, task.val), task.val.y, cfg.train.batch_size
            ),
            epochs=cfg.train.epochs,
            initial_epoch=initial_epoch,
            callbacks=callbacks,
            verbose=cfg.train.verbose,
        )
    best_epoch = _restore_best(trained, folder) if cfg.train.early_stopping else None
    tracker.wait()  # the last epoch's heatmaps, drawn while training went on as every epoch's
    training_peak = memory.peak_memory_mb()  # the epochs, their evaluations and checkpoints
    memory.release_training_step(trained)
    _finish(model, cfg, task, tracker, training_peak, best_epoch)


def feed_options(cfg) -> dict:
    """What a length-bucketed feed takes besides the batch size: the token budget or pool, the
    replicas a batch is split over (a short last batch is filled up to a multiple of them)
    and the backend's padding multiple (see `epoch_batches`)."""
    return {
        "batch_tokens": cfg.train.batch_tokens,
        "pool": cfg.train.batch_pool,
        "multiple": distribute.planned_replicas(cfg.train.distribute),
        "pad_to": backends.current().pad_multiple(cfg.train.jit_compile),
    }


def _restore_best(trained, folder: Path) -> int | None:
    """Load the best epoch's weights (what the final evaluation and the logged model use);
    return that epoch, 1-based like the metrics' steps (None: none was kept)."""
    state = checkpoints.load_state(folder)
    best = state["early_stopping"]["best_epoch"]
    if not checkpoints.best_path(folder, best).is_file():  # from before best epochs were kept
        print(f"no weights of the best epoch ({best + 1}) in {folder}: evaluating the last epoch")
        return None
    checkpoints.load_best(folder, trained, best, state.get("best_sha256"))
    return best + 1


def make_callbacks(cfg, task, tracker, folder, batches, state) -> list:
    """Clock, evaluation, early stopping, checkpoint, MLflow logging — in that order."""
    evaluation_split = task.val.take(slice(0, _val_rows(cfg, task)))
    out = [
        guards.NonFiniteLossGuard(tracker, folder),  # before the checkpoint
        cb.EpochClock(batches, cfg.train.seed, task.kind.tokens_per_epoch(task.train)),
        cb.EvalMetrics(task, evaluation_split),
    ]
    stopper = None
    if cfg.train.early_stopping:
        es = cfg.train.early_stopping
        stopper = cb.ResumableEarlyStopping(
            restored=(state or {}).get("early_stopping"),
            monitor=es.monitor,
            patience=es.patience,
            mode=es.mode,
            min_delta=es.min_delta,
        )
        out.append(stopper)
    out.append(cb.Checkpoint(folder, stopper, (state or {}).get("best_sha256")))
    out.append(
        cb.RunLogger(
            tracker,
            task,
            cfg.generate,
            cfg.tracking.heatmap_every,
            cfg.tracking.num_samples,
        )
    )
    return out


def _log_length_generalisation(model, cfg, task, tracker, step: int) -> None:
    """The kind's metrics per length bucket (`test_exact_match_greedy_len_13_16`, and
    `length_metric_names`: `test_exact_match_oracle_len_13_16`,
    `test_alignment_accuracy_len_13_16`), on every row of the test and generalisation
    splits; JSON and a plot (seq2seq: free and oracle-length exact match side by side)."""
    kind = task.kind
    per_bucket = {
        name: kind.length_metrics(model, task, split)
        for name, split in length_buckets.buckets(task).items()
    }
    if not per_bucket:
        return
    logged = set(kind.metric_names) | set(kind.length_metric_names)
    tracker.log_metrics_once(
        {
            f"test_{metric}_{name}": value
            for name, results in per_bucket.items()
            for metric, value in results.items()
            if metric in logged and math.isfinite(value)
        },
        step,
    )
    tracker.log_dict(per_bucket, "length_generalisation.json")
    metric = kind.primary_metric.removeprefix("test_")
    shown = [metric, *kind.length_plot_metrics]
    mechanism = cfg.model.attention.mechanism
    title = f"{task.name}: {', '.join(shown)} by length ({mechanism} attention)"
    tracker.log_figure(length_buckets.figure(per_bucket, shown, title), "length_generalisation.png")


def _register(tracker, model_uri: str, name: str) -> None:
    """Register the run's model as a new version of `name` (`tracking.register_model`); a
    model still in the spool, or a registry that fails, is a warning: the run is kept."""
    if model_uri == resilient.SPOOLED_MODEL_URI:
        print(
            f"warning: tracking.register_model: the model waits in the spool; register it "
            f"after `python -m experiments sync {tracker.run_id}`",
            file=sys.stderr,
        )
        return
    try:
        version = registry.add_version(model_uri, name, tracker.run_id)
    except Exception as err:  # noqa: BLE001 - never fail a finished run over its registration
        print(f"warning: tracking.register_model: {name!r} failed: {err!r}", file=sys.stderr)
        return
    tracker.set_tags({"registered_model": f"models:/{name}/{version}"})


def _finish(model, cfg, task, tracker, training_peak: float, best_epoch: int | None = None) -> None:
    """Test metrics on the whole test split (and `best_epoch`, the epoch whose weights these
    are, with early stopping), final heatmaps, the kind's artifacts, samples and the model;
    the process's peak memory by the end of training (`training_peak`, MB) and by the end
    of the run."""
    kind = task.kind
    last_step = max(tracker.logged_steps("loss") or {0})
    test = task.test
    results = {
        f"test_{k}": v for k, v in kind.test_metrics(model, task, test, cfg.generate).items()
    }
    if best_epoch is not None:
        results["best_epoch"] = best_epoch
    tracker.log_metrics_once(results, last_step)
    memory.give_back()  # each phase of the end grows from what is in use, not from the last
    _log_length_generalisation(model, cfg, task, tracker, last_step)
    shown = last_step if best_epoch is None else best_epoch  # the epoch of these weights
    cb.log_heatmaps(tracker, model, task, "heatmaps/final", epoch=shown)
    artifacts = kind.final_artifacts(model, task, test)
    for path, data in artifacts.dicts.items():
        tracker.log_dict(data, path)
    for path, figure in artifacts.figures.items():
        tracker.log_figure(figure, path)
    for path, text in artifacts.texts.items():
        tracker.log_text(text, path)
    tracker.log_metrics_once(artifacts.metrics, last_step)
    tracker.wait()  # the final heatmaps drawn now, not beside the samples and the logged model
    memory.give_back()
    rows = kind.sample_rows(model, task, cfg.generate, cfg.tracking.num_samples)
    if rows:
        tracker.log_table(rows, "samples/final.json")
    memory.give_back()
    if cfg.tracking.log_model:
        card = kind.text_card(task, cfg)
        tokens = np.asarray(card["examples"]["tokens"], dtype="int32")
        tracker.log_dict({"tokens": tokens.tolist()}, "input_example.json")
        # What the Keras-flavor model must serve for them: greedy ids, or logits.
        tracker.log_array(kind.serving_output(model, cfg, tokens), "expected_output.npy")
        memory.give_back()
        model_tags = tracker.log_model(model, card)  # model_uri (TensorFlow), text_model_uri
        tracker.set_tags({**model_tags, **model_logging.skipped_note(card)})
        if cfg.tracking.register_model is not None:
            # the Keras-flavor model where it is logged, else the text model
            uri = model_tags.get("model_uri", model_tags["text_model_uri"])
            _register(tracker, uri, cfg.tracking.register_model)
    # the peak with the test scores, samples and model too: above `train_peak_memory_mb`
    # where the end of the run needed more memory than training
    tracker.log_metrics_once(
        {"train_peak_memory_mb": training_peak, "run_peak_memory_mb": memory.peak_memory_mb()},
        last_step,
    )
    tracker.wait()  # what is left on the artifact thread: a failure fails the run
