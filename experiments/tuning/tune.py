"""A `tune` study: Optuna samples configs, each trial is a nested MLflow run, the best model
is registered (and becomes the `champion` when it beats it: `registry`).

`plan` makes every check (config, search space, metric, sampler, storage URL) before
anything is created. `run_study` then, under the study's lock (`study_storage.lock`),
creates or loads the Optuna study and its one MLflow parent run (its id is a user attribute
of the study, so every worker, on this machine or another, nests its trials under it), and
works: again and again, under the lock, it fails trials whose worker went silent, and asks
the study for the next trial while fewer than `trials` have been asked for (a retried trial
takes its dead original's place); it trains that trial outside the lock. A worker with
nothing left to ask waits for other workers' running trials (failing the silent ones and
running their retries), then the last one writes the summary (`summary`), which ends
the parent run FINISHED. `--workers K` starts K-1 more processes of the same command
(`--helper`: they leave the study's report to this one).

Running the command again resumes the study; a study with nothing left (every trial asked
for has ended and is summarised) is only reported (`Outcome.nothing_left`), its parent run
left as it was. With `--seed S` each worker's sampler is seeded from S, its number and the
trials the study held when it joined (`sampler_seed`): two workers, or a study run again,
draw different points, and the same command on the same study draws the same ones. A worker
stopped by an error or an interrupt ends the parent run FAILED or KILLED, with the reason
in a tag, unless another worker still has a trial running (that worker ends it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy
import optuna
import yaml
from optuna.trial import TrialState

from experiments import config as config_lib
from experiments.errors import ConfigError, Terminated
from experiments.tracking import registry, store
from experiments.tracking.tracker import Tracker
from experiments.training import run
from experiments.tuning import search_space, settings, study_storage, summary
from experiments.tuning import trial as trials_lib

PARENT_ATTR = "mlflow_parent_run_id"
SUMMARISED_ATTR = "summarised_trials"
POLL_SECONDS = 1.0
ENDING_TAGS = ("killed_by", "failure_reason")  # why a stopped worker ended the parent


@dataclass
class Plan:
    """A checked study: what `run_study` needs, nothing created yet."""

    base: dict  # the config mapping (without `tune`), with the --set overrides
    experiment: str
    dims: list
    trials: int
    metric: str
    direction: str
    sampler: str
    pruner: dict
    storage: str
    study: str
    register_as: str
    heartbeat: int
    workers: int = 1
    seed: int | None = None
    worker_argv: list[str] = field(default_factory=list)
    worker: int = 0  # this process's number among the study's workers (0: the one started)


def plan(path: Path, overrides: list[str], flags: dict) -> Plan:
    """Every check of a study, before any file, study or run is created.

    `flags`: the command line's values (None where not given): space (list of KEY=SPEC),
    trials, metric, direction, sampler, pruner, storage, study, register_as, heartbeat,
    workers, seed.
    """
    data, section = settings.split(config_lib.read_yaml(path))
    task = data.get("task")
    if isinstance(task, dict) and isinstance(task.get("path"), str):  # as `load_config` reads it
        beside = Path(path).parent / task["path"]
        if not Path(task["path"]).is_absolute() and beside.exists():
            task["path"] = str(beside.resolve())
    base = config_lib.apply_overrides(data, overrides)
    prepared = run.validate(base)
    dims = search_space.combine(section.space, search_space.parse_specs(flags["space"]))
    search_space.check(base, dims)
    metric = flags["metric"] or section.metric or _selection_metric(prepared.task)
    known = run.epoch_metric_names(prepared.task)
    if metric not in known:
        raise ConfigError(
            f"--metric {metric!r}: not a metric this task logs every epoch; expected one of "
            f"{', '.join(sorted(known))}"
        )
    sampler = flags["sampler"] or section.sampler
    trials = flags["trials"] or section.trials
    if sampler == "grid":
        size = 1
        for dim in dims:
            size *= len(dim.grid_values())
        trials = min(trials or size, size)  # each point once
    pruner = section.pruner
    if flags["pruner"]:
        pruner = settings.pruner_setting(flags["pruner"])
    storage = flags["storage"] or section.storage or study_storage.default_url()
    study_storage.check_url(storage)
    return Plan(
        base=base,
        experiment=prepared.cfg.tracking.experiment,
        dims=dims,
        trials=trials or settings.DEFAULT_TRIALS,
        metric=metric,
        direction=flags["direction"] or section.direction or settings.direction_for(metric),
        sampler=sampler,
        pruner=pruner,
        storage=storage,
        study=flags["study"] or section.study or f"{prepared.cfg.tracking.experiment}-{path.stem}",
        register_as=flags["register_as"] or section.register_as or prepared.cfg.tracking.experiment,
        heartbeat=flags["heartbeat"] or settings.DEFAULT_HEARTBEAT_SECONDS,
        workers=flags["workers"] or 1,
        seed=flags["seed"],
    )


def _selection_metric(task) -> str:
    """The task's own selection metric, measured on the validation split every epoch."""
    return "val_" + task.kind.primary_metric.removeprefix("test_")


@dataclass
class Outcome:
    """What a study ended with (for the command's report)."""

    parent_run_id: str
    study: optuna.Study
    summarised: bool  # the summary of every trial the study has is written
    champion: object = None  # the registry's version under `champion`, None when there is none
    verdict: str | None = None  # why the champion moved to the study's best model or did not
    nothing_left: bool = False  # the study was finished and summarised before this command


def run_study(p: Plan) -> Outcome:
    """Create or resume the study, work on it (with `p.workers - 1` more processes), and
    write its summary once every trial has ended."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # each trial is reported by tune
    with warnings.catch_warnings():
        # heartbeats, retries and stale trials are marked experimental; used as documented
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", "Heartbeat of storage is supposed to be used with")
        return _run_study(p)


def _run_study(p: Plan) -> Outcome:
    stale = trials_lib.StaleTrials()
    client = store.connect()  # a tracking server that does not answer: exit 3, nothing made
    with study_storage.lock(p.storage, p.study):
        storage = study_storage.open_storage(p.storage, heartbeat=p.heartbeat, on_stale=stale)
        study = _load_study(p, storage)
        nothing_left = _settled(p, study) if study.user_attrs.get(PARENT_ATTR) else False
        experiment_id = store.experiment_id(client, p.experiment)
        parent = _parent_run(p, study, client, experiment_id)
    stale.connect(client, experiment_id, parent)
    helpers = []
    try:
        helpers = [_start_worker(p, number) for number in range(1, p.workers)]
        _work(p, study, storage, client, parent)
        failed = [h.wait() for h in helpers]
        _finish(p, study, client, parent, experiment_id)
    except BaseException as err:
        _stop(helpers)
        _leave(p, study, client, parent, err)
        raise
    if any(failed):
        print(f"tune: {sum(map(bool, failed))} worker process(es) failed", file=sys.stderr)
    summarised = study.user_attrs.get(SUMMARISED_ATTR) == len(study.get_trials(deepcopy=False))
    verdict = client.get_run(parent).data.tags.get(registry.VERDICT_TAG)
    champion = registry.aliased(client, p.register_as)
    return Outcome(parent, study, summarised, champion, verdict, nothing_left)


def sampler_seed(seed: int | None, worker: int, trials_before: int) -> int | None:
    """The seed of one worker's sampler: `--seed` mixed with the worker's number and the
    trials the study held when the worker joined it, so that two workers, or a study run
    again, never draw the same sequence (None: `--seed` not given, a random one)."""
    if seed is None:
        return None
    state = numpy.random.SeedSequence([seed & (2**63 - 1), worker, trials_before])
    return int(state.generate_state(1)[0])


def _load_study(p: Plan, storage) -> optuna.Study:
    grid = {d.key: d.grid_values() for d in p.dims} if p.sampler == "grid" else None
    try:  # the trials the study holds (none when it is new)
        before = len(optuna.load_study(study_name=p.study, storage=storage).trials)
    except KeyError:
        before = 0
    seed = sampler_seed(p.seed, p.worker, before)
    study = optuna.create_study(
        study_name=p.study,
        storage=storage,
        sampler=settings.make_sampler(p.sampler, grid, seed),
        pruner=settings.make_pruner(p.pruner),
        direction=p.direction,
        load_if_exists=True,
    )
    if study.direction.name.lower() != p.direction:
        raise ConfigError(
            f"--direction {p.direction}: study {p.study!r} in {study_storage.redact(p.storage)} "
            f"was created to {study.direction.name.lower()}; keep it, or name a new --study"
        )
    return study


def _parent_run(p: Plan, study, client, experiment_id: str) -> str:
    """The study's parent run: made once (by the first worker), reopened on a resume."""
    known = study.user_attrs.get(PARENT_ATTR)
    if known is not None:
        try:
            found = client.get_run(known)
        except Exception:  # noqa: BLE001 - MlflowException subclasses vary by store
            raise ConfigError(
                f"study {p.study!r} belongs to MLflow run {known}, which is not in "
                f"{store.tracking_uri()}: use the same MLFLOW_TRACKING_URI, or a new --study"
            ) from None
        if not _settled(p, study):  # work left: the parent runs again until the summary
            for key in ENDING_TAGS:
                if key in found.data.tags:
                    client.delete_tag(known, key)
            client.update_run(known, "RUNNING")
        elif found.info.status == "RUNNING":  # summarised, but left running (older versions)
            client.set_terminated(known, "FINISHED")
        return known
    parent = client.create_run(
        experiment_id,
        run_name=f"tune-{p.study}",
        tags={"tune": "parent", trials_lib.STUDY_TAG: p.study, **store.environment_tags()},
    )
    run_id = parent.info.run_id
    tracker = Tracker(client, run_id)
    tracker.log_params(
        {
            "study": p.study,
            "storage": study_storage.redact(p.storage),
            "trials": p.trials,
            "metric": p.metric,
            "direction": p.direction,
            "sampler": p.sampler,
            "pruner": p.pruner["name"],
            **{f"space.{d.key}": d.spec() for d in p.dims},
        }
    )
    tracker.log_text(yaml.safe_dump(p.base, sort_keys=False), "base_config.yaml")
    study.set_user_attr(PARENT_ATTR, run_id)
    return run_id


def _settled(p: Plan, study) -> bool:
    """Whether the study has nothing left: every trial asked for ended, and summarised."""
    trials = study.get_trials(deepcopy=False)
    return (
        _asked(trials) >= p.trials
        and not any(t.state in (TrialState.RUNNING, TrialState.WAITING) for t in trials)
        and study.user_attrs.get(SUMMARISED_ATTR) == len(trials)
    )


def _asked(trials) -> int:
    """Trials asked for so far, a retried trial and its retry counted once."""
    retries = sum(1 for t in trials if "failed_trial" in t.system_attrs)
    return len(trials) - retries


def _work(p: Plan, study, storage, client, parent: str) -> None:
    told: set[int] = set()  # the other workers' trials this worker said it waits for
    while True:
        with study_storage.lock(p.storage, p.study):
            optuna.storages.fail_stale_trials(study)  # silent ones: failed, queued again
            trials = study.get_trials(deepcopy=False)
            waiting = any(t.state == TrialState.WAITING for t in trials)
            trial = None
            if waiting or _asked(trials) < p.trials:
                trial = study.ask()  # a queued (retried) trial first
                trials_lib.first_heartbeat(storage, trial)
            running = {t.number for t in trials if t.state == TrialState.RUNNING}
        if trial is None:
            if not running:
                return
            if running - told:
                trials_lib.say(
                    f"waiting for trial(s) {', '.join(map(str, sorted(running)))} of other "
                    f"workers (one silent for {settings.grace_seconds(p.heartbeat)} s is failed "
                    "and run again)"
                )
                told |= running
            time.sleep(POLL_SECONDS)
            continue
        with trials_lib.heartbeat(storage, trial):
            trials_lib.run_trial(
                study,
                trial,
                base=p.base,
                dims=p.dims,
                metric=p.metric,
                parent_run_id=parent,
                client=client,
            )


def _finish(p: Plan, study, client, parent: str, experiment_id: str) -> None:
    """The summary, once per number of trials, by whichever worker gets here first."""
    with study_storage.lock(p.storage, p.study):
        trials = study.get_trials(deepcopy=False)
        if any(t.state in (TrialState.RUNNING, TrialState.WAITING) for t in trials):
            return  # another worker's trial: that worker summarises
        if study.user_attrs.get(SUMMARISED_ATTR) == len(trials):
            return  # summarised by another worker, which ended the parent
        summary.summarise(study, client, parent, experiment_id, p.metric, p.register_as)
        study.set_user_attr(SUMMARISED_ATTR, len(trials))


def _leave(p: Plan, study, client, parent: str, err: BaseException) -> None:
    """End the parent run of a worker stopped by `err` (KILLED on an interrupt, FAILED
    otherwise, the reason in a tag), unless another worker's trial still runs; never raises
    (the caller re-raises `err`)."""
    try:
        with study_storage.lock(p.storage, p.study):
            optuna.storages.fail_stale_trials(study)
            trials = study.get_trials(deepcopy=False)
            if any(t.state == TrialState.RUNNING for t in trials):
                return  # a live worker's trial: that worker ends the parent
            if isinstance(err, KeyboardInterrupt):
                how = "SIGTERM" if isinstance(err, Terminated) else "SIGINT (Ctrl+C)"
                status, tags = "KILLED", {"killed_by": how}
            else:
                reason = f"{type(err).__name__}: {err}".strip()
                status, tags = "FAILED", {"failure_reason": reason}
            Tracker(client, parent).set_tags(tags)
            client.set_terminated(parent, status)
    except Exception as failure:  # noqa: BLE001 - the original error is what matters
        print(f"tune: could not end the parent run {parent}: {failure!r}", file=sys.stderr)


def _start_worker(p: Plan, number: int) -> subprocess.Popen:
    """One more process of this study (the same command, one worker, its `number`)."""
    argv = [sys.executable, "-m", "experiments", "tune", *p.worker_argv]
    argv += ["--storage", p.storage, "--study", p.study, "--workers", "1", "--helper"]
    argv += ["--worker", str(number)]
    path = os.pathsep.join(filter(None, [str(store.project_root()), os.environ.get("PYTHONPATH")]))
    return subprocess.Popen(argv, env={**os.environ, "PYTHONPATH": path})


def _stop(helpers: list[subprocess.Popen]) -> None:
    for helper in helpers:
        if helper.poll() is None:
            helper.terminate()
    for helper in helpers:
        try:
            helper.wait(timeout=120)
        except subprocess.TimeoutExpired:
            helper.kill()
            helper.wait()
