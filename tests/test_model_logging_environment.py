"""Logging a model does not track the run's environment reads (CI: "Set changed size during iteration")."""

from __future__ import annotations

import os

import pytest
from mlflow.utils.model_utils import env_var_tracker

from experiments.tracking import model_logging

FLAG = "MLFLOW_RECORD_ENV_VARS_IN_MODEL_LOGGING"


class SavesNothing:
    def save(self, path):
        open(path, "wb").close()


def _names_tracked_while_logging(monkeypatch) -> list[set]:
    """What MLflow's tracker collects around a read of os.environ inside each logging call."""
    monkeypatch.setenv("ATTN_RNN_PROBE", "1")
    seen = []

    def logging_call(*args):
        with env_var_tracker() as names:  # what mlflow's Model.log wraps its validation in
            os.environ.get("ATTN_RNN_PROBE")
        seen.append(names)
        return "models:/m"

    monkeypatch.setattr(model_logging, "log_keras_model", logging_call)
    monkeypatch.setattr(model_logging, "log_text_model", logging_call)
    model_logging.log_models(SavesNothing(), {})
    return seen


def test_another_threads_environment_read_cannot_grow_mlflows_set(monkeypatch):
    monkeypatch.delenv(FLAG, raising=False)
    seen = _names_tracked_while_logging(monkeypatch)
    assert seen and all(names == set() for names in seen)
    assert FLAG not in os.environ  # the process's environment as it was


@pytest.mark.parametrize("value, tracked", [("true", {"ATTN_RNN_PROBE"}), ("false", set())])
def test_a_users_own_choice_is_kept(monkeypatch, value, tracked):
    monkeypatch.setenv(FLAG, value)
    seen = _names_tracked_while_logging(monkeypatch)
    assert seen and all(names == tracked for names in seen)
    assert os.environ[FLAG] == value
