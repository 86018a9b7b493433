"""What a study's parent run shows once every trial has ended, and the champion.

On the parent run: the best value (`best_value` and `best_<metric>`, at the step of the
number of trials) and the trial counts as metrics; the best trial's number, run and
parameters as tags (`best.<key>`) and `best_params.json`; Optuna's optimisation history and
parameter importances as figures; `trials.json`/`trials.csv`, one row a trial (number,
state, value, parameters, epoch pruned at, retry of, why it failed, seconds, run id). The
best trial's model is registered (`registry.register`); the alias `champion` moves to it
only when it beats the champion on the study's objective and the same data, and the parent
run's `champion_verdict` tag says why it moved or did not. Metrics are logged once a step,
so a summary written again (its worker died before marking it written) adds none twice.
"""

from __future__ import annotations

import sys
import warnings

import optuna
from matplotlib import pyplot as plt
from optuna.trial import TrialState

from experiments.tracking import registry
from experiments.tracking.tracker import Tracker
from experiments.tuning.trial import PRUNED_TAG, RETRY_TAG, STUDY_TAG, TRIAL_TAG


def trial_runs(client, experiment_id: str, study_name: str, parent_run_id: str) -> dict:
    """The study's nested runs by trial number."""
    found = client.search_runs(
        [experiment_id],
        filter_string=f"tags.{STUDY_TAG} = '{study_name}'",
        max_results=50000,
    )
    return {
        int(r.data.tags[TRIAL_TAG]): r
        for r in found
        if r.data.tags.get("mlflow.parentRunId") == parent_run_id
    }


def summarise(study, client, parent_run_id: str, experiment_id: str, metric: str, register_as):
    """Log the study's summary on the parent run, register the best trial's model (the
    champion if it is better: `registry.register`), end the parent FINISHED; return the
    registry's verdict (None: no model, or no finished trial)."""
    tracker = Tracker(client, parent_run_id)
    trials = study.get_trials(deepcopy=False)
    runs = trial_runs(client, experiment_id, study.study_name, parent_run_id)
    tracker.log_table([_row(t, runs.get(t.number)) for t in trials], "trials.json")
    counts = {
        f"trials_{state.name.lower()}": sum(t.state == state for t in trials)
        for state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    }
    tracker.log_metrics_once(counts, len(trials))  # once, even if a summary is written again
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    if not done:
        client.set_terminated(parent_run_id, "FINISHED")
        return None
    best = study.best_trial
    best_run = runs.get(best.number)
    tracker.log_metrics_once({"best_value": best.value, f"best_{metric}": best.value}, len(trials))
    tracker.set_tags(
        {
            "best_trial": best.number,
            "best_run_id": best_run.info.run_id if best_run else "",
            **{f"best.{k}": v for k, v in best.params.items()},
        }
    )
    tracker.log_dict({"trial": best.number, "value": best.value, **best.params}, "best_params.json")
    _log_figures(study, tracker)
    verdict = None
    if best_run is not None and register_as:
        direction = study.direction.name.lower()
        version, verdict = registry.register(
            client, best_run.info.run_id, register_as, metric, direction
        )
        if version is not None:
            tags = {
                "registered_version": f"models:/{register_as}/{version.version}",
                registry.VERDICT_TAG: verdict.reason,
            }
            champion = registry.aliased(client, register_as)
            if champion is not None and champion.version == version.version:
                tags["champion"] = f"models:/{register_as}@{registry.CHAMPION}"
            tracker.set_tags(tags)
    tracker.wait()
    client.set_terminated(parent_run_id, "FINISHED")
    return verdict


def _row(trial, found) -> dict:
    tags = found.data.tags if found is not None else {}
    seconds = (
        (trial.datetime_complete - trial.datetime_start).total_seconds()
        if trial.datetime_complete and trial.datetime_start
        else None
    )
    return {
        "trial": trial.number,
        "state": trial.state.name,
        "value": trial.value,
        **trial.params,
        "pruned": tags.get(PRUNED_TAG, "false") == "true",
        "pruned_at_epoch": tags.get("pruned_at_epoch"),
        "retry_of": tags.get(RETRY_TAG),
        "failure": trial.user_attrs.get("failure", tags.get("failure_reason")),
        "seconds": seconds,
        "run_id": found.info.run_id if found is not None else None,
    }


def _log_figures(study, tracker) -> None:
    """Optuna's optimisation history and parameter importances (when they can be drawn)."""
    from optuna.visualization import matplotlib as plots

    for name, draw in (
        ("optimization_history.png", plots.plot_optimization_history),
        ("param_importances.png", plots.plot_param_importances),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # too few trials, or trials that tie: the importances are equal, as drawn
            warnings.filterwarnings("ignore", ".*Parameter importances will be equal")
            try:
                axes = draw(study)
            except (ValueError, RuntimeError) as err:  # e.g. importances of one trial
                print(f"tune: no {name}: {err}", file=sys.stderr)
                continue
        figure = axes.figure
        figure.set_size_inches(7, 4.5)
        figure.tight_layout()
        tracker.log_figure(figure, name)
        plt.close(figure)
