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

An image chart lays its runs' images out side by side (256 px each) and wraps
them into rows; a row that does not fit the card's height is cut off. So with
one run that logged images the section has two charts a row; with more, one
chart a row (two runs' images side by side in it, at 1600 px), and its card
height grows with those runs (up to the ten a chart compares), two to a row.
"""

from __future__ import annotations

import json
import math
import time

from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_IMAGES

VIEW_KEY = "attention"
TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
NAME = "Attention"
SECTION = "attention"
COLUMNS = 2  # image charts a row while one run has images: each as wide as its image
RUNS_SHOWN = 10  # the runs a chart compares (`runsCountToCompare`)
RUNS_A_ROW = 2  # runs' images side by side in a chart of the full width (1600 px window)
# A card: its title and step slider, then a row of images (a run's name above its 256 px image).
CARD_FRAME, IMAGE_ROW = 180, 300
CARD_HEIGHT = CARD_FRAME + IMAGE_ROW  # one row; taller than MLflow's default 360 px


def columns(runs: int) -> int:
    """Image charts a row: `COLUMNS` for one run's images, else one (its runs side by side)."""
    return COLUMNS if runs <= 1 else 1


def card_height(runs: int) -> int:
    """The card height (px) that shows the images of `runs` runs whole (up to `RUNS_SHOWN`)."""
    rows = math.ceil(min(max(runs, 1), RUNS_SHOWN) / RUNS_A_ROW)
    return CARD_FRAME + IMAGE_ROW * rows


def route(experiment_id: str) -> str:
    """The UI route (after `#/`) opening the view: the experiment's runs, in chart mode."""
    return f"experiments/{experiment_id}/runs?viewStateShareKey={VIEW_KEY}&compareRunsMode=CHART"


def tag_value(
    keys, step: int, existing: str | None = None, now_ms: int | None = None, runs: int = 1
) -> str:
    """The view's tag: an image chart for each of `keys` and of the charts `existing` (the tag
    as it is) has, all at `step`, tall enough for the images of `runs` runs; `createdAt` is
    kept from `existing`."""
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
                "columns": columns(runs),
                "cardHeight": card_height(runs),
            }
        ],
        "chartsSearchFilter": "",
    }
    envelope = {"name": NAME, "createdAt": created, "updatedAt": now_ms, "state": json.dumps(state)}
    return json.dumps(envelope)


def save(client, experiment_id: str, keys, step: int) -> None:
    """Write the view of `keys` at `step` into the experiment (keeping the charts it has), its
    cards as tall as the images of the experiment's runs that logged some need."""
    existing = client.get_experiment(experiment_id).tags.get(TAG)
    runs = client.search_runs(
        [experiment_id], f"tags.`{MLFLOW_LOGGED_IMAGES}` = 'True'", max_results=RUNS_SHOWN
    )
    value = tag_value(keys, step, existing, runs=len(runs))
    client.set_experiment_tag(experiment_id, TAG, value)


def _card(key: str, step: int) -> dict:
    return {
        "uuid": f"{SECTION}-{key}",
        "type": "IMAGE",
        "runsCountToCompare": RUNS_SHOWN,
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
