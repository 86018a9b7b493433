"""A notice about a task's data (rows repeated, inputs cut) is printed once per process, not
once per run of a sweep or trial of a study (issue 50); each run still logs the counts."""

from __future__ import annotations

from experiments_helpers import write_config

from experiments import config as config_lib
from experiments.training import notices, run


class _Tracker:
    """What `_log_start` calls on a tracker; keeps the metrics."""

    def __init__(self):
        self.metrics = {}

    def log_params(self, params):
        pass

    def set_tags(self, tags):
        pass

    def log_config(self, cfg):
        pass

    def log_dict(self, data, path):
        pass

    def log_inputs(self, inputs):
        pass

    def log_metrics(self, metrics, step):
        self.metrics.update(metrics)


def _duplicated_texts(folder):
    path = folder / "dup.csv"
    rows = [f"item{i} was seen,{'pos' if i % 2 else 'neg'}" for i in range(30)]
    path.write_text("text,label\n" + "\n".join(rows + rows[:10]) + "\n")
    return path


def test_the_notice_is_printed_once_for_two_runs_on_the_same_data(tmp_path, capsys):
    task = {"name": "textcls", "path": str(_duplicated_texts(tmp_path)), "max_length": 2}
    config = write_config(tmp_path, task)
    prepared = run.validate(config_lib.load_config(config))
    trackers = [_Tracker(), _Tracker()]
    for tracker in trackers:  # two trials of a study, in one process
        run._log_start(tracker, prepared.cfg, prepared.task, tmp_path / "ck")
    out = capsys.readouterr().out
    assert out.count("textcls: 10 rows repeat an earlier row's input") == 1
    assert out.count("texts are longer than 2 tokens and were cut there") == 1
    assert [t.metrics["duplicate_rows"] for t in trackers] == [10, 10]  # each run logs them


def test_once_prints_each_text_once(capsys):
    for text in ("a", "b", "a"):
        notices.once(text)
    assert capsys.readouterr().out == "a\nb\n"
