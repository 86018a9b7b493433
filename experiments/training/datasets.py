"""The data a run saw, as MLflow dataset inputs (the run page's Datasets panel).

Each split (train, validation, test, and the generalisation split when the
task has one) is a `mlflow.data.from_numpy` dataset of its arrays, so its
digest changes whenever the data does and its schema and row count show in
the UI; a training split kept in a token store on disk (a file task's) is described
without being read (`MetaDataset`: its store's fingerprint as digest, its rows and
fingerprint as tags). The source is the file a task read the split from (with its SHA-256 and the
config key that names the file in the input's tags, `file_sha256` and `file_key`:
what `resume` checks the file against), or, for generated data, the generator
module, its seed and its config.
"""

from __future__ import annotations

import json
import warnings

import mlflow
from mlflow.data.code_dataset_source import CodeDatasetSource
from mlflow.data.dataset_source_registry import resolve_dataset_source
from mlflow.data.meta_dataset import MetaDataset
from mlflow.entities import DatasetInput, InputTag
from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

from experiments.config import ExperimentConfig
from experiments.data.corpus import file_digest
from experiments.data.stored_split import StoredSplit
from experiments.data.task import Task

CONTEXTS = {"train": "training", "val": "validation", "test": "testing"}
# The input tags of a split read from a file: its SHA-256, and the config key naming it (a
# run logged before `file_key` existed read all its splits from `task.path`).
FILE_DIGEST = "file_sha256"
FILE_KEY = "file_key"
# The input tag of a training split read from a token store: the store's cache key.
STORE_FINGERPRINT = "store_fingerprint"


def dataset_inputs(cfg: ExperimentConfig, task: Task) -> list[DatasetInput]:
    """One `DatasetInput` per split, with its context (`training`, `validation`, ...)."""
    files = data_files(cfg.task)
    # a file the task's corpus digested when this run opened it is not read again
    known = {task.train.file: task.train.file_sha256} if isinstance(task.train, StoredSplit) else {}
    digests = {key: known.get(path) or file_digest(path) for key, path in files.items()}
    generated = CodeDatasetSource(
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
        key = f"task.{name}_path" if f"task.{name}_path" in files else "task.path"
        source, tags = generated, {}
        if key in files:  # the file this split was read from
            source, tags = files[key], {FILE_DIGEST: digests[key], FILE_KEY: key}
        input_tags = [InputTag(MLFLOW_DATASET_CONTEXT, contexts[name])]
        input_tags += [InputTag(tag, value) for tag, value in tags.items()]
        if isinstance(split, StoredSplit):  # described, not read: its store's fingerprint
            dataset = _stored(split, source, f"{task.name}-{name}")
            input_tags += [
                InputTag("rows", str(len(split))),
                InputTag(STORE_FINGERPRINT, split.fingerprint),
            ]
            out.append(DatasetInput(dataset._to_mlflow_entity(), tags=input_tags))
            continue
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
        out.append(DatasetInput(dataset._to_mlflow_entity(), tags=input_tags))
    return out


def _stored(split: StoredSplit, source, name: str) -> MetaDataset:
    """A dataset input for a split in a token store, without reading it: its digest is the
    store's fingerprint (the file's SHA-256 and every setting it was encoded with)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The specified dataset source can be interpreted")
        if isinstance(source, str):
            source = resolve_dataset_source(source)
    return MetaDataset(source, name=name, digest=split.fingerprint[:8])


def data_files(section) -> dict[str, str]:
    """The files of yours a task section reads, by config key: `task.path`, or
    `task.train_path`, `task.val_path` and `task.test_path` (its fields named `path` or
    `*_path` that are set)."""
    return {
        f"task.{name}": value
        for name in type(section).model_fields
        if (name == "path" or name.endswith("_path")) and (value := getattr(section, name))
    }


def logged_digests(inputs) -> dict[str, str]:
    """The SHA-256 a run logged of each file it read, by config key, from its dataset inputs
    (`run.inputs.dataset_inputs`); empty for generated data."""
    out = {}
    for item in inputs:
        tags = {tag.key: tag.value for tag in item.tags}
        if FILE_DIGEST in tags:
            out[tags.get(FILE_KEY, "task.path")] = tags[FILE_DIGEST]
    return out
