"""The data a run saw, as MLflow dataset inputs (the run page's Datasets panel).

Each split (train, validation, test, and the generalisation split when the
task has one) is a `mlflow.data.from_numpy` dataset of its arrays, so its
digest changes whenever the data does and its schema and row count show in
the UI. The source is the file a task read (with its SHA-256 in the input's
tags), or, for generated data, the generator module, its seed and its config.
"""

from __future__ import annotations

import hashlib
import json
import warnings

import mlflow
from mlflow.data.code_dataset_source import CodeDatasetSource
from mlflow.entities import DatasetInput, InputTag
from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

from experiments.config import ExperimentConfig
from experiments.data.task import Task

CONTEXTS = {"train": "training", "val": "validation", "test": "testing"}


def dataset_inputs(cfg: ExperimentConfig, task: Task) -> list[DatasetInput]:
    """One `DatasetInput` per split, with its context (`training`, `validation`, ...)."""
    path = getattr(cfg.task, "path", None)
    tags = {}
    if path:
        tags["file_sha256"] = file_digest(path)
        source = path
    else:
        source = CodeDatasetSource(
            {
                "generator": type(cfg.task).__module__,  # the task's module
                "seed": str(cfg.task.seed),
                "task_config": json.dumps(cfg.task.model_dump(mode="json"), sort_keys=True),
            }
        )
    splits = {name: getattr(task, name) for name in CONTEXTS}
    contexts = dict(CONTEXTS)
    if task.generalization is not None:
        splits["generalization"] = task.generalization
        contexts["generalization"] = "testing-longer"
    out = []
    for name, split in splits.items():
        features = {"x": split.x}
        if split.x_dec is not None:
            features["x_dec"] = split.x_dec
        if split.copying:
            features["x_ext"] = split.x_ext
        targets = {"y": split.y}
        if split.alignment is not None:
            targets["alignment"] = split.alignment
        with warnings.catch_warnings():
            # MLflow registers its local-file source twice, then warns that a path could be
            # either of them (they are the same class)
            warnings.filterwarnings("ignore", "The specified dataset source can be interpreted")
            dataset = mlflow.data.from_numpy(
                features, source=source, targets=targets, name=f"{task.name}-{name}"
            )
        input_tags = [InputTag(MLFLOW_DATASET_CONTEXT, contexts[name])]
        input_tags += [InputTag(key, value) for key, value in tags.items()]
        out.append(DatasetInput(dataset._to_mlflow_entity(), tags=input_tags))
    return out


def file_digest(path: str) -> str:
    """SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
