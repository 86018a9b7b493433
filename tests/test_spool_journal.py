"""The spool's journal: whole records or none, damage found and kept, files confined (issue 30)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest
from experiments_helpers import store_with_run
from scaleout_helpers import Down, FakeClock, child_env

from experiments.commands import main
from experiments.tracking import resilient, run_folder
from experiments.tracking import spool as spool_lib


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A local store with one run, and the runner pointed at it."""
    return *store_with_run(tmp_path, monkeypatch, "spool"), tmp_path


def _spool(folder, run_id):
    """The spool in run `run_id`'s checkpoint folder (marked as the runner marks it)."""
    run_folder.claim(folder / "ck" / run_id, run_id)
    return spool_lib.Spool(folder / "ck" / run_id / spool_lib.SPOOL_DIR)


FULL_DISK = r"""
import resource, sys
from experiments.tracking import spool
s = spool.Spool(sys.argv[1])
s.append({"op": "tags", "tags": {"a": "1"}})
s.sync()
room = s.journal.stat().st_size + 20  # the next record gets 20 bytes: a short write
resource.setrlimit(resource.RLIMIT_FSIZE, (room, resource.RLIM_INFINITY))
try:
    s.append({"op": "tags", "tags": {"b": "x" * 100}})
    print("append returned")
except Exception as err:
    print("raised", type(err).__name__, err)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
s.append({"op": "tags", "tags": {"c": "3"}})
s.close()
"""


def test_a_short_write_fails_loudly_and_never_tears_the_next_record(tmp_path):
    # RLIMIT_FSIZE: the kernel writes what fits (a short write), then refuses with EFBIG.
    folder = tmp_path / "spool"
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(folder)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "raised JournalWriteError" in done.stdout, done.stdout
    assert str(folder / "journal.jsonl") in done.stdout  # which file
    reading = spool_lib.Spool(folder).read()
    assert [r["tags"] for r in reading.records] == [{"a": "1"}, {"c": "3"}]
    assert reading.bad == []  # the failed record left nothing behind


FULL_DISK_IMAGE = r"""
import resource, sys
import numpy as np
from experiments.tracking import resilient

class Down:
    def __getattr__(self, name):
        def call(*args, **kwargs):
            raise ConnectionError("server down")
        return call

tracker = resilient.ResilientTracker(Down(), "r" * 32, sys.argv[1], resilient.Link(attempts=1))
tracker.log_metrics({"loss": 1.0}, 1)
tracker.spool.sync()
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, resource.RLIM_INFINITY))
try:
    tracker.log_image(np.zeros((256, 256, 3), "uint8"), "attention_probe_0", 1)  # 196 KB
except Exception as err:
    print("raised", type(err).__name__, err)
"""


def test_a_full_disk_under_the_spool_is_one_clear_error_and_loses_nothing(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK_IMAGE, str(tmp_path / "ck")],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("raised StorageError"), done.stdout
    assert "requested and" not in done.stdout.split("(")[0]  # numpy's message only as the cause
    assert str(tmp_path / "ck" / "spool") in done.stdout and "Free space" in done.stdout
    spool = spool_lib.Spool(tmp_path / "ck" / "spool")
    assert [r["op"] for r in spool.records()] == ["metrics"]  # what was safe stays safe
    assert list((spool.folder / "files").iterdir()) == []  # no partial file left behind


def test_records_are_framed_and_damage_is_found_anywhere(tmp_path):
    spool = spool_lib.Spool(tmp_path / "spool")
    for step in range(3):
        spool.append({"op": "metrics", "metrics": [["loss", 0.5, 0, step]]})
    spool.close()
    lines = spool.journal.read_bytes().split(b"\n")
    assert all(line.startswith(b"@") for line in lines[:3])
    damaged = bytearray(lines[1])
    damaged[-3] ^= 0x01  # one bit flipped inside the JSON of record 1
    lines[1] = bytes(damaged)
    spool.journal.write_bytes(b"\n".join(lines))
    reading = spool.read()
    assert [r["seq"] for r in reading.records] == [0, 2]
    ((bad),) = reading.bad
    assert bad.number == 2 and "checksum" in bad.reason


def test_old_unframed_journals_are_still_read(tmp_path):
    spool = spool_lib.Spool(tmp_path / "spool")
    spool.folder.mkdir()
    old = [{"seq": 0, "op": "tags", "tags": {"a": "1"}}, {"seq": 1, "op": "params", "params": {}}]
    spool.journal.write_text("".join(json.dumps(r) + "\n" for r in old), encoding="utf-8")
    assert spool.records() == old
    assert spool.append({"op": "tags", "tags": {}})["seq"] == 2
    spool.close()
    assert [r["seq"] for r in spool.records()] == [0, 1, 2]


def test_a_torn_last_line_is_ended_and_kept_not_merged(tmp_path):
    spool = spool_lib.Spool(tmp_path / "spool")
    spool.append({"op": "tags", "tags": {"a": "1"}})
    spool.close()
    with open(spool.journal, "ab") as handle:
        handle.write(b'{"seq": 1, "op": "ta')  # a crash mid-line
    again = spool_lib.Spool(spool.folder)  # the next process appends
    again.append({"op": "tags", "tags": {"c": "3"}})
    again.close()
    assert [r["tags"] for r in again.records()] == [{"a": "1"}, {"c": "3"}]
    assert [b.number for b in again.read().bad] == [2]  # kept for the user, not dropped


def test_unreadable_records_are_kept_reported_and_skipped_only_when_asked(store, capsys):
    client, run_id, folder = store
    spool = _spool(folder, run_id)
    spool.append({"op": "metrics", "metrics": [["loss", 1.0, 0, 1]]})
    spool.close()
    with open(spool.journal, "ab") as handle:
        handle.write(b'{"seq": 1, "op": "metrics", "metr\n')  # damaged in the middle
        handle.write(b'{"seq": 2, "op": "metrics", "metrics": [[1]]}\n')  # malformed
    spool.append({"op": "metrics", "metrics": [["loss", 0.5, 0, 2]]})
    spool.append({"op": "tags", "tags": {"k": "v"}})
    spool.close()
    ck = str(spool.folder.parent)

    assert main(["sync", run_id, "--checkpoint-dir", ck]) == 1
    err = capsys.readouterr().err
    assert "2 spooled record(s) are unreadable" in err and "--skip-bad" in err
    assert spool.journal.is_file()  # nothing not uploaded was deleted
    quarantined = [json.loads(line) for line in spool.quarantine_file.read_text().splitlines()]
    assert [q["line"] for q in quarantined] == [2, 3]
    assert "metrics" in quarantined[1]["reason"]  # a malformed record: no TypeError
    steps = sorted(m.step for m in client.get_metric_history(run_id, "loss"))
    assert steps == [1, 2] and client.get_run(run_id).data.tags["k"] == "v"
    assert "2 unreadable record(s)" in client.get_run(run_id).data.tags["spool_quarantine"]

    assert main(["sync", run_id, "--checkpoint-dir", ck]) == 1  # still refused, nothing twice
    assert sorted(m.step for m in client.get_metric_history(run_id, "loss")) == [1, 2]

    assert main(["sync", run_id, "--checkpoint-dir", ck, "--skip-bad"]) == 0
    out = capsys.readouterr().out
    assert "skipped 2 unreadable record(s)" in out
    assert not spool.folder.exists()
    (skipped,) = spool.folder.parent.glob("spool-skipped-*")
    lines = (skipped / spool_lib.QUARANTINE).read_text().splitlines()
    assert [json.loads(line)["line"] for line in lines] == [2, 3]


def test_skip_bad_keeps_the_files_of_the_records_it_drops(store, capsys):
    # Issue 43, item 6: a damaged record's file, intact in files/, was deleted with the spool.
    client, run_id, folder = store
    spool = _spool(folder, run_id)
    tracker = resilient.ResilientTracker(
        Down(), run_id, spool.folder.parent, resilient.Link(attempts=1)
    )
    tracker.log_text("uploaded", "notes/a.txt")
    tracker.log_text("only copy", "notes/b.txt")
    tracker.log_metrics({"loss": 1.0}, 1)
    tracker.close()
    lines = spool.journal.read_bytes().split(b"\n")
    assert lines[1].endswith(b'"path": "notes/b.txt"}')
    damaged = bytearray(lines[1])
    damaged[-4] ^= 0x01  # in the artifact path, not in the file name
    lines[1] = bytes(damaged)
    spool.journal.write_bytes(b"\n".join(lines))
    (kept_name,) = (p.name for p in (spool.folder / "files").iterdir() if "b.txt" in p.name)
    ck = str(spool.folder.parent)

    assert main(["sync", run_id, "--checkpoint-dir", ck, "--skip-bad"]) == 0
    (skipped,) = spool.folder.parent.glob("spool-skipped-*")
    assert (skipped / "files" / kept_name).read_text() == "only copy"  # kept, whole
    out = capsys.readouterr().out
    assert f"skipped 1 unreadable record(s), kept with their files in {skipped}" in out
    assert not spool.folder.exists()
    assert [p.name for p in (skipped / "files").iterdir()] == [kept_name]  # not what went up
    (bad,) = [json.loads(line) for line in (skipped / spool_lib.QUARANTINE).open()]
    assert bad["line"] == 2 and kept_name in bad["raw"]  # the list names the file
    assert [a.path for a in client.list_artifacts(run_id, "notes")] == ["notes/a.txt"]
    assert [m.step for m in client.get_metric_history(run_id, "loss")] == [1]


def test_a_record_naming_a_file_outside_the_spool_is_never_uploaded(store, tmp_path, capsys):
    client, run_id, folder = store
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    spool = _spool(folder, run_id)
    (spool.folder / "files").mkdir(parents=True)
    (spool.folder / "files" / "000001-0000-link.txt").symlink_to(secret)
    escape = os.path.relpath(secret, spool.folder / "files")
    spool.append({"op": "artifact", "file": escape, "path": "stolen.txt"})
    spool.append({"op": "artifact", "file": "000001-0000-link.txt", "path": "linked.txt"})
    spool.append({"op": "table", "file": "/etc/hostname", "path": "host.json"})
    spool.close()
    assert main(["sync", run_id, "--checkpoint-dir", str(spool.folder.parent)]) == 1
    assert "3 spooled record(s) are unreadable" in capsys.readouterr().err
    assert client.list_artifacts(run_id) == []
    with pytest.raises(Exception, match="not a plain file name"):
        spool.file(escape)


class Slow:
    """An MlflowClient whose every call succeeds, `delay` seconds late."""

    def __init__(self, client, delay: float):
        self.client, self.delay, self.calls = client, delay, []

    def __getattr__(self, name):
        target = getattr(self.client, name)

        def call(*args, **kwargs):
            self.calls.append(name)
            time.sleep(self.delay)
            return target(*args, **kwargs)

        return call


def test_a_slow_server_costs_the_run_at_most_its_time_budget_then_spools(store, monkeypatch):
    client, run_id, folder = store
    monkeypatch.setenv("ATTN_RNN_TRACKING_BUDGET", "1")
    slow = Slow(client, delay=0.5)
    tracker = resilient.ResilientTracker(slow, run_id, folder / "ck", resilient.Link(cooldown=60))
    tracker.set_tags({"a": 1, "b": 2, "c": 3})
    assert slow.calls == ["log_batch"]  # three tags, one request
    started = time.monotonic()
    for step in range(1, 21):
        tracker.log_metrics({"loss": 1.0 / step}, step)
    elapsed = time.monotonic() - started
    assert elapsed < 5, f"20 slow calls took {elapsed:.1f} s"  # 10 s without a budget
    assert tracker.spool.pending()  # the rest waits in the spool
    slow.delay = 0.0
    assert tracker.flush()
    assert sorted(m.step for m in client.get_metric_history(run_id, "loss")) == list(range(1, 21))
    assert client.get_run(run_id).data.tags["c"] == "3"


def test_a_crawling_server_costs_at_most_the_budget_per_minute_over_a_long_run(monkeypatch):
    # Every request answers after 30 s; training asks once a second for an hour.
    # A cool-down must not hand out a fresh budget: 15 s per minute, not per cool-down.
    clock = FakeClock()
    monkeypatch.setattr(resilient, "time", clock)
    link = resilient.Link(budget=15, cooldown=20)
    waited = []

    def answer_in_30_s():
        clock.sleep(30)
        waited.append(30)

    started = clock.now
    while clock.now - started < 3600:
        clock.sleep(1)
        with contextlib.suppress(resilient.Offline):
            link.call(answer_in_30_s)
    minutes = (clock.now - started) / 60
    # 15 s a minute, plus the full bucket at the start and one 30 s call in flight
    assert sum(waited) <= 15 * minutes + 15 + 30, f"{sum(waited)} s waited in {minutes:.0f} min"
    assert sum(waited) >= 15 * minutes - 60  # and the link does come back to the server
