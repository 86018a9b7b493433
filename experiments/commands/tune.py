"""`tune CONFIG --space KEY=SPEC ... [--trials N] [--workers K] [--storage URL]`: an Optuna
study, one nested MLflow run per trial, the best model registered (as the `champion` when it
beats the model that is), a table of the trials at the end."""

from __future__ import annotations

import argparse

from experiments.commands import common

SPACE_HELP = (
    "a searched key and its distribution: float:LOW:HIGH[:log], int:LOW:HIGH[:log] or "
    "categorical:A,B,... (repeatable; adds to or replaces the config's tune.space)"
)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "tune", help="hyperparameter search (Optuna): one nested run per trial, best registered"
    )
    common.add_config_arguments(parser, "YAML config file or ready config name")
    parser.add_argument("--space", action="append", default=[], metavar="KEY=SPEC", help=SPACE_HELP)
    parser.add_argument("--trials", type=_positive, help="trials in the study (default 10)")
    parser.add_argument(
        "--metric", help="per-epoch metric to optimise (default: the task's val_ selection metric)"
    )
    parser.add_argument("--direction", choices=("maximize", "minimize"))
    parser.add_argument("--sampler", choices=("tpe", "random", "grid"), help="default tpe")
    parser.add_argument("--pruner", choices=("median", "none"), help="default median")
    parser.add_argument(
        "--storage",
        metavar="URL",
        help="Optuna storage shared by the workers: sqlite:///PATH, postgresql://..., "
        "journal:PATH (default: optuna.db beside the MLflow store, in the folder of its "
        "sqlite:/// file: mlruns/optuna.db for the project's store; in mlruns/ with a "
        "tracking server)",
    )
    parser.add_argument(
        "--study", help="study name (default: EXPERIMENT-CONFIGNAME); reused = resumed"
    )
    parser.add_argument(
        "--workers", type=_positive, default=1, help="trial processes on this machine (default 1)"
    )
    parser.add_argument(
        "--register-as", metavar="NAME", help="registered model name (default: the experiment)"
    )
    parser.add_argument(
        "--heartbeat",
        type=_positive,
        metavar="SECONDS",
        help="trial heartbeat; a trial silent for 3 beats is failed and retried (default 30)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="sampler seed (default: random); each worker, and each rerun of the study, "
        "seeds its sampler from it, its number and the trials the study holds",
    )
    # Set on the K-1 processes `--workers K` starts: the command that started them reports.
    parser.add_argument("--helper", action="store_true", help=argparse.SUPPRESS)
    # Their number among the study's workers (1 .. K-1): part of their sampler's seed.
    parser.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    parser.set_defaults(handler=handle)


def worker_argv(args) -> list[str]:
    """The command line of one more worker of the same study."""
    argv = [args.config]
    for flag, values in (("--set", args.overrides), ("--space", args.space)):
        for value in values:
            argv += [flag, value]
    for name in (
        "trials",
        "metric",
        "direction",
        "sampler",
        "pruner",
        "register_as",
        "heartbeat",
        "seed",
    ):
        value = getattr(args, name)
        if value is not None:
            argv += ["--" + name.replace("_", "-"), str(value)]
    return argv


def handle(args) -> int:
    path = common.checked_config(args.config, args.overrides, ["tune"])  # before Keras
    from experiments.tuning import study_storage, tune

    flags = {
        name: getattr(args, name)
        for name in (
            "space",
            "trials",
            "metric",
            "direction",
            "sampler",
            "pruner",
            "storage",
            "study",
            "register_as",
            "heartbeat",
            "workers",
            "seed",
        )
    }
    plan = tune.plan(path, args.overrides, flags)
    plan.worker_argv = worker_argv(args)
    plan.worker = args.worker
    outcome = tune.run_study(plan)
    if args.helper:
        return 0  # the worker that started this one prints the study's report
    study = outcome.study
    trials = study.get_trials(deepcopy=False)
    if outcome.nothing_left:
        print(
            f"nothing left to run: study {plan.study} has its {plan.trials} trial(s), all "
            "ended and summarised (raise --trials to run more, or name a new --study)"
        )
    print(
        f"study: {plan.study} ({study_storage.redact(plan.storage)}), {plan.direction} {plan.metric}"
    )
    print("\n".join("  " + line for line in _trial_table(trials, plan)))
    done = [t for t in trials if t.value is not None and t.state.name == "COMPLETE"]
    best = study.best_trial if done else None
    if best is not None:
        print(f"best trial: {best.number}  {plan.metric}={best.value:.4g}  {best.params}")
    print(_champion_line(plan.register_as, outcome, best))
    common.report(outcome.parent_run_id, result=False, label="parent run id")
    return 0


def _trial_table(trials, plan) -> list[str]:
    """One row a trial: its number, state, value and parameters."""
    from experiments.tracking import results

    keys = [d.key for d in plan.dims]
    rows = [
        {"trial": t.number, "state": t.state.name, plan.metric: t.value}
        | {k: f"{v:.4g}" if isinstance(v, float) else v for k, v in t.params.items()}
        for t in trials
    ]
    return results.table(rows, ["trial", "state", plan.metric, *keys])


def _champion_line(name: str, outcome, best) -> str:
    """What the registry holds under `champion` (read back from it, never assumed), and why
    it moved to this study's best model or did not (the parent run's verdict)."""
    from experiments.tracking import registry

    version = outcome.champion
    verdict = f": {outcome.verdict}" if outcome.verdict else ""
    if outcome.nothing_left:  # the verdict of the study's last summary is old news
        verdict = ""
    if version is None:
        if not outcome.summarised:
            why = "the study is not finished: its last worker registers the best model"
        elif best is None:
            why = "no trial completed"
        else:
            why = "the best trial logged no model"
        return f"champion: none registered under {name!r} ({why})"
    run_id = version.tags.get("run_id", version.run_id)
    whose = (
        "the best trial's model"
        if best is not None and run_id == best.user_attrs.get("mlflow_run_id")
        else f"run {run_id}"
    )
    label = "champion now" if outcome.nothing_left else "champion"
    return (
        f"{label}: models:/{name}@{registry.CHAMPION} (version {version.version}, {whose})"
        + verdict
    )
