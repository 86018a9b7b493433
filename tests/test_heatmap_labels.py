"""Every heatmap a run logs names both axes (issue 50): the y-axis says what a row is, the
kind's `heatmap_rows` (or, for a long text drawn as lines, where each line starts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from experiments_helpers import TINY, TINY_TASKS

from experiments import config as config_lib
from experiments.training import callbacks, run

ROWS = {
    "reverse": "target token (decoder step)",
    "needle": "pooling query (the prediction)",
    "lm": "token predicting the next (query)",
}


class _Tracker:
    def __init__(self):
        self.figures = {}

    def submit(self, function, *args):
        function(*args)

    def log_figure(self, figure, path):
        self.figures[path] = figure


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_kind_s_heatmaps_name_their_rows(name):
    prepared = run.validate(config_lib.validate({"task": TINY_TASKS[name], **TINY}))
    task = prepared.task
    model = task.kind.build_model(prepared.cfg, task)
    tracker = _Tracker()
    callbacks.log_heatmaps(tracker, model, task, "heatmaps/final", epoch=1)
    assert sorted(tracker.figures) == ["heatmaps/final/probe_0.png"]
    (axes, *_) = tracker.figures["heatmaps/final/probe_0.png"].axes
    assert axes.get_ylabel() == ROWS[name] == task.kind.heatmap_rows
    assert axes.get_xlabel() == "attended position"


def test_a_long_text_drawn_as_lines_names_where_each_line_starts():
    weights = [[1 / 40] * 40]
    figure = callbacks.labelled_heatmap(
        {"weights": weights, "source_tokens": ["w"] * 40, "target_tokens": ["q"]}, "rows"
    )
    assert figure.axes[0].get_ylabel() == "position of the line's first token"
    short = callbacks.labelled_heatmap(
        {"weights": [[0.5, 0.5]], "source_tokens": ["a", "b"], "target_tokens": ["q"]}, "rows"
    )
    assert short.axes[0].get_ylabel() == "rows"


def test_the_ui_guide_says_which_runs_hold_probes_html():
    """docs/guides/mlflow-ui.md names `probes.html` as a classifier's, which only the
    classification kind writes."""
    page = (Path(__file__).parents[1] / "docs" / "guides" / "mlflow-ui.md").read_text()
    sentence = " ".join(page.split())
    assert "a classifier's run also holds `probes.html`" in sentence
    assert sentence.count("probes.html") == 1
    written = {}
    for name in ("needle", "reverse"):
        prepared = run.validate(config_lib.validate({"task": TINY_TASKS[name], **TINY}))
        task = prepared.task
        model = task.kind.build_model(prepared.cfg, task)
        written[name] = set(task.kind.final_artifacts(model, task, task.test).texts)
    assert "probes.html" in written["needle"] and "probes.html" not in written["reverse"]
