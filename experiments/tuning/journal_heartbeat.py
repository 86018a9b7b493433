"""Heartbeats for Optuna's journal file, which keeps none of its own (Optuna 5.1).

`HeartbeatJournalStorage` is a `JournalStorage` with the heartbeat interface of Optuna's RDB
storage (`record_heartbeat`, the stale trials, the stale-trial callback), so
`optuna.storages.fail_stale_trials` fails a journal trial whose worker went silent exactly
as it fails an RDB one. A heartbeat is the trial's system attribute `HEARTBEAT_ATTR`: the
time it was recorded (seconds since the epoch), appended to the journal. A running trial is
stale once neither its last heartbeat nor its start (a trial that never beat) is within
`grace_period` seconds. Times are the writing worker's clock: workers on one machine share
it; workers on several machines sharing the file need clocks that agree within seconds.
"""

from __future__ import annotations

import time

from optuna.storages import JournalStorage
from optuna.storages._heartbeat import BaseHeartbeat  # the interface Optuna's helpers check
from optuna.trial import TrialState

HEARTBEAT_ATTR = "tune_heartbeat"


class HeartbeatJournalStorage(JournalStorage, BaseHeartbeat):
    """A journal storage whose running trials beat every `heartbeat_interval` seconds."""

    def __init__(
        self,
        backend,
        *,
        heartbeat_interval: int,
        grace_period: int,
        heartbeat_stale_trial_callback=None,
    ):
        super().__init__(backend)
        self.heartbeat_interval = heartbeat_interval
        self.grace_period = grace_period
        self.heartbeat_stale_trial_callback = heartbeat_stale_trial_callback

    def record_heartbeat(self, trial_id: int) -> None:
        self.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, time.time())

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        now = time.time()
        return [
            trial._trial_id
            for trial in self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,))
            if now - last_sign_of_life(trial) > self.grace_period
        ]

    def get_heartbeat_interval(self) -> int:
        return self.heartbeat_interval

    def get_heartbeat_stale_trial_callback(self):
        return self.heartbeat_stale_trial_callback


def last_sign_of_life(trial) -> float:
    """When `trial` was last heard of: its last heartbeat or its start, whichever is later
    (a retried trial inherits its dead original's heartbeat, older than its own start)."""
    started = trial.datetime_start.timestamp() if trial.datetime_start else 0.0
    return max(float(trial.system_attrs.get(HEARTBEAT_ATTR, 0.0)), started)
