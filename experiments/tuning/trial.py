"""One trial of a `tune` study: its config, its nested MLflow run, what the study is told.

A trial's config is the study's base config with the trial's values set (each searched key
is an Optuna parameter of the same name) and its run tagged `tune_study`, `tune_trial`
(the trial number) and, once it ends, `pruned`. The run is an ordinary run of the runner,
nested under the study's parent run, with `TrialPruning` after the runner's callbacks; it
trains with Keras's epoch lines off (`train.verbose: 0`), and `TrialProgress` prints each
epoch as a line labelled with the trial's number instead (unless the config's verbose is 0).

While it trains, a thread records the trial's heartbeat in the storage (every storage
`study_storage` opens keeps them). When a worker dies, its trial goes silent; the next
worker to look fails it (`StaleTrials`): the study queues the same parameters once more,
and the dead trial's MLflow run is ended FAILED with the tag `failure_reason`.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time

import optuna
from optuna.trial import TrialState

from experiments import config as config_lib
from experiments.errors import ConfigError, CorruptData, RunFailed
from experiments.tracking import registry
from experiments.training import run
from experiments.tuning import search_space
from experiments.tuning.progress import TrialProgress
from experiments.tuning.pruning import TrialPruning
from experiments.tuning.settings import MAX_RETRIES

STUDY_TAG, TRIAL_TAG, PRUNED_TAG, RETRY_TAG = "tune_study", "tune_trial", "pruned", "tune_retry_of"


def trial_config(base: dict, values: dict, study: str, number: int, retry_of: int | None) -> dict:
    """The base config with the trial's values, its run's name and tags."""
    data = config_lib.apply_overrides(
        base, [search_space.override(k, v) for k, v in values.items()]
    )
    tracking = data.setdefault("tracking", {})
    tracking["run_name"] = run_name(number)
    tags = {**(tracking.get("tags") or {}), STUDY_TAG: study, TRIAL_TAG: str(number)}
    if retry_of is not None:
        tags[RETRY_TAG] = str(retry_of)
    tracking["tags"] = tags
    return data


def run_name(number: int) -> str:
    """The name of trial `number`'s run (unique under its study's parent run from the moment
    the run is created, before any tag is set)."""
    return f"trial-{number}"


def run_trial(study, trial, *, base: dict, dims, metric: str, parent_run_id: str, client):
    """Train trial `trial` as a nested run and tell `study` how it went; return its run id
    (None when its config was refused)."""
    values = {d.key: d.suggest(trial) for d in dims}
    retry_of = _retry_of(study, trial.number)
    started = time.monotonic()
    say(f"trial {trial.number}: {' '.join(search_space.override(k, v) for k, v in values.items())}")
    try:
        prepared = run.validate(
            trial_config(base, values, study.study_name, trial.number, retry_of)
        )
    except ConfigError as err:
        say(f"trial {trial.number}: config refused, trial failed: {err}")
        trial.set_user_attr("failure", str(err))
        study.tell(trial, state=TrialState.FAIL)
        return None
    pruning = TrialPruning(trial, metric)
    callbacks = [pruning]
    if prepared.cfg.train.verbose:  # Keras's epoch lines carry no trial number; these do
        prepared.cfg.train.verbose = 0
        callbacks.append(TrialProgress(trial.number, prepared.cfg.train.epochs, metric))
    try:
        run_id = run.execute(prepared, parent_run_id=parent_run_id, callbacks=tuple(callbacks))
    except (RunFailed, CorruptData) as err:
        say(f"trial {trial.number}: run failed: {err}")
        trial.set_user_attr("failure", str(err))
        study.tell(trial, state=TrialState.FAIL)
        return None
    except BaseException as err:  # Ctrl+C, SIGTERM, a bug: never left running
        stopped = "interrupted" if isinstance(err, KeyboardInterrupt) else repr(err)
        with contextlib.suppress(Exception):  # the reason is extra; the FAIL must be told
            trial.set_user_attr("failure", f"its worker stopped: {stopped}")
        study.tell(trial, state=TrialState.FAIL)
        raise
    trial.set_user_attr("mlflow_run_id", run_id)
    client.set_tag(run_id, PRUNED_TAG, str(pruning.pruned_at is not None).lower())
    seconds = time.monotonic() - started
    if pruning.pruned_at is not None:
        client.set_tag(run_id, "pruned_at_epoch", str(pruning.pruned_at))
        say(f"trial {trial.number}: pruned after epoch {pruning.pruned_at} ({seconds:.0f} s)")
        study.tell(trial, state=TrialState.PRUNED)
        return run_id
    value = registry.kept_value(client, run_id, metric)
    if value is None or not math.isfinite(value):
        say(f"trial {trial.number}: no finite {metric}; trial failed")
        trial.set_user_attr("failure", f"no finite {metric}")
        study.tell(trial, state=TrialState.FAIL)
    else:
        say(f"trial {trial.number}: {metric}={value:.4g} ({seconds:.0f} s)")
        study.tell(trial, value)
    return run_id


def _retry_of(study, number: int) -> int | None:
    """The number of the dead trial this one runs again (None: a trial of its own)."""
    frozen = next(t for t in study.get_trials(deepcopy=False) if t.number == number)
    return frozen.system_attrs.get("failed_trial")


@contextlib.contextmanager
def heartbeat(storage, trial):
    """Record `trial`'s heartbeat every interval while the block runs."""
    interval = storage.get_heartbeat_interval()
    trial_id = trial._trial_id  # Optuna's storage addresses trials by id, not number
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(interval):
            with contextlib.suppress(Exception):  # a missed beat is made up by the next
                storage.record_heartbeat(trial_id)

    thread = threading.Thread(target=beat, name="optuna-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def first_heartbeat(storage, trial) -> None:
    """A heartbeat as soon as the trial exists, so a worker that dies at once is noticed."""
    storage.record_heartbeat(trial._trial_id)


class StaleTrials:
    """The storage's callback for a trial whose worker went silent: queue its parameters
    once more (`MAX_RETRIES`) and end its MLflow run FAILED, tagged with the reason.

    `connect` gives it MLflow once the parent run is known; before that (the first look at
    the storage) only the study is told.
    """

    REASON = "worker lost (no heartbeat)"

    def __init__(self):
        self.retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRIES)
        self.client = self.experiment_id = self.parent_run_id = None

    def connect(self, client, experiment_id: str, parent_run_id: str) -> None:
        self.client, self.experiment_id, self.parent_run_id = client, experiment_id, parent_run_id

    def __call__(self, study, trial) -> None:
        self.retry(study, trial)
        again = len(trial.system_attrs.get("retry_history", ())) < MAX_RETRIES
        say(
            f"trial {trial.number}: its worker stopped answering; failed, "
            + ("queued again" if again else f"not run again (retried {MAX_RETRIES}x already)")
        )
        if self.client is None:
            return
        for found in self.client.search_runs(
            [self.experiment_id],
            filter_string=(
                f"tags.`mlflow.parentRunId` = '{self.parent_run_id}' "
                f"and attributes.run_name = '{run_name(trial.number)}'"
            ),
        ):
            if found.info.status == "RUNNING":
                self.client.set_tag(found.info.run_id, "failure_reason", self.REASON)
                self.client.set_terminated(found.info.run_id, "FAILED")


def say(text: str) -> None:
    """One line of the study's progress, on stderr."""
    print(f"tune: {text}", file=sys.stderr, flush=True)
