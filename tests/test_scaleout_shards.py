"""Issue 47: the workers of a multi-worker (TensorFlow) or data-parallel (JAX) run train on
disjoint rows of a stored training split, every row once an epoch across them.

What each worker trains on is recorded where it is fed: each stored row's first id is its
row number (`test_length_batches.stored`), read back from the batches the training step is
given (TensorFlow: `fit`'s step under `MultiWorkerMirroredStrategy`, 2 local workers) or
from the rows the runner's feed takes from the store (JAX's `shard=`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from experiments_helpers import migrated_store, write_config, write_text_dataset
from scaleout_helpers import child_env, free_port
from test_pairs_task import toy_pairs, write_tsv

from experiments import backends
from experiments.commands import main
from experiments.data.stored_classes import StoredClasses
from experiments.data.stored_split import StoredSplit
from experiments.data.stored_windows import StoredWindows
from experiments.training.batches import LengthBatches

ROOT = Path(__file__).resolve().parents[1]

# One worker of a 2-worker job: trains one epoch of a length-bucketed feed through the
# TensorFlow backend's `fit_data` under the multi-worker strategy, recording the first id
# (the row number + 4) of every row its replica's training step is given.
WORKER = r"""
import json, sys
from pathlib import Path
import keras, numpy as np
sys.path.insert(0, sys.argv[3])
from test_length_batches import stored
from experiments.backends.tensorflow_backend import BACKEND
from experiments.training.batches import LengthBatches

strategy = BACKEND.make_distribution("multi_worker")
split = stored(Path(sys.argv[1]), rows=300, seed=2)
seen = []

class Recorder(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)

    def call(self, x):
        return self.dense(keras.ops.cast(x[0][:, :1], "float32"))

    def train_step(self, data):
        (x, _), _ = data
        seen.extend(int(r) - 4 for r in np.asarray(x)[:, 0])
        return {"rows": keras.ops.cast(keras.ops.shape(x)[0], "float32")}

with strategy.scope():
    model = Recorder()
    model.compile(run_eagerly=True)
feed = LengthBatches(split, 24, seed=5, multiple=strategy.num_replicas_in_sync)
model.fit(BACKEND.fit_data(feed), epochs=1, verbose=0)
Path(sys.argv[2]).write_text(json.dumps(seen))
"""


@pytest.mark.slow
def test_multi_worker_workers_train_on_disjoint_rows_every_row_once(tmp_path):
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}
    procs = []
    for index in range(2):
        spec = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        (tmp_path / str(index)).mkdir()
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    WORKER,
                    str(tmp_path / str(index)),
                    str(tmp_path / f"seen{index}.json"),
                    str(ROOT / "tests"),
                ],
                cwd=tmp_path,
                env=child_env(TF_CONFIG=json.dumps(spec)),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-4000:]
    seen = [json.loads((tmp_path / f"seen{i}.json").read_text()) for i in range(2)]
    assert all(seen)  # both workers trained
    assert not set(seen[0]) & set(seen[1])  # on rows of their own
    # every row once an epoch across the workers (300 rows: no batch is filled up)
    assert sorted(seen[0] + seen[1]) == list(range(300))


def _pairs_task(folder) -> tuple[dict, type]:
    path = write_tsv(folder / "pairs.tsv", toy_pairs(400, seed=4))
    task = {"name": "pairs", "path": str(path), "units": "word", "vocabulary_size": 64}
    return task, StoredSplit


def _textcls_task(folder) -> tuple[dict, type]:
    task = {"name": "textcls", "path": str(write_text_dataset(folder, rows=300))}
    return {**task, "max_length": 12, "num_probes": 1}, StoredClasses


def _lm_task(folder) -> tuple[dict, type]:
    path = folder / "text.txt"
    path.write_text("".join(f"line {i} of the text\n" for i in range(300)), encoding="utf-8")
    return {"name": "lm", "path": str(path), "seq_length": 16, "num_probes": 1}, StoredWindows


@pytest.mark.slow
@pytest.mark.parametrize("make", [_pairs_task, _textcls_task, _lm_task])
def test_data_parallel_processes_take_disjoint_rows_every_row_once(tmp_path, monkeypatch, make):
    """The runner gives each process of a JAX job `shard=(index, count)` (`Backend.process`):
    run as process 0 and as process 1 of 2, the rows each took from the store in its epoch
    are disjoint and together every training row once (pairs, textcls and lm reading a
    file)."""
    task, stored = make(tmp_path)
    uri = migrated_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("ATTN_RNN_DATA_CACHE", str(tmp_path / "cache"))
    config = write_config(
        tmp_path,
        task,
        model={"rnn": "gru", "bidirectional": False},
        train={"seed": 3},
        tracking={"log_model": False, "heatmap_every": 100},
    )
    take, getitem = stored.take, LengthBatches.__getitem__
    batch, taken, sizes = [None], {}, set()

    def fed(self, index):
        batch[0] = (self.epoch, index)
        try:
            return getitem(self, index)
        finally:
            batch[0] = None

    def recorded(self, index, pad_to=1):
        if batch[0] is not None:  # a feed's batch (one read twice counts once)
            taken[batch[0]] = [int(r) for r in index]
            sizes.add(len(self))
        return take(self, index, pad_to)

    monkeypatch.setattr(LengthBatches, "__getitem__", fed)
    monkeypatch.setattr(stored, "take", recorded)
    backend = backends.current()
    seen = []
    for index in range(2):
        taken.clear()
        monkeypatch.setattr(backend, "process", lambda index=index: (index, 2), raising=False)
        assert main(["run", str(config)]) == 0
        assert {epoch for epoch, _ in taken} == {0}
        seen.append([r for rows in taken.values() for r in rows])
    (rows,) = sizes  # the training split's rows
    assert seen[0] and seen[1]
    # disjoint but for the filling up of a short last batch (an odd number of rows: one
    # row of its own is added so that it splits evenly over the 2 processes)
    assert len(set(seen[0]) & set(seen[1])) <= rows % 2
    counts = Counter(seen[0] + seen[1])
    # every row once; a short last batch is filled up with its own rows to split evenly
    assert set(counts) == set(range(rows))
    assert sum(counts.values()) == rows + rows % 2
