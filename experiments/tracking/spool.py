"""A local spool of tracking calls that could not reach the MLflow server.

Layout under `<checkpoint folder>/spool/`:

- `journal.jsonl`: one JSON record per spooled call, in order, each with a
  sequence number `seq` and an `op` (`metrics`, `params`, `tags`,
  `artifact`, `table`, `model`, `status`). A record is appended (and
  fsync'ed) only after every file it names is complete, so a kill at any
  moment leaves at worst a torn last line, which is ignored.
- `files/`: the artifacts' bytes (written to a temporary name, then renamed).
- `done.jsonl`: sequence numbers already uploaded by `replay`.

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
from pathlib import Path

import pandas as pd
from mlflow.entities import Metric, Param, RunTag

SPOOL_DIR = "spool"


class Spool:
    """The spool folder of one run."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._lock = threading.RLock()  # the artifact thread spools too

    @property
    def journal(self) -> Path:
        return self.folder / "journal.jsonl"

    @property
    def done_file(self) -> Path:
        return self.folder / "done.jsonl"

    def exists(self) -> bool:
        return self.journal.is_file()

    # --- writing ------------------------------------------------------------

    def _next_seq(self) -> int:
        records = self.records()
        return (records[-1]["seq"] + 1) if records else 0

    def append(self, record: dict) -> dict:
        """Append one record (gets the next `seq`) durably."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._lock:
            record = {"seq": self._next_seq(), **record}
            line = json.dumps(record, default=_json_default) + "\n"
            with open(self.journal, "a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
        return record

    def new_file(self, name: str) -> tuple[Path, Path]:
        """(temporary path to write, final path) for a spooled file named after `name`."""
        files = self.folder / "files"
        files.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[-80:]
        with self._lock:
            final = files / f"{self._next_seq():06d}-{len(list(files.iterdir())):04d}-{safe}"
            final.with_name(".tmp-" + final.name).touch()  # claims the name
        return final.with_name(".tmp-" + final.name), final

    @staticmethod
    def commit_file(tmp: Path, final: Path) -> str:
        os.replace(tmp, final)
        return final.name

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
        with open(self.done_file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"seq": seq}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

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


def replay(spool: Spool, client, run_id: str, *, log_model=None, echo=None) -> int:
    """Upload every pending record to run `run_id`; return how many were uploaded.

    Stops at the first failure (the rest stays spooled, in order). `log_model`
    is `function(path_to_keras_file) -> model_uri` for spooled models.
    """
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
                if not (k == "model_uri" and v.startswith("spooled:"))  # set by the model op
            ]
            if tags:
                client.log_batch(run_id, tags=tags)
        elif op == "artifact":
            _upload_file(client, run_id, spool.file(record["file"]), record["path"])
        elif op == "table":
            data = json.loads(spool.file(record["file"]).read_text(encoding="utf-8"))
            frame = pd.DataFrame(data["data"], columns=data["columns"])
            client.log_table(run_id, frame, record["path"])
        elif op == "model":
            if log_model is None:
                raise RuntimeError("a spooled model needs a log_model function to upload it")
            uri = log_model(spool.file(record["file"]))
            client.set_tag(run_id, "model_uri", uri)
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
