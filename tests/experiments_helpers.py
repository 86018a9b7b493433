"""Helpers shared by the `tests/test_experiments_*.py` files (tiny configs, store checks)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import keras
import pytest
import yaml

from experiments.commands import main
from experiments.training import run as training_run
from experiments.training.callbacks import Checkpoint

# Small enough that one run takes seconds; eager so no graph is traced.
TINY = {
    "model": {"embedding_dim": 8, "units": 8},
    "train": {
        "epochs": 1,
        "batch_size": 16,
        "eval_examples": 16,
        "verbose": 0,
        "run_eagerly": True,
    },
    "tracking": {"experiment": "tests", "num_samples": 0, "system_metrics_interval": 1.0},
}

TINY_TASKS = {
    "needle": {"name": "needle", "num_examples": 64, "max_length": 12, "num_probes": 1},
    "reverse": {"name": "reverse", "num_examples": 64, "max_length": 6, "num_probes": 1},
    "dates": {"name": "dates", "num_examples": 64, "num_probes": 1},
    "addition": {"name": "addition", "num_examples": 64, "digits": 2, "num_probes": 1},
    "lm": {"name": "lm", "max_chars": 2000, "seq_length": 16, "num_probes": 1},
    "textcls": {"name": "textcls", "path": None, "max_length": 12, "num_probes": 1},
}


# Names of metrics before they carried their split (train_, val_, test_) or sampler (_greedy).
LEGACY_METRICS = frozenset(
    {"accuracy", "alignment_accuracy", "attention_entropy", "exact_match"}
    | {"val_exact_match", "test_exact_match"}
)


def documented_metrics(
    page: Path = Path(__file__).parents[1] / "docs" / "guides" / "metrics.md",
) -> re.Pattern:
    """A pattern of the metric names in the table of *What each number is* (the docs page).

    A name's placeholders match what they stand for: `<metric>` any `val_<metric>` of the
    table, and `A`, `B` numbers (`test_<metric>_len_A_B`).
    """
    text = page.read_text(encoding="utf-8")
    table = text[text.index("\n| metric |") + 1 :].split("\n\n", 1)[0].splitlines()[2:]
    names = [n for row in table for n in re.findall(r"`([^`]+)`", row.split("|")[1])]
    stems = [n.removeprefix("val_") for n in names if re.fullmatch(r"val_\w+", n)]
    metric = "(?:" + "|".join(map(re.escape, stems)) + ")"
    patterns = [
        re.sub(r"(?<=_)[A-Z](?=_|$)", r"\\d+", re.escape(n).replace("<metric>", metric))
        for n in names
    ]
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def write_config(folder: Path, task: dict, name: str = "config.yaml", **sections) -> Path:
    """Write a tiny config for `task`; `sections` update the TINY defaults section-wise."""
    data = {"task": dict(task)}
    for key, value in TINY.items():
        extra = sections.get(key, {})
        data[key] = {**value, **extra} if isinstance(extra, dict) else extra
    for key, value in sections.items():
        if key not in data:
            data[key] = value
    path = Path(folder) / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def write_text_dataset(folder: Path, rows: int = 64, suffix: str = ".csv") -> Path:
    """A small two-class text dataset as CSV or JSONL."""
    words = {"good": ["great", "fine", "lovely"], "bad": ["awful", "poor", "dull"]}
    records = []
    for i in range(rows):
        label = "good" if i % 2 else "bad"
        records.append({"text": f"it was {words[label][i % 3]} really {i}", "label": label})
    path = Path(folder) / f"texts{suffix}"
    if suffix == ".csv":
        lines = ["text,label"] + [f"{r['text']},{r['label']}" for r in records]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def store_uri(folder: Path) -> str:
    return f"sqlite:///{Path(folder) / 'mlruns' / 'mlflow.db'}"


_TEMPLATE: list[Path] = []


def migrated_store(folder: Path) -> str:
    """`store_uri(folder)` with the store already created: a copy of one empty store.

    Creating a SQLite store runs MLflow's migrations (~2.5 s); a copy takes milliseconds.
    The copy is what a first run would have made (tables and the Default experiment).
    """
    db = Path(folder) / "mlruns" / "mlflow.db"
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_template_db(), db)
    return store_uri(folder)


def use_store(folder: Path, monkeypatch) -> str:
    """A fresh store in `folder` (`migrated_store`), where the runner finds it: in
    MLFLOW_TRACKING_URI, with `folder` the working directory. Returns its URI."""
    uri = migrated_store(folder)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(folder)
    return uri


def store_with_run(folder: Path, monkeypatch, experiment: str = "tests"):
    """A fresh store in `folder` (`migrated_store`) holding one run of `experiment` (artifacts
    under `folder/art`), the runner pointed at it by MLFLOW_TRACKING_URI: (client, run id)."""
    import mlflow

    uri = migrated_store(folder)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = mlflow.MlflowClient(uri)
    experiment_id = client.create_experiment(
        experiment, artifact_location=(Path(folder) / "art").as_uri()
    )
    return client, client.create_run(experiment_id).info.run_id


def _template_db() -> Path:
    if not _TEMPLATE:
        import mlflow

        folder = Path(tempfile.mkdtemp(prefix="mlflow-store-template-"))
        atexit.register(shutil.rmtree, folder, True)
        (folder / "mlruns").mkdir()
        # The Default experiment's artifact location is taken from the working directory.
        with contextlib.chdir(folder):
            mlflow.MlflowClient(store_uri(folder)).search_experiments()
        _TEMPLATE.append(folder / "mlruns" / "mlflow.db")
    return _TEMPLATE[0]


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder` with its size and mtime, to prove nothing changed."""
    folder = Path(folder)
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


def runs(uri: str, experiment: str = "tests"):
    """All runs of `experiment`, newest first."""
    import mlflow

    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"])


def artifact_paths(uri: str, run_id: str) -> set[str]:
    """All artifact file paths of a run, recursively."""
    import mlflow

    client = mlflow.MlflowClient(uri)
    out, todo = set(), [None]
    while todo:
        for info in client.list_artifacts(run_id, todo.pop()):
            (todo.append(info.path) if info.is_dir else out.add(info.path))
    return out


LOADER = r"""
import json, sys, traceback
sys.modules["keras_attn_rnn"] = None  # the library cannot be imported here: loading must not need it
sys.modules["experiments"] = None
import numpy as np
import mlflow, mlflow.keras
print("ready", flush=True)
for line in sys.stdin:
    uri, run_id, model_uri = line.split()
    try:
        mlflow.set_tracking_uri(uri)
        folder = mlflow.artifacts.download_artifacts(run_id=run_id)
        tokens = np.array(json.load(open(folder + "/input_example.json"))["tokens"], dtype="int32")
        expected = np.load(folder + "/expected_output.npy")
        model = mlflow.keras.load_model(model_uri)  # the exported SavedModel
        got = np.asarray(model.serve(tokens))
        reply = {
            "run_id": run_id,
            "shape": list(got.shape),
            "expected_shape": list(expected.shape),
            "max_abs_diff": float(np.max(np.abs(got.astype("float64") - expected))),
        }
    except Exception:
        reply = {"run_id": run_id, "error": traceback.format_exc()}
    print(json.dumps(reply), flush=True)
"""


class ModelLoader:
    """A fresh Python process that loads logged models with `mlflow.keras.load_model`.

    `keras_attn_rnn` (and the runner) cannot be imported there, so a model
    that needs the library fails to load. One process serves many checks
    (its imports happen once, and overlap the in-process training); each
    check sends one line and reads one line back.
    """

    def __init__(self, cwd: Path):
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
        env.pop("MLFLOW_TRACKING_URI", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LOADER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=cwd,
            env=env,
        )

    def check(self, uri: str, run_id: str, model_uri: str) -> dict:
        """Load one model; returns `{"max_abs_diff": ..., "shape": ...}` of what its `serve`
        gives for the logged input example against the logged expected output."""
        self.proc.stdin.write(f"{uri} {run_id} {model_uri}\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"model loader exited with {self.proc.wait()}")
            if line.startswith("{"):
                return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def image_steps(files: set[str]) -> dict[str, set[int]]:
    """`{key: steps}` of the stepped images (`mlflow.log_image(key=, step=)`) among `files`."""
    out: dict[str, set[int]] = {}
    for path in files:
        if path.startswith("images/") and path.endswith(".png"):
            key, _, step, *_ = path.removeprefix("images/").split("+")
            out.setdefault(key, set()).add(int(step))
    return out


class Interrupt(keras.callbacks.Callback):
    """Simulates Ctrl+C at the end of epoch index `at`."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.at:
            raise KeyboardInterrupt


def run_interrupted_after_checkpoint(monkeypatch, config: Path, at: int = 0) -> None:
    """`python -m experiments run CONFIG`, Ctrl+C'd right after epoch `at` is checkpointed,
    before that epoch reaches MLflow."""
    original = training_run.make_callbacks

    def patched(*args, **kwargs):
        callbacks = original(*args, **kwargs)
        index = next(i for i, c in enumerate(callbacks) if isinstance(c, Checkpoint))
        return callbacks[: index + 1] + [Interrupt(at)] + callbacks[index + 1 :]

    with monkeypatch.context() as patch:
        patch.setattr(training_run, "make_callbacks", patched)
        with pytest.raises(KeyboardInterrupt):
            main(["run", str(config)])
