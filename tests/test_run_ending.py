"""Every run ends in a terminal state with a reason (issue 43)."""

from __future__ import annotations

import pytest
from experiments_helpers import TINY_TASKS, runs, use_store, write_config

from experiments.commands import main
from experiments.tracking import finishing
from experiments.training import run as training_run


def test_an_unexpected_error_ends_the_run_failed_with_its_reason(tmp_path, monkeypatch):
    uri = use_store(tmp_path, monkeypatch)
    config = write_config(tmp_path, TINY_TASKS["needle"], tracking={"log_model": False})

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the final evaluation")

    monkeypatch.setattr(training_run, "_finish", broken)
    with pytest.raises(RuntimeError):  # a bug keeps its traceback
        main(["run", str(config)])
    (run,) = runs(uri)
    assert run.info.status == "FAILED"
    assert run.data.tags["failure_reason"] == "RuntimeError: a bug in the final evaluation"


def test_an_ending_drops_the_reason_tags_an_earlier_ending_left():
    tags = {"killed_by": "SIGTERM", "resume_with": "python -m ...", "failure_reason": "x"}
    assert finishing.stale_tags({**tags, "task": "needle"}, "FINISHED") == list(tags)
    assert finishing.stale_tags(tags, "KILLED") == ["failure_reason"]
    assert finishing.stale_tags(tags, "FAILED") == ["killed_by", "resume_with"]
    assert finishing.stale_tags({"task": "needle"}, "FINISHED") == []
