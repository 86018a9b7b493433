"""A local spool of tracking calls that could not reach the MLflow server.

Layout under `<checkpoint folder>/spool/`:

- `journal.jsonl`: one JSON record per spooled call, in order, each with a
  sequence number `seq` and an `op` (`metrics`, `params`, `tags`,
  `artifact`, `table`, `model`, `status`); a `model` record carries the
  model's text card. A record is appended only after
  every file it names is complete, so a kill at any moment leaves at worst a
  torn last line, which is ignored.
- `files/`: the artifacts' bytes (written to a temporary name, fsync'ed,
  then renamed; the folder is fsync'ed too), so a record on disk always
  names a file on disk.
- `done.jsonl`: sequence numbers already uploaded by `replay`.

Appending is O(1): the next `seq` and the file counter are kept in memory
(read from the folder once), and the journal stays open. Durability: each
record is written and flushed to the operating system before `append`
returns, so it survives the process being killed (`kill -9`) at any later
moment. It reaches the disk (`fsync`) at most `FSYNC_SECONDS` later: an
append fsyncs when the last fsync is that old, a timer fsyncs what a burst
left behind, and `sync()`/`close()` fsync at once. A power loss or kernel
crash therefore loses at most the last `FSYNC_SECONDS` of records (an fsync
per record costs ~1 ms on an ordinary disk: 10,000 records would take
seconds). `done.jsonl` is written the same way; losing its tail only means
`replay` checks those records again (metrics against the run's history,
artifacts and tags overwritten in place), never an upload twice.

`replay` uploads in order and records each finished record in `done.jsonl`,
so running it twice, or after a crash in the middle, uploads nothing twice;
metrics are also checked against the run's history on the server before they
are logged. Nothing here unpickles anything: records are JSON, tables are
JSON, figures PNG, models `.keras` loaded with `safe_mode=True`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunTag

SPOOL_DIR = "spool"
# The run tags naming the logged models (set by the `model` op once uploaded).
MODEL_TAGS = ("model_uri", "text_model_uri")
FSYNC_SECONDS = 0.5


class Journal:
    """An append-only JSON-lines file: written to the OS per line, fsync'ed within `FSYNC_SECONDS`."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._dirty = False
        self._synced = float("-inf")
        self._timer: threading.Timer | None = None

    def append(self, line: str) -> None:
        """Write one line (with its newline) to the OS before returning: one `write` call."""
        data = line.encode("utf-8")
        with self._lock:
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(self._fd, data)
            self._dirty = True
            if time.monotonic() - self._synced >= FSYNC_SECONDS:
                self._fsync()
            elif self._timer is None:
                self._timer = threading.Timer(FSYNC_SECONDS, self.sync)
                self._timer.name, self._timer.daemon = "spool-fsync", True
                self._timer.start()

    def sync(self) -> None:
        """fsync what was appended since the last fsync."""
        with self._lock:
            self._timer = None
            if self._dirty and self._fd is not None:
                self._fsync()

    def close(self) -> None:
        """fsync and close; a later `append` reopens the file."""
        with self._lock:
            timer, self._timer = self._timer, None
            if timer is not None:
                timer.cancel()
            if self._fd is not None:
                if self._dirty:
                    self._fsync()
                os.close(self._fd)
                self._fd = None

    def _fsync(self) -> None:
        os.fsync(self._fd)
        self._synced = time.monotonic()
        self._dirty = False


class Spool:
    """The spool folder of one run."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._lock = threading.RLock()  # the artifact thread spools too
        self._journal = Journal(self.journal)
        self._done = Journal(self.done_file)
        self._next_seq: int | None = None  # read from the journal once, then counted here
        self._file_count: int | None = None  # likewise from `files/`

    @property
    def journal(self) -> Path:
        return self.folder / "journal.jsonl"

    @property
    def done_file(self) -> Path:
        return self.folder / "done.jsonl"

    def exists(self) -> bool:
        return self.journal.is_file()

    # --- writing ------------------------------------------------------------

    def append(self, record: dict) -> dict:
        """Append one record (it gets the next `seq`); see the module docstring on durability."""
        with self._lock:
            record = {"seq": self._peek_seq(), **record}
            self._journal.append(_ENCODER.encode(record) + "\n")
            self._next_seq += 1
        return record

    def _peek_seq(self) -> int:
        if self._next_seq is None:
            records = self.records()
            self._next_seq = (records[-1]["seq"] + 1) if records else 0
        return self._next_seq

    def new_file(self, name: str) -> tuple[Path, Path]:
        """(temporary path to write, final path) for a spooled file named after `name`."""
        files = self.folder / "files"
        files.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[-80:]
        with self._lock:
            if self._file_count is None:
                self._file_count = len(list(files.iterdir()))
            final = files / f"{self._peek_seq():06d}-{self._file_count:04d}-{safe}"
            self._file_count += 1
            final.with_name(".tmp-" + final.name).touch()  # claims the name
        return final.with_name(".tmp-" + final.name), final

    @staticmethod
    def commit_file(tmp: Path, final: Path) -> str:
        """Make the written `tmp` durable and rename it to `final`; return the final name."""
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, final)
        folder = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(folder)  # the rename too: a record never names a file lost to a crash
        finally:
            os.close(folder)
        return final.name

    def sync(self) -> None:
        """fsync the journal and the done file now."""
        self._journal.sync()
        self._done.sync()

    def close(self) -> None:
        """fsync and close the journal and the done file (they reopen on the next write)."""
        self._journal.close()
        self._done.close()

    # --- reading ------------------------------------------------------------

    def records(self) -> list[dict]:
        """Every complete record, in order (a torn last line is skipped)."""
        return _read_jsonl(self.journal)

    def done(self) -> set[int]:
        return {r["seq"] for r in _read_jsonl(self.done_file)}

    def pending(self) -> list[dict]:
        done = self.done()
        return [r for r in self.records() if r["seq"] not in done]

    def mark_done(self, seq: int) -> None:
        self._done.append(json.dumps({"seq": seq}) + "\n")

    def file(self, name: str) -> Path:
        return self.folder / "files" / name

    def spooled_steps(self, key: str) -> set[int]:
        """Steps of metric `key` waiting in the spool."""
        return {
            int(m[3])
            for r in self.pending()
            if r["op"] == "metrics"
            for m in r["metrics"]
            if m[0] == key
        }

    def clear(self) -> None:
        """Remove the spool once everything in it is uploaded."""
        with self._lock:
            self.close()
            self._next_seq = self._file_count = None
            if not self.folder.exists():
                return
            trash = self.folder.with_name(self.folder.name + ".synced")
            shutil.rmtree(trash, ignore_errors=True)
            os.replace(self.folder, trash)
            shutil.rmtree(trash, ignore_errors=True)


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line from a kill mid-write
    return out


def _json_default(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


_ENCODER = json.JSONEncoder(default=_json_default)  # one encoder for every record


def replay(spool: Spool, client, run_id: str, *, log_model=None, echo=None) -> int:
    """Upload every pending record to run `run_id`; return how many were uploaded.

    Stops at the first failure (the rest stays spooled, in order). `log_model`
    is `function(path_to_keras_file, card) -> {tag: model URI}` for spooled
    models (`card`: the text card spooled with it).
    """
    try:
        return _replay(spool, client, run_id, log_model, echo)
    finally:
        spool.sync()  # the done marks reach the disk before the caller clears or reports


def dataset_record(item: DatasetInput) -> dict:
    """A dataset input as JSON for the journal (`dataset_input` turns it back)."""
    d = item.dataset
    return {
        "dataset": {
            "name": d.name,
            "digest": d.digest,
            "source_type": d.source_type,
            "source": d.source,
            "schema": d.schema,
            "profile": d.profile,
        },
        "tags": {t.key: t.value for t in item.tags},
    }


def dataset_input(record: dict) -> DatasetInput:
    """The `DatasetInput` entity of a `dataset_record`."""
    tags = [InputTag(key, value) for key, value in record["tags"].items()]
    return DatasetInput(Dataset(**record["dataset"]), tags=tags)


def _replay(spool: Spool, client, run_id: str, log_model, echo) -> int:
    count = 0
    histories: dict[str, set[int]] = {}
    for record in spool.pending():
        op = record["op"]
        if op == "metrics":
            fresh = []
            for key, value, timestamp, step in record["metrics"]:
                if key not in histories:
                    histories[key] = {m.step for m in client.get_metric_history(run_id, key)}
                if int(step) in histories[key]:
                    continue  # already on the server: never log twice
                fresh.append(Metric(key, float(value), int(timestamp), int(step)))
                histories[key].add(int(step))
            for start in range(0, len(fresh), 500):
                client.log_batch(run_id, metrics=fresh[start : start + 500])
        elif op == "params":
            existing = client.get_run(run_id).data.params
            items = [Param(k, v) for k, v in record["params"].items() if k not in existing]
            for start in range(0, len(items), 100):
                client.log_batch(run_id, params=items[start : start + 100])
        elif op == "tags":
            tags = [
                RunTag(k, v)
                for k, v in record["tags"].items()
                if not (k in MODEL_TAGS and v.startswith("spooled:"))  # set by the model op
            ]
            if tags:
                client.log_batch(run_id, tags=tags)
        elif op == "artifact":
            _upload_file(client, run_id, spool.file(record["file"]), record["path"])
        elif op == "table":
            data = json.loads(spool.file(record["file"]).read_text(encoding="utf-8"))
            frame = pd.DataFrame(data["data"], columns=data["columns"])
            client.log_table(run_id, frame, record["path"])
        elif op == "image":
            image = np.load(spool.file(record["file"]), allow_pickle=False)
            client.log_image(
                run_id,
                image,
                key=record["key"],
                step=record["step"],
                timestamp=record.get("timestamp"),
                synchronous=True,
            )
        elif op == "inputs":
            client.log_inputs(run_id, datasets=[dataset_input(item) for item in record["inputs"]])
        elif op == "model":
            if log_model is None:
                raise RuntimeError("a spooled model needs a log_model function to upload it")
            if "card" not in record:
                raise RuntimeError(
                    f"spooled model #{record['seq']} has no text card (spooled by an older "
                    "version of the runner); log it by hand from "
                    f"{spool.file(record['file'])}"
                )
            tags = log_model(spool.file(record["file"]), record["card"])
            client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        elif op == "status":
            client.set_terminated(run_id, record["status"], record.get("end_time"))
        spool.mark_done(record["seq"])
        count += 1
        if echo:
            echo(f"uploaded spooled {op} (#{record['seq']})")
    return count


def _upload_file(client, run_id: str, path: Path, artifact_path: str) -> None:
    """Upload one spooled file under its original artifact path (name included)."""
    name = Path(artifact_path).name
    folder = str(Path(artifact_path).parent)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / name
        shutil.copyfile(path, target)
        client.log_artifact(run_id, str(target), None if folder in ("", ".") else folder)
