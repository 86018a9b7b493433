"""A local spool of tracking calls that could not reach the MLflow server.

Layout under `<checkpoint folder>/spool/`:

- `journal.jsonl`: one record per spooled call, in order, each with a
  sequence number `seq` and an `op` (`metrics`, `params`, `tags`,
  `artifact`, `table`, `image`, `inputs`, `model`, `status`); a `model`
  record carries the model's text card. Each record is framed with its
  length and CRC32 (see `journal`): it is written whole or not at all (a
  failed write is undone and raised, never ignored), and a damaged line is
  found wherever it is. A record is appended only after every file it names
  is complete.
- `files/`: the artifacts' bytes (written to a temporary name, fsync'ed,
  then renamed; the folder is fsync'ed too), so a record on disk always
  names a file on disk. A record may only name a plain file of this folder
  (`spool_records.file_name_problem`; symbolic links are refused).
- `done.jsonl`: sequence numbers already uploaded by `replay`.
- `quarantine.jsonl`: written by `quarantine`: every line of the journal
  that is not a usable record (damaged, malformed, or naming a file that is
  not in `files/`), with its line number and why. Such lines are never
  uploaded and never deleted silently: the spool is kept until the user
  runs `sync --skip-bad`, which first moves this file, and every file of
  `files/` that no usable record names, into a folder beside the spool.

Appending is O(1): the next `seq` and the file counter are kept in memory
(read from the folder once), and the journal stays open. Durability: each
record is written to the operating system before `append` returns, so it
survives the process being killed (`kill -9`) at any later moment, and
fsync'ed at most `FSYNC_SECONDS` later (an fsync per record costs ~1 ms on
an ordinary disk: 10,000 records would take seconds), so a power loss costs
at most that last half second. `done.jsonl` is written the same way.

`replay` uploads the usable records in order and records each finished one
in `done.jsonl`. A record uploaded but not yet marked (a crash between the
two, or a lost tail of `done.jsonl`) is uploaded again without doubling
anything: metrics are checked against the run's history, params against its
params, artifacts and tags are overwritten in place, and stepped images and
tables are checked against what the run holds (`spool_uploads`). Nothing here unpickles anything:
records are JSON, tables are JSON, figures PNG, models `.keras` loaded with
`safe_mode=True`.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunTag

from experiments.errors import CorruptData, StorageError
from experiments.tracking import journal as journal_lib
from experiments.tracking import spool_records, spool_uploads

SPOOL_DIR = "spool"
QUARANTINE = "quarantine.jsonl"
# The run tags naming the logged models (set by the `model` op once uploaded).
MODEL_TAGS = ("model_uri", "text_model_uri")
FSYNC_SECONDS = journal_lib.FSYNC_SECONDS
Journal = journal_lib.Journal


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

    @property
    def quarantine_file(self) -> Path:
        return self.folder / QUARANTINE

    def exists(self) -> bool:
        return self.journal.is_file()

    # --- writing ------------------------------------------------------------

    def append(self, record: dict) -> dict:
        """Append one record (it gets the next `seq`); see the module docstring on durability."""
        with self._lock:
            record = {"seq": self._peek_seq(), **record}
            self._journal.append(_ENCODER.encode(record))
            self._next_seq += 1
        return record

    def _peek_seq(self) -> int:
        if self._next_seq is None:
            records = self.records()
            self._next_seq = max((r["seq"] for r in records), default=-1) + 1
        return self._next_seq

    def new_file(self, name: str) -> tuple[Path, Path]:
        """(temporary path to write, final path) for a spooled file named after `name`."""
        files = self.folder / "files"
        files.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[-80:]
        with self._lock:
            if self._file_count is None:
                self._file_count = len(list(files.iterdir()))
            final = files / f"{self._peek_seq():06d}-{self._file_count:04d}-{safe or 'file'}"
            self._file_count += 1
            final.with_name(".tmp-" + final.name).touch()  # claims the name
        return final.with_name(".tmp-" + final.name), final

    def write_file(self, name: str, write) -> str:
        """Spool a file that `write(path)` writes; return its final name for the record.

        A write that fails (a full disk: numpy's "requested and written", ENOSPC)
        removes the partial file and raises `StorageError` naming the spool.
        """
        tmp = None
        try:
            tmp, final = self.new_file(name)
            write(tmp)
            return self.commit_file(tmp, final)
        except OSError as err:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            raise StorageError(
                f"cannot spool {name!r} into {self.folder} ({err}); the records spooled so far "
                "and the last checkpoint are kept. Free space there, then resume the run",
                self.folder,
            ) from err

    @staticmethod
    def commit_file(tmp: Path, final: Path) -> str:
        """Make the written `tmp` durable and rename it to `final`; return the final name."""
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, final)
        journal_lib.fsync_dir(
            final.parent
        )  # the rename too: a record never names a file lost to a crash
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

    def read(self) -> journal_lib.Reading:
        """The usable records, in order, and the lines that are not (see `quarantine`)."""
        return journal_lib.read(self.journal, self._problem)

    def records(self) -> list[dict]:
        """Every usable record, in order."""
        return self.read().records

    def done(self) -> set[int]:
        done = journal_lib.read(self.done_file, spool_records.done_problem)
        return {r["seq"] for r in done.records}  # a damaged mark: checked again, never lost

    def pending(self) -> list[dict]:
        done = self.done()
        return [r for r in self.records() if r["seq"] not in done]

    def mark_done(self, seq: int) -> None:
        self._done.append(json.dumps({"seq": seq}))

    def file(self, name: str) -> Path:
        """The spooled file `name`, only if it is a plain file inside `files/`."""
        problem = spool_records.file_name_problem(name) or self._file_problem(name)
        if problem:
            raise CorruptData(f"spool {self.folder}: {problem}")
        return self.folder / "files" / name

    def _file_problem(self, name: str) -> str | None:
        files = self.folder / "files"
        path = files / name
        if path.is_symlink() or not path.is_file():
            return f"file: {name!r} is not a file of {files}"
        if path.resolve().parent != files.resolve():
            return f"file: {name!r} is outside {files}"
        return None

    def _problem(self, record: dict) -> str | None:
        problem = spool_records.problem(record)
        if problem is None and "file" in record:
            problem = self._file_problem(record["file"])
        return problem

    def quarantine(self, bad: list[journal_lib.BadLine]) -> Path:
        """Write the unusable lines to `quarantine.jsonl` (replacing it); return its path."""
        lines = "".join(json.dumps(b.as_json()) + "\n" for b in bad)
        tmp = self.quarantine_file.with_name(QUARANTINE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.quarantine_file)
        return self.quarantine_file

    def _keep(self, reading: journal_lib.Reading, folder: Path) -> None:
        """Move the unusable lines and the files no usable record names into `folder`."""
        folder.mkdir(parents=True, exist_ok=True)
        os.replace(self.quarantine(reading.bad), folder / QUARANTINE)
        named = {r["file"] for r in reading.records if "file" in r}
        files = self.folder / "files"
        for path in sorted(files.iterdir()) if files.is_dir() else ():
            if path.name not in named and not path.name.startswith("."):  # .tmp-: never whole
                (folder / "files").mkdir(exist_ok=True)
                os.replace(path, folder / "files" / path.name)
        for kept in (folder / "files", folder, folder.parent):
            if kept.is_dir():
                journal_lib.fsync_dir(kept)  # on disk before the spool is removed

    def spooled_steps(self, key: str) -> set[int]:
        """Steps of metric `key` waiting in the spool."""
        return {
            int(m[3])
            for r in self.pending()
            if r["op"] == "metrics"
            for m in r["metrics"]
            if m[0] == key
        }

    def clear(self, keep_bad: Path | None = None) -> None:
        """Remove the spool once every usable record in it is uploaded.

        Refused (`CorruptData`) while it holds records not uploaded, or
        unusable lines, unless `keep_bad` names a folder to move those lines
        into first (`quarantine.jsonl`), with every spooled file no usable
        record names (`files/`: a damaged record's file among them): nothing
        not uploaded is deleted.
        """
        with self._lock:
            self.close()
            self._next_seq = self._file_count = None
            if not self.folder.exists():
                return
            reading, done = self.read(), self.done()
            left = [r for r in reading.records if r["seq"] not in done]
            if left:
                raise CorruptData(f"spool {self.folder}: {len(left)} record(s) not uploaded yet")
            if reading.bad:
                if keep_bad is None:
                    raise CorruptData(
                        f"spool {self.folder}: {len(reading.bad)} unusable record(s) kept"
                    )
                self._keep(reading, Path(keep_bad))
            trash = self.folder.with_name(self.folder.name + ".synced")
            shutil.rmtree(trash, ignore_errors=True)
            os.replace(self.folder, trash)
            shutil.rmtree(trash, ignore_errors=True)


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
    images = spool_uploads.Images(client, run_id)
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
            spool_uploads.upload_file(client, run_id, spool.file(record["file"]), record["path"])
        elif op == "table":
            spool_uploads.log_table(client, run_id, spool.file(record["file"]), record["path"])
        elif op == "image":
            image = np.load(spool.file(record["file"]), allow_pickle=False)
            images.log(image, record["key"], record["step"], record.get("timestamp"))
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
