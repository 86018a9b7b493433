"""The experiment's saved MLflow UI view of its stepped attention images, *Attention*.

MLflow 3.17's image chart writes every run parameter above the image (its
"Show run parameters" switch is on by default: mlflow/mlflow#23512, #23705),
and in a run's Model metrics tab the ~60 parameters of a run fill the chart
card, the image below them out of sight. Those charts' settings live in the
browser only (localStorage), but the experiment page's *saved views* are
stored on the server: an experiment tag `mlflow.sharedViewState.<key>`
holding `{name, createdAt, updatedAt, state}`, `state` the JSON of the page's
chart layout. The runner saves one, *Attention* (the experiment page's
Views menu, or `route`): a section of image charts, one per probe, the run
parameters hidden, at the step of the newest images.
"""

from __future__ import annotations

import json
import time

VIEW_KEY = "attention"
TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
NAME = "Attention"
SECTION = "attention"
COLUMNS, CARD_HEIGHT = 2, 480  # two image charts a row, taller than the default 360 px


def route(experiment_id: str) -> str:
    """The UI route (after `#/`) opening the view: the experiment's runs, in chart mode."""
    return f"experiments/{experiment_id}/runs?viewStateShareKey={VIEW_KEY}&compareRunsMode=CHART"


def tag_value(keys, step: int, existing: str | None = None, now_ms: int | None = None) -> str:
    """The view's tag: an image chart for each of `keys` and of the charts `existing` (the tag
    as it is) has, all at `step`; `createdAt` is kept from `existing`."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    created, known = now_ms, []
    try:
        envelope = json.loads(existing) if existing else None
        created = int(envelope["createdAt"])
        known = [card["imageKeys"][0] for card in json.loads(envelope["state"])["compareRunCharts"]]
    except (ValueError, TypeError, KeyError, IndexError):
        pass  # none yet, or not one this module wrote: written anew
    state = {
        "compareRunCharts": [_card(key, step) for key in sorted({*known, *keys}, key=_natural)],
        "compareRunSections": [
            {
                "uuid": SECTION,
                "name": NAME,
                "display": True,
                "isReordered": False,
                "deleted": False,
                "isGenerated": False,
                "columns": COLUMNS,
                "cardHeight": CARD_HEIGHT,
            }
        ],
        "chartsSearchFilter": "",
    }
    envelope = {"name": NAME, "createdAt": created, "updatedAt": now_ms, "state": json.dumps(state)}
    return json.dumps(envelope)


def save(client, experiment_id: str, keys, step: int) -> None:
    """Write the view of `keys` at `step` into the experiment (keeping the charts it has)."""
    existing = client.get_experiment(experiment_id).tags.get(TAG)
    client.set_experiment_tag(experiment_id, TAG, tag_value(keys, step, existing))


def _card(key: str, step: int) -> dict:
    return {
        "uuid": f"{SECTION}-{key}",
        "type": "IMAGE",
        "runsCountToCompare": 10,
        "metricSectionId": SECTION,
        "deleted": False,
        "isGenerated": False,
        "imageKeys": [key],
        "step": int(step),
        "showRunParams": False,
    }


def _natural(key: str) -> tuple:
    """`attention_probe_2` before `attention_probe_10`."""
    stem, _, number = key.rpartition("_")
    return (stem, int(number)) if number.isdigit() else (key, -1)
