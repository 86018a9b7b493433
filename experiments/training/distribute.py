"""`train.distribute`: tf.distribute strategies, TF_CONFIG and the chief worker.

- `none`: the default device (the first GPU TensorFlow sees, else the CPU).
- `mirrored`: `tf.distribute.MirroredStrategy` over every local GPU, or over
  every logical CPU device when there is no GPU (what the tests use).
- `multi_worker`: `tf.distribute.MultiWorkerMirroredStrategy`; the cluster
  and this process's role come from the `TF_CONFIG` environment variable,
  exactly as TensorFlow documents it.

Batch size and learning rate: `train.batch_size` is the *global* batch. Each
step consumes `batch_size` examples in total, split evenly over the
`num_replicas_in_sync` replicas, and Keras scales each replica's loss so the
summed gradients are those of the mean loss over the global batch. The same
config therefore takes the same steps, with the same gradients, on 1 device,
2 GPUs or 4 hosts, and `train.learning_rate` means the same everywhere; it is
never rescaled automatically. To use more replicas for speed, raise
`batch_size` (it must be divisible by the number of replicas) and, if you
want, the learning rate yourself (the linear scaling rule).

Only the chief talks to MLflow and writes checkpoints. The chief is the task
of type `chief`, or worker 0 when the cluster has no `chief` entry. The other
workers run the same steps (collective ops need every worker) with a tracker
that logs nothing and checkpoints in a temporary folder that is deleted.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import tensorflow as tf

from experiments._keras_compat import patch_keras_for_multi_worker
from experiments.errors import invalid_config


def tf_config() -> dict:
    """The parsed `TF_CONFIG` (empty when unset), validated enough to explain mistakes."""
    raw = os.environ.get("TF_CONFIG", "").strip()
    if not raw:
        return {}
    try:
        spec = json.loads(raw)
    except json.JSONDecodeError as err:
        raise invalid_config(
            "TF_CONFIG", raw[:200], f"valid JSON ({err}), e.g. {_EXAMPLE}"
        ) from None
    if not isinstance(spec, dict):
        raise invalid_config("TF_CONFIG", raw[:200], f"a JSON object, e.g. {_EXAMPLE}")
    return spec


_EXAMPLE = (
    '{"cluster": {"worker": ["10.0.0.1:12345", "10.0.0.2:12345"]}, '
    '"task": {"type": "worker", "index": 0}}'
)


def _validate_cluster(spec: dict) -> None:
    cluster, task = spec.get("cluster"), spec.get("task")
    if not isinstance(cluster, dict) or not cluster:
        raise invalid_config(
            "TF_CONFIG cluster",
            cluster,
            f"a mapping of jobs to host:port lists for train.distribute 'multi_worker', e.g. "
            f"{_EXAMPLE}",
        )
    if not isinstance(task, dict) or task.get("type") not in cluster:
        raise invalid_config(
            "TF_CONFIG task",
            task,
            f"a type naming a job of the cluster ({', '.join(sorted(cluster))})",
        )
    index = task.get("index", 0)
    jobs = cluster[task["type"]]
    count = len(jobs) if isinstance(jobs, list) else 0
    if not isinstance(index, int) or not 0 <= index < count:
        raise invalid_config("TF_CONFIG task.index", index, f"an index in [0, {count})")


def is_chief(distribute: str = "multi_worker") -> bool:
    """Whether this process logs to MLflow and writes checkpoints.

    Always true unless `distribute` is `multi_worker`; then the TF_CONFIG task
    of type `chief`, or worker 0 when the cluster has no chief.
    """
    if distribute != "multi_worker":
        return True
    spec = tf_config()
    task = spec.get("task") or {}
    kind, index = task.get("type"), task.get("index", 0)
    if kind in (None, "chief"):
        return True
    return kind == "worker" and index == 0 and "chief" not in (spec.get("cluster") or {})


def worker_label() -> str:
    """`worker:1`-style name of this process in the cluster (for messages)."""
    task = tf_config().get("task") or {}
    return f"{task.get('type', 'worker')}:{task.get('index', 0)}"


def check(cfg) -> None:
    """Reject a distribute setting this environment cannot run, before anything is created."""
    name = cfg.train.distribute
    if name == "multi_worker":
        _validate_cluster(tf_config())


def make_strategy(name: str):
    """The `tf.distribute` strategy for `train.distribute` (None for `none`)."""
    if name == "none":
        return None
    if name == "mirrored":
        devices = [d.name for d in tf.config.list_logical_devices("GPU")]
        devices = devices or [d.name for d in tf.config.list_logical_devices("CPU")]
        strategy = tf.distribute.MirroredStrategy(devices=devices)
    elif name == "multi_worker":  # TF_CONFIG was checked with the config (`check`)
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        patch_keras_for_multi_worker()
    else:
        raise invalid_config("train.distribute", name, "one of 'none', 'mirrored', 'multi_worker'")
    print(
        f"{name} strategy: {strategy.num_replicas_in_sync} replicas in sync",
        file=sys.stderr,
    )
    return strategy


def planned_replicas(name: str) -> int:
    """How many replicas the strategy for `name` will have in sync, counted without starting
    TensorFlow's runtime (so before a multi-worker strategy): the visible GPUs, else the
    logical CPUs for `mirrored` and one CPU per worker for `multi_worker`, times the
    cluster's workers."""
    if name == "none":
        return 1
    local = _logical_count("GPU") or (_logical_count("CPU") if name == "mirrored" else 1)
    if name != "multi_worker":
        return local
    cluster = tf_config().get("cluster") or {}
    jobs = [cluster.get(job) for job in ("chief", "worker")]
    return local * sum(len(hosts) for hosts in jobs if isinstance(hosts, list))


def _logical_count(device_type: str) -> int:
    """The logical devices of `device_type` TensorFlow will make of the visible ones."""
    devices = tf.config.get_visible_devices(device_type)
    return sum(len(tf.config.get_logical_device_configuration(d) or [d]) for d in devices)


def check_batch(replicas: int, batch_size: int) -> None:
    """The global batch must split evenly over the replicas."""
    if batch_size % replicas:
        raise invalid_config(
            "train.batch_size",
            batch_size,
            f"a multiple of the {replicas} replicas in sync (batch_size is the global batch)",
        )


class NullTracker:
    """A tracker that logs nothing: what non-chief workers use."""

    run_id = None

    def logged_steps(self, key: str) -> set[int]:
        return set()

    def log_model(self, model, card) -> dict[str, str]:
        return {}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return _ignore


def _ignore(*args, **kwargs) -> None:
    return None


def run_worker(prepared, train) -> str:
    """Train as a non-chief worker: the same steps, nothing written to the store.

    `train(cfg, task, tracker, folder)` is the runner's training function;
    checkpoints go to a temporary folder deleted afterwards.
    """
    label = worker_label()
    print(f"{label}: training as a non-chief worker; the chief logs to MLflow", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="attn-rnn-worker-") as tmp:
        train(prepared.cfg, prepared.task, NullTracker(), Path(tmp))
    return f"(none: {label} is not the chief)"
