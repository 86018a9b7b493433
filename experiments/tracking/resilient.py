"""Tracking that survives a remote MLflow server going away.

- `ResilientTracker`: the runner's `Tracker` whose MLflow calls are retried
  with exponential backoff; a call that still fails with a transient error
  (see `transient.is_transient`: the server unreachable or busy, never a
  local error) is written to the run's local spool (`<checkpoint
  folder>/spool`, see `spool`) and training goes on. After a failure the
  link stays "offline" for a cool-down period, so an outage costs one round
  of retries, not one per call. `flush()` uploads the spool (done
  automatically at the end of the run, within the budget); `python -m
  experiments sync RUN_ID` does the rest later.
- `end_run`: end the active run in bounded time, even when the server is
  down or crawling (the final status is then spooled too), and stop the
  tracker's artifact thread.

Nothing is lost (every failed call is spooled) and nothing is logged twice
(metrics carry an explicit step and are checked against the run's history
before a spooled copy is uploaded; artifacts and tags are overwritten in
place).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import time
from pathlib import Path

import keras
import mlflow
import numpy as np
import pandas as pd
import yaml
from mlflow.exceptions import MlflowException

import keras_attn_rnn  # noqa: F401 - registers the library's serializable classes for load_keras
from experiments.errors import Offline, StorageError
from experiments.tracking import finishing, model_logging, server, store
from experiments.tracking import spool as spool_lib
from experiments.tracking.tracker import Tracker
from experiments.tracking.transient import is_transient, raise_if_storage

DEFAULT_BUDGET_SECONDS = 15.0
SPOOLED_MODEL_URI = "spooled: run `python -m experiments sync RUN_ID` to upload"


class Link:
    """Calls with retries and exponential backoff, a time budget, then an offline cool-down.

    Args:
        attempts: tries per call while online.
        backoff: first pause in seconds; doubled after each failed try.
        cooldown: seconds during which calls fail at once after a call ran
            out of tries or the budget ran out (training is not slowed down
            by a dead or crawling server).
        budget: seconds the run may spend waiting on the server per
            `window` seconds (successful calls included; default
            `ATTN_RNN_TRACKING_BUDGET`, else 15). The budget is a bucket
            that refills at `budget / window` per second, up to `budget`:
            a call retries only while it holds credit; once it is spent,
            the link goes offline (and calls are spooled) until the credit
            is back, and for at least `cooldown`. A slow server therefore
            costs a run at most `budget` per `window` over any stretch of
            time, plus one full bucket and one call in flight (one HTTP
            timeout).
        artifact_root: `() -> str | None`, the local folder of the run's
            artifact store (None: not local), named when a full disk fails
            a call (see `transient.raise_if_storage`).
    """

    window = 60.0

    def __init__(
        self,
        attempts: int = 3,
        backoff: float = 0.5,
        cooldown: float = 20.0,
        budget: float | None = None,
        artifact_root=None,
    ):
        self.attempts, self.backoff, self.cooldown = attempts, backoff, cooldown
        self.artifact_root = artifact_root
        if budget is None:
            budget = float(os.environ.get("ATTN_RNN_TRACKING_BUDGET", DEFAULT_BUDGET_SECONDS))
        self.budget = budget
        self.offline_until = 0.0
        self.warned = False
        self._credit = budget  # seconds of waiting the run may still spend now
        self._refilled = time.monotonic()
        self._untimed = False

    def call(self, fn, *args, **kwargs):
        if time.monotonic() < self.offline_until:
            raise Offline("tracking server marked offline")
        last = None
        for attempt in range(self.attempts):
            started = time.monotonic()
            try:
                result = fn(*args, **kwargs)
            except Exception as err:  # noqa: BLE001 - filtered by is_transient
                self._spend(started, failed=True)
                raise_if_storage(err, self.artifact_root)  # a full local store is no outage
                if not is_transient(err):
                    raise
                last = err
                if self._left() <= 0:
                    break
                if attempt + 1 < self.attempts:
                    paused = time.monotonic()
                    time.sleep(min(self.backoff * 2**attempt, self._left()))
                    self._spend(paused, failed=True)  # waiting to retry is waiting too
                continue
            self._spend(started)
            if self._left() <= 0:
                self._go_offline(f"slow: over {self.budget:g} s of waiting per {self.window:g} s")
            else:
                self.offline_until = 0.0
            return result
        self._go_offline(type(last).__name__)
        raise Offline(str(last)) from last

    def untimed(self, fn, *args, **kwargs):
        """`call` for work that is slow by nature (logging a model, uploading the spool):
        a try that succeeds is outside the time budget; a failed one, and the pause
        before the next, count against it as any call's do (a server that stopped
        answering costs one try, not `attempts` of them)."""
        self._untimed = True
        try:
            return self.call(fn, *args, **kwargs)
        finally:
            self._untimed = False

    def retry_now(self) -> bool:
        """Lift the cool-down if the budget has credit left (the end of a run tries the
        server again after an outage, not after a slow server spent the budget); return
        whether calls may go to the server now."""
        if self._left() > 0:
            self.offline_until = 0.0
        return time.monotonic() >= self.offline_until

    def _spend(self, started: float, failed: bool = False) -> None:
        if self._untimed and not failed:
            return
        now = time.monotonic()
        self._refill(now)
        self._credit -= now - started

    def _refill(self, now: float) -> None:
        rate = self.budget / self.window
        self._credit = min(self.budget, self._credit + (now - self._refilled) * rate)
        self._refilled = now

    def _left(self) -> float:
        self._refill(time.monotonic())
        return self._credit

    def _go_offline(self, why: str) -> None:
        now = time.monotonic()
        self._refill(now)
        # Offline until the overspent credit has come back (never a fresh budget).
        overspent = -self._credit if self._credit < 0 and self.budget > 0 else 0.0
        refill = overspent * self.window / self.budget if overspent else 0.0
        self.offline_until = now + max(self.cooldown, refill)
        if not self.warned:
            self.warned = True
            print(
                f"warning: MLflow tracking server not answering ({why}); "
                "logging to the local spool and continuing",
                file=sys.stderr,
            )


# --- the spooling client ----------------------------------------------------------


class SpoolingClient:
    """Wraps an `MlflowClient`: its logging calls are retried, then spooled.

    Reads (and any method not listed here) go straight to the wrapped client.
    """

    def __init__(self, client, spool: spool_lib.Spool, link: Link):
        self._client, self._spool, self._link = client, spool, link
        self.local_steps: dict[str, set[int]] = {}

    def __getattr__(self, name):
        return getattr(self._client, name)

    def _try(self, fn, *args, **kwargs) -> bool:
        """True when the call went through; False when it must be spooled."""
        try:
            self._link.call(fn, *args, **kwargs)
        except Offline:
            return False
        return True

    def log_batch(self, run_id, metrics=(), params=(), tags=(), **kwargs):
        metrics, params, tags = list(metrics), list(params), list(tags)
        for m in metrics:
            self.local_steps.setdefault(m.key, set()).add(int(m.step))
        if self._try(self._client.log_batch, run_id, metrics, params, tags, **kwargs):
            return
        if metrics:
            rows = [[m.key, m.value, m.timestamp, m.step] for m in metrics]
            self._spool.append({"op": "metrics", "metrics": rows})
        if params:
            self._spool.append({"op": "params", "params": {p.key: p.value for p in params}})
        if tags:
            self._spool.append({"op": "tags", "tags": {t.key: t.value for t in tags}})

    def log_param(self, run_id, key, value, **kwargs):
        if not self._try(self._client.log_param, run_id, key, value, **kwargs):
            self._spool.append({"op": "params", "params": {key: str(value)}})

    def set_tag(self, run_id, key, value, **kwargs):
        if not self._try(self._client.set_tag, run_id, key, value, **kwargs):
            self._spool.append({"op": "tags", "tags": {key: str(value)}})

    def _spool_bytes(self, artifact_path: str, write, op: str = "artifact") -> None:
        """Spool a file that `write(path)` writes, to be uploaded as `artifact_path`."""
        name = self._spool.write_file(Path(artifact_path).name, write)
        self._spool.append({"op": op, "file": name, "path": artifact_path})

    def log_text(self, run_id, text, artifact_file):
        if not self._try(self._client.log_text, run_id, text, artifact_file):
            self._spool_bytes(artifact_file, lambda p: p.write_text(text, encoding="utf-8"))

    def log_dict(self, run_id, dictionary, artifact_file):
        if self._try(self._client.log_dict, run_id, dictionary, artifact_file):
            return

        def write(path: Path) -> None:
            if Path(artifact_file).suffix in (".yml", ".yaml"):
                text = yaml.safe_dump(dictionary, indent=2, default_flow_style=False)
            else:
                text = json.dumps(dictionary, indent=2, default=str)
            path.write_text(text, encoding="utf-8")

        self._spool_bytes(artifact_file, write)

    def log_figure(self, run_id, figure, artifact_file, **kwargs):
        if self._try(self._client.log_figure, run_id, figure, artifact_file, **kwargs):
            return
        fmt = Path(artifact_file).suffix.lstrip(".") or "png"
        self._spool_bytes(artifact_file, lambda p: figure.savefig(p, format=fmt))

    def log_table(self, run_id, data, artifact_file):
        if self._try(self._client.log_table, run_id, data, artifact_file):
            return
        frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
        payload = json.dumps(json.loads(frame.to_json(orient="split", index=False)))
        self._spool_bytes(artifact_file, lambda p: p.write_text(payload, "utf-8"), op="table")

    def log_image(self, run_id, image, key=None, step=None, timestamp=None, **kwargs):
        if self._try(
            self._client.log_image,
            run_id,
            image,
            key=key,
            step=step,
            timestamp=timestamp,
            **kwargs,
        ):
            return

        def write(path: Path) -> None:
            with open(path, "wb") as handle:
                np.save(handle, np.asarray(image), allow_pickle=False)

        name = self._spool.write_file(f"{key}-{step}.npy", write)
        record = {"op": "image", "file": name, "key": key, "step": step, "timestamp": timestamp}
        self._spool.append(record)

    def log_inputs(self, run_id, datasets=None, **kwargs):
        if self._try(self._client.log_inputs, run_id, datasets=datasets, **kwargs):
            return
        records = [spool_lib.dataset_record(item) for item in datasets or []]
        self._spool.append({"op": "inputs", "inputs": records})

    def log_artifact(self, run_id, local_path, artifact_path=None):
        if self._try(self._client.log_artifact, run_id, local_path, artifact_path):
            return
        name = Path(local_path).name
        target = f"{artifact_path}/{name}" if artifact_path else name
        self._spool_bytes(target, lambda p: shutil.copyfile(local_path, p))


class ResilientTracker(Tracker):
    """The runner's `Tracker`, with retries and a local spool under `folder/spool`."""

    def __init__(self, client, run_id: str, folder: Path, link: Link | None = None):
        self.raw_client = client
        self.link = link or Link()
        if self.link.artifact_root is None:
            self.link.artifact_root = self.artifact_root
        self.spool = spool_lib.Spool(Path(folder) / spool_lib.SPOOL_DIR)
        super().__init__(SpoolingClient(client, self.spool, self.link), run_id)

    def artifact_root(self) -> str | None:
        """The local folder of the run's artifact store (its experiment's artifact
        location), or None when it is not a local folder."""
        run = self.raw_client.get_run(self.run_id)
        location = self.raw_client.get_experiment(run.info.experiment_id).artifact_location
        folder = store.local_store_dir(location)
        return None if folder is None else str(folder)

    def logged_steps(self, key: str) -> set[int]:
        """Steps of `key` on the server (or logged by this process) plus spooled ones."""
        try:
            history = self.link.call(self.raw_client.get_metric_history, self.run_id, key)
            steps = {m.step for m in history}
        except Offline:
            steps = set(self.client.local_steps.get(key, set()))
        return steps | self.spool.spooled_steps(key)

    def save_image_view(self, keys, step: int) -> None:
        """Best effort, never spooled: offline, the next step's images try again; a store that
        refuses the experiment tag (a permission) costs a warning, never the run."""
        try:
            self.link.call(super().save_image_view, keys, step)
        except Offline:
            pass
        except MlflowException as err:
            print(f"warning: the experiment's Attention view was not saved: {err}", file=sys.stderr)

    def log_model(self, model, card: dict) -> dict[str, str]:
        """Log both models; offline, spool the `.keras` file with the card (JSON, in the record)."""
        try:
            return self.link.untimed(super().log_model, model, card)
        except Offline:
            pass
        name = self.spool.write_file("model.keras", model.save)  # the tmp keeps .keras
        self.spool.append({"op": "model", "file": name, "card": card})
        return {tag: SPOOLED_MODEL_URI for tag in model_logging.model_tags(card)}

    def flush(self, within_budget: bool = False) -> bool:
        """Finish the artifact thread, upload the spool; True when nothing is left in it.

        `within_budget` (the end of a run): the upload is tried only if the link's
        budget has credit left, each request counts against it (a spooled model as
        one `untimed` call), and what the budget does not cover stays spooled.
        """
        try:
            self.wait()
        except Exception as err:  # noqa: BLE001 - the run must still end (and not mask an error)
            print(f"warning: logging artifacts failed: {err!r}", file=sys.stderr)
        if not self.spool.exists():
            return True

        def log_model(path, card):
            return Tracker.log_model(self, load_keras(path), card)

        try:
            if not within_budget:
                self.link.offline_until = 0.0
                upload = functools.partial(self.link.untimed, spool_lib.replay)
                upload(self.spool, self.raw_client, self.run_id, log_model=log_model)
            elif not self.link.retry_now():
                raise Offline("the tracking time budget is spent")
            else:
                budgeted = functools.partial(self.link.untimed, log_model)
                client = Budgeted(self.raw_client, self.link)
                spool_lib.replay(self.spool, client, self.run_id, log_model=budgeted)
        except Exception as err:  # noqa: BLE001 - never fail a finished run over its spool
            if not isinstance(err, Offline):
                print(f"warning: uploading the spool failed: {err!r}", file=sys.stderr)
            left = len(self.spool.pending())
            print(
                f"warning: {left} tracking record(s) of run {self.run_id} stay spooled in "
                f"{self.spool.folder}; upload them with `python -m experiments sync "
                f"{self.run_id}`",
                file=sys.stderr,
            )
            return False
        bad = self.spool.read().bad
        if bad:
            print(
                f"warning: {len(bad)} spooled record(s) of run {self.run_id} are unreadable "
                f"and were not uploaded; see {self.spool.quarantine(bad)}, then run `python -m "
                f"experiments sync {self.run_id} --skip-bad`",
                file=sys.stderr,
            )
            return False
        self.spool.clear()
        return True

    def close(self) -> None:
        """Stop the artifact thread, then fsync and close the spool's files."""
        super().close()
        self.spool.close()


class Budgeted:
    """A client whose every call goes through `link.call`: retried, timed, and refused
    (`Offline`) once the link's budget is spent."""

    def __init__(self, client, link: Link):
        self._client, self._link = client, link

    def __getattr__(self, name):
        return functools.partial(self._link.call, getattr(self._client, name))


def load_keras(path) -> object:
    """Load a `.keras` file with `safe_mode=True` (no lambdas, no arbitrary code)."""
    return keras.saving.load_model(path, safe_mode=True)


def end_run(tracker, status: str) -> None:
    """Upload the spool, delete the tags of an earlier ending that do not fit this one
    (`finishing.stale_tags`: a resumed run's), then end the active run with `status`.

    All of it waits on the server within the link's budget (see `flush`); once
    the budget is spent, the status gets one try of `LAST_TRY_SECONDS`, then
    goes to the spool (`sync` sets it), so the end of a run takes bounded time
    however slow the server. The tracker's artifact thread is stopped in any case.
    """
    try:
        _end_run(tracker, status)
    finally:
        tracker.close()


# Seconds the first request that ends the run may take (MLflow's HTTP timeout); after that,
# the status goes through the link (within its budget) or to the spool.
LAST_TRY_SECONDS = 1


def _end_run(tracker: ResilientTracker, status: str) -> None:
    tracker.flush(within_budget=True)
    _drop_stale_tags(tracker, status)
    try:
        with server.request_timeout(LAST_TRY_SECONDS):
            mlflow.end_run(status)  # pops the local active run first, then tells the server
        return
    except Exception as err:  # noqa: BLE001 - only an unreachable server is tolerated
        raise_if_storage(err)
        if not is_transient(err):
            raise
    end_time = int(time.time() * 1000)
    try:
        tracker.link.retry_now()
        tracker.link.call(tracker.raw_client.set_terminated, tracker.run_id, status, end_time)
    except Offline:
        try:
            tracker.spool.append({"op": "status", "status": status, "end_time": end_time})
        except StorageError as err:  # keep the error that ended the run, if any
            print(f"warning: the final status {status} was not spooled: {err}", file=sys.stderr)
            return
        print(
            f"warning: run {tracker.run_id} ended {status} while the tracking server was "
            "unreachable or slower than its time budget allows; run `python -m experiments "
            f"sync {tracker.run_id}` to upload",
            file=sys.stderr,
        )


def _drop_stale_tags(tracker: ResilientTracker, status: str) -> None:
    """Delete the tags an earlier ending of the run left that do not fit `status` (left in
    place when the server does not answer within the budget)."""
    link, client = tracker.link, tracker.raw_client
    with contextlib.suppress(Offline):
        tags = link.call(client.get_run, tracker.run_id).data.tags
        for key in finishing.stale_tags(tags, status):
            link.call(client.delete_tag, tracker.run_id, key)
