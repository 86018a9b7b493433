"""`train.distribute`: how a run spreads over devices and hosts, and which process logs.

- `none`: the default device (the first GPU the backend sees, else the CPU).
- `mirrored` (TensorFlow): `tf.distribute.MirroredStrategy` over every local
  GPU, or over every logical CPU device when there is no GPU (what the tests
  use).
- `multi_worker` (TensorFlow): `tf.distribute.MultiWorkerMirroredStrategy`;
  the cluster and this process's role come from the `TF_CONFIG` environment
  variable, exactly as TensorFlow documents it.
- `data_parallel` (JAX): `keras.distribution.DataParallel` over every device
  (`XLA_FLAGS=--xla_force_host_platform_device_count=N` makes N of one CPU).
  On several hosts, each process first joins the job through
  `keras.distribution.initialize` (JAX's `jax.distributed.initialize`), from
  `KERAS_DISTRIBUTION_JOB_ADDRESSES`, `KERAS_DISTRIBUTION_NUM_PROCESSES` and
  `KERAS_DISTRIBUTION_PROCESS_ID`, as Keras' distribution guide describes.

Which settings a backend takes is its `experiments.backends.Backend.distribute`.

Batch size and learning rate: `train.batch_size` is the *global* batch. Each
step consumes `batch_size` examples in total, split evenly over the
replicas, and the gradients are those of the mean loss over the global batch.
The same config therefore takes the same steps, with the same gradients, on 1
device, 2 GPUs or 4 hosts, and `train.learning_rate` means the same
everywhere; it is never rescaled automatically. To use more replicas for
speed, raise `batch_size` (it must be divisible by the number of replicas)
and, if you want, the learning rate yourself (the linear scaling rule).

Only the chief talks to MLflow and writes checkpoints: with `multi_worker`,
the task of type `chief`, or worker 0 when the cluster has no `chief` entry;
with `data_parallel`, process 0. The other processes run the same steps
(collective ops need every one) with a tracker that logs nothing and
checkpoints in a temporary folder that is deleted.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import keras

from experiments import backends
from experiments.errors import invalid_config

# Set by the launcher of a multi-process JAX job (Keras' names); see the module docstring.
JOB_VARIABLES = (
    "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "KERAS_DISTRIBUTION_PROCESS_ID",
)
_joined = False


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

    With `multi_worker`, the TF_CONFIG task of type `chief`, or worker 0 when
    the cluster has no chief; with `data_parallel`, process 0; else always.
    """
    if distribute == "data_parallel":
        return backends.current().is_chief(distribute)
    if distribute != "multi_worker":
        return True
    spec = tf_config()
    task = spec.get("task") or {}
    kind, index = task.get("type"), task.get("index", 0)
    if kind in (None, "chief"):
        return True
    return kind == "worker" and index == 0 and "chief" not in (spec.get("cluster") or {})


def worker_label(distribute: str = "multi_worker") -> str:
    """`worker:1`-style name of this process in the cluster (for messages)."""
    if distribute == "data_parallel":
        return f"process:{os.environ.get('KERAS_DISTRIBUTION_PROCESS_ID', '?')}"
    task = tf_config().get("task") or {}
    return f"{task.get('type', 'worker')}:{task.get('index', 0)}"


def check(cfg) -> None:
    """Reject a distribute setting this backend or environment cannot run, before anything
    is created; a process of a multi-process JAX job joins the job here (before JAX's
    first computation)."""
    name = cfg.train.distribute
    backend = backends.current()
    if name not in backend.distribute:
        raise invalid_config(
            "train.distribute",
            name,
            f"one of {', '.join(repr(n) for n in backend.distribute)} on the {backend.name} "
            "backend (mirrored and multi_worker are tf.distribute strategies, for "
            "KERAS_BACKEND=tensorflow; data_parallel is keras.distribution.DataParallel, "
            "for KERAS_BACKEND=jax)",
        )
    if name == "multi_worker":
        _validate_cluster(tf_config())
    if name == "data_parallel":
        _join_job()


def _join_job() -> None:
    """`keras.distribution.initialize()` once, when the job variables say several processes."""
    global _joined
    given = [n for n in JOB_VARIABLES if os.environ.get(n)]
    if _joined or not given:
        return
    try:
        processes = int(os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES", ""))
    except ValueError:
        processes = 0
    if len(given) != len(JOB_VARIABLES) or processes < 1:
        raise invalid_config(
            ", ".join(JOB_VARIABLES),
            {n: os.environ.get(n) for n in JOB_VARIABLES},
            "all three set, with a whole number of processes (or none, for one process)",
        )
    if processes > 1:
        keras.distribution.initialize()
    _joined = True


def make_strategy(name: str):
    """The strategy or `keras.distribution.Distribution` for `train.distribute` (None for
    `none`): what the model is built, and with a Keras distribution also trained, in."""
    backend = backends.current()
    strategy = backend.make_distribution(name)
    if strategy is not None:
        print(f"{name} strategy: {backend.replicas_of(strategy)} replicas in sync", file=sys.stderr)
    return strategy


def planned_replicas(name: str) -> int:
    """How many replicas the setting `name` will have in sync, counted without starting
    TensorFlow's runtime (so before a multi-worker strategy): the backend's local
    replicas, times the cluster's workers for `multi_worker`."""
    if name == "none":
        return 1
    local = backends.current().replicas(name)
    if name != "multi_worker":
        return local
    cluster = tf_config().get("cluster") or {}
    jobs = [cluster.get(job) for job in ("chief", "worker")]
    return local * sum(len(hosts) for hosts in jobs if isinstance(hosts, list))


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
    label = worker_label(prepared.cfg.train.distribute)
    print(f"{label}: training as a non-chief worker; the chief logs to MLflow", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="attn-rnn-worker-") as tmp:
        train(prepared.cfg, prepared.task, NullTracker(), Path(tmp))
    return f"(none: {label} is not the chief)"
