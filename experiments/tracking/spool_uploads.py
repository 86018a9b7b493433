"""Uploading spooled files so that a second upload of the same record changes nothing.

`replay` marks a record done (`spool/done.jsonl`) only after it is
uploaded, so a `sync` killed between the upload and the mark uploads the
record again. Metrics are checked against the run's history, params against
its params, and artifacts (`upload_file`) and tags overwrite themselves in
place. Two kinds of upload are not idempotent in MLflow itself, so they look
at what the run already holds first:

- a stepped image (`log_image(key=, step=)`): each call writes new files,
  `images/<key>+step+<step>+timestamp+<ms>+<uuid>.png` and the UI's
  thumbnail `...+compressed.webp`, so a second call adds a second image at
  the same key and step. `Images.log` logs an image only when the run has
  none at its key and step, and gives an image cut between its two files
  the missing one, under the same name.
- a table (`log_table`): MLflow appends to a table already at that path, so
  a second call doubles its rows. `log_table` writes a table the run already
  has again whole, in place, and lists it where MLflow would.
"""

from __future__ import annotations

import json
import posixpath
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from mlflow.tracking.multimedia import compress_image_size, convert_to_pil_image
from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS, MLFLOW_LOGGED_IMAGES

IMAGES = "images"
# The two files of one logged image, by the suffix after their common stem.
FULL, THUMBNAIL = ".png", "+compressed.webp"
_IMAGE_FILE = re.compile(
    r"(?P<stem>(?P<key>[^+]+)\+step\+(?P<step>\d+)\+timestamp\+\d+\+[^+.]+)"
    rf"(?P<suffix>{re.escape(FULL)}|{re.escape(THUMBNAIL)})"
)


def upload_file(client, run_id: str, path: Path, artifact_path: str) -> None:
    """Upload one file under its run-relative `artifact_path` (name included), replacing it."""
    name = posixpath.basename(artifact_path)
    folder = posixpath.dirname(artifact_path) or None
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / name
        shutil.copyfile(path, target)
        client.log_artifact(run_id, str(target), folder)


def log_table(client, run_id: str, path: Path, artifact_path: str) -> None:
    """Log the spooled table at `path` (MLflow's split JSON) as `artifact_path`, once."""
    folder = posixpath.dirname(artifact_path) or None
    if artifact_path not in {f.path for f in client.list_artifacts(run_id, folder)}:
        data = json.loads(path.read_text(encoding="utf-8"))
        frame = pd.DataFrame(data["data"], columns=data["columns"])
        client.log_table(run_id, frame, artifact_path)
        return
    upload_file(client, run_id, path, artifact_path)  # not appended to itself: replaced
    tags = client.get_run(run_id).data.tags
    listed = json.loads(tags.get(MLFLOW_LOGGED_ARTIFACTS, "[]"))
    entry = {"path": artifact_path, "type": "table"}  # as `MlflowClient.log_table` lists it
    if entry not in listed:
        client.set_tag(run_id, MLFLOW_LOGGED_ARTIFACTS, json.dumps([*listed, entry]))


class Images:
    """The stepped images of run `run_id`: listed from the server once, then kept up to date."""

    def __init__(self, client, run_id: str):
        self.client, self.run_id = client, run_id
        self._logged: dict[tuple[str, int], dict[str, set[str]]] | None = None

    def log(self, image: np.ndarray, key: str, step: int, timestamp: int | None) -> None:
        """Log `image` at `key` and `step` unless the run has it (see the module docstring)."""
        logged = self._list()
        stems = logged.get((_file_key(key), step))
        if not stems:
            self.client.log_image(
                self.run_id, image, key=key, step=step, timestamp=timestamp, synchronous=True
            )
            logged[_file_key(key), step] = {"": {FULL, THUMBNAIL}}
            return
        for stem, suffixes in stems.items():
            for suffix in sorted({FULL, THUMBNAIL} - suffixes):
                self._upload(image, stem + suffix)
                suffixes.add(suffix)
        self.client.set_tag(self.run_id, MLFLOW_LOGGED_IMAGES, True)  # MLflow sets it last

    def _list(self) -> dict[tuple[str, int], dict[str, set[str]]]:
        if self._logged is None:
            self._logged = {}
            for info in self.client.list_artifacts(self.run_id, IMAGES):
                match = _IMAGE_FILE.fullmatch(posixpath.basename(info.path))
                if match:
                    stems = self._logged.setdefault((match["key"], int(match["step"])), {})
                    stems.setdefault(match["stem"], set()).add(match["suffix"])
        return self._logged

    def _upload(self, image: np.ndarray, name: str) -> None:
        picture = convert_to_pil_image(image)
        if name.endswith(THUMBNAIL):
            picture = compress_image_size(picture)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            picture.save(path)
            self.client.log_artifact(self.run_id, str(path), IMAGES)


def _file_key(key: str) -> str:
    """`key` as MLflow writes it in an image's file name (a `/` would make a folder)."""
    return key.replace("/", "~")
