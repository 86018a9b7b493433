"""End-to-end CLI runs on tiny configs: what each run leaves in the MLflow store."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest
from experiments_helpers import (
    LEGACY_METRICS,
    TINY_TASKS,
    ModelLoader,
    artifact_paths,
    documented_metrics,
    image_steps,
    runs,
    snapshot,
    use_store,
    write_config,
    write_text_dataset,
)
from PIL import Image

from experiments.commands import main
from experiments.tracking.tracker import ARTIFACT_THREAD

TAGS = {
    "task",
    "model",
    "score",
    "git_commit",
    "keras_backend",
    "tensorflow_version",
    "tf_thread_pools",
    "tf_cpu_allocator",
    "keras_version",
}
TAGS |= {"mlflow_version", "device", "checkpoint_dir", "model_uri", "text_model_uri"}
COMMON_METRICS = {"loss", "val_loss", "epoch_seconds", "tokens_per_second"}
COMMON_METRICS |= {"peak_memory_mb", "train_peak_memory_mb", "run_peak_memory_mb"}
COMMON_METRICS |= {"val_attention_entropy", "test_attention_entropy", "duplicate_rows"}
BASELINE = {"baseline_test_accuracy", "baseline_test_macro_f1"}  # every classification run
TASK_METRICS = {
    "needle": {"train_accuracy", "val_accuracy", "val_macro_f1", "val_alignment_accuracy"}
    | BASELINE,
    "textcls": {"train_accuracy", "val_accuracy", "val_macro_f1"} | BASELINE,
    "reverse": {"val_token_accuracy", "val_exact_match_greedy", "val_alignment_accuracy"},
    "dates": {"val_token_accuracy", "val_exact_match_greedy"},
    "addition": {"val_token_accuracy", "val_exact_match_greedy"},
    "lm": {"val_perplexity", "val_bits_per_char"},
}
SAMPLES = {"reverse": 2, "lm": 2}


def _artifact_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(ARTIFACT_THREAD)}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh SQLite store in tmp_path, used through MLFLOW_TRACKING_URI."""
    return use_store(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def loader(tmp_path_factory):
    """One fresh process loading every task's model (started early: imports overlap training)."""
    process = ModelLoader(tmp_path_factory.mktemp("loader"))
    yield process
    process.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TASK_METRICS))
def test_run_logs_everything(name, loader, store, tmp_path, capsys):
    task = dict(TINY_TASKS[name])
    if name == "textcls":
        task["path"] = str(write_text_dataset(tmp_path))
    tracking = {"num_samples": SAMPLES.get(name, 0)}
    config = write_config(tmp_path, task, tracking=tracking)

    assert main(["run", str(config)]) == 0
    assert "run id:" in capsys.readouterr().out

    (run,) = runs(store)
    assert run.info.status == "FINISHED"
    params = run.data.params
    assert params["task.name"] == name
    assert params["train.epochs"] == "1"
    assert params["model.attention.score"] not in ("None", "")  # resolved default
    assert set(run.data.tags) >= TAGS, TAGS - set(run.data.tags)
    assert run.data.tags["task"] == name
    expected = COMMON_METRICS | TASK_METRICS[name]
    assert expected <= set(run.data.metrics), expected - set(run.data.metrics)
    assert not LEGACY_METRICS & set(run.data.metrics)  # the names before the split prefixes
    # Each of ours (MLflow's system/ metrics aside) in the docs' table of metrics.
    documented = documented_metrics()
    ours = {k for k in run.data.metrics if not k.startswith("system/")}
    assert {k for k in ours if not documented.fullmatch(k)} == set()
    assert all(math.isfinite(v) for v in run.data.metrics.values())
    assert all(0 <= run.data.metrics[k] <= 1 for k in BASELINE & expected)

    files = artifact_paths(store, run.info.run_id)
    assert {"config.yaml", "vocab.json", "input_example.json", "expected_output.npy"} <= files
    assert image_steps(files) == {"attention_probe_0": {0, 1}}  # untrained, then each epoch
    assert "heatmaps/final/probe_0.png" in files
    if name in ("needle", "textcls"):
        assert {"confusion_matrix.png", "confusion_matrix.json"} <= files
    if name in SAMPLES:
        assert {"samples/epoch_001.json", "samples/final.csv"} <= files

    # The Keras-flavor model serves in a process that cannot import the library:
    # greedy ids (exactly) or logits, as the runner computed them in-process.
    result = loader.check(store, run.info.run_id, run.data.tags["model_uri"])
    assert "error" not in result, result.get("error")
    assert result["shape"] == result["expected_shape"], result
    exact = name not in ("needle", "textcls")  # generated ids; logits up to float noise
    assert result["max_abs_diff"] <= (0 if exact else 1e-4), result
    assert run.data.tags["text_model_uri"].startswith("models:/")


@pytest.mark.slow
@pytest.mark.parametrize(
    "task, attention, train",
    [
        (
            {**TINY_TASKS["reverse"], "test_min_length": 7, "test_max_length": 12},
            {"mechanism": "monotonic", "mode": "parallel", "score_bias_init": -1.0},
            {"alignment_loss_weight": 1.0, "coverage_loss_weight": 0.5},
        ),
        (
            {**TINY_TASKS["addition"], "test_digits": 4},
            {"mechanism": "location", "filters": 2, "kernel_size": 3},
            {},
        ),
        (TINY_TASKS["needle"], {"normalizer": "sparsemax"}, {"alignment_loss_weight": 0.5}),
    ],
    ids=["reverse-monotonic-supervised", "addition-location", "needle-sparsemax-supervised"],
)
def test_mechanisms_attention_losses_and_length_buckets(task, attention, train, store, tmp_path):
    config = write_config(
        tmp_path,
        task,
        model={"attention": attention},
        train={**train, "epochs": 2},
        tracking={"log_model": False},
    )
    assert main(["run", str(config)]) == 0
    (run,) = runs(store)
    assert run.info.status == "FINISHED"
    params, metrics = run.data.params, run.data.metrics
    for key, value in attention.items():
        assert params[f"model.attention.{key}"] == str(value)
    assert all(math.isfinite(v) for v in metrics.values())
    files = artifact_paths(store, run.info.run_id)
    if "test_min_length" in task or "test_digits" in task:
        longer = ["len_7_8", "len_9_10", "len_11_12"] if "test_min_length" in task else []
        longer = longer or ["len_3_3", "len_4_4"]  # addition: digits of the longer operand
        seen = {
            k.removeprefix("test_exact_match_greedy_")
            for k in metrics
            if "exact_match_greedy_len_" in k
        }
        assert set(longer) < seen and len(seen) == len(longer) + 1, seen  # + the test split's
        for name in seen:
            assert 0.0 <= metrics[f"test_exact_match_greedy_{name}"] <= 1.0, name
            assert f"test_token_accuracy_{name}" in metrics
            # and with the output length given (the oracle length)
            assert 0.0 <= metrics[f"test_exact_match_oracle_{name}"] <= 1.0, name
            if "test_min_length" in task:  # reverse has a ground-truth alignment
                assert 0.0 <= metrics[f"test_alignment_accuracy_{name}"] <= 1.0, name
        assert 0.0 <= metrics["test_exact_match_oracle"] <= 1.0
        assert {"length_generalisation.json", "length_generalisation.png"} <= files
    else:
        assert not any("_len_" in key for key in metrics)
        assert "length_generalisation.json" not in files


def test_the_alignment_loss_adds_to_the_training_loss():
    """The supervised model's loss is the task loss plus weight x the alignment loss."""
    import keras
    import numpy as np

    from experiments import config as config_lib
    from experiments.training import run as training_run
    from experiments.training import supervision
    from keras_attn_rnn import losses

    cfg = config_lib.validate(
        {
            "task": TINY_TASKS["reverse"],
            "model": {"units": 8, "embedding_dim": 8},
            "train": {"alignment_loss_weight": 2.0, "run_eagerly": True},
        }
    )
    prepared = training_run.validate(cfg)
    task = prepared.task
    model = task.kind.build_model(prepared.cfg, task)
    trained = supervision.wrap(model, prepared.cfg)
    assert isinstance(trained, supervision.SupervisedAttention)
    part = task.train.take(slice(0, 8))
    logits = trained(supervision.fit_inputs(trained, part))
    (added,) = trained.losses
    _, alignments = model(part.inputs, return_attention_scores=True)
    expected = 2.0 * np.mean(
        keras.ops.convert_to_numpy(losses.alignment_loss(part.alignment, alignments))
    )
    np.testing.assert_allclose(keras.ops.convert_to_numpy(added), expected, rtol=1e-5)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(logits),
        keras.ops.convert_to_numpy(model(part.inputs)),
        atol=1e-6,
    )
    assert supervision.task_model(trained) is model


@pytest.mark.slow
@pytest.mark.parametrize("name", ["reverse", "textcls"])
def test_runs_are_worth_reviewing(name, store, tmp_path):
    """Stepped attention images per probe and epoch, final labelled heatmaps, the HTML probe
    view (classification), dataset inputs with digests and contexts, system metrics."""
    import mlflow

    task = dict(TINY_TASKS[name], num_probes=2)
    if name == "textcls":
        task["path"] = str(write_text_dataset(tmp_path))
    config = write_config(tmp_path, task, train={"epochs": 2}, tracking={"log_model": False})
    assert main(["run", str(config)]) == 0
    (run,) = runs(store)
    files = artifact_paths(store, run.info.run_id)
    assert image_steps(files) == {"attention_probe_0": {0, 1, 2}, "attention_probe_1": {0, 1, 2}}
    assert {"heatmaps/final/probe_0.png", "heatmaps/final/probe_1.png"} <= files
    assert not any(path.startswith("heatmaps/epoch") for path in files)
    # every step of a stepped image carries the probe's tokens: a white margin with dark text
    (step_image,) = [
        p
        for p in files
        if p.startswith("images/attention_probe_0+step+2+") and "compressed" not in p
    ]
    pixels = np.asarray(
        Image.open(mlflow.MlflowClient(store).download_artifacts(run.info.run_id, step_image))
    )
    assert (pixels[0, 0] == 255).all() and (pixels[:, :8] < 128).any(), pixels.shape
    if name == "textcls":
        page = mlflow.MlflowClient(store).download_artifacts(run.info.run_id, "probes.html")
        text = Path(page).read_text(encoding="utf-8")
        assert text.count("class='probe'") == 2 and "predicted" in text and "rgba(" in text
    inputs = {d.dataset.name: d for d in run.inputs.dataset_inputs}
    assert set(inputs) == {f"{name}-train", f"{name}-val", f"{name}-test"}
    contexts = {
        n: {t.key: t.value for t in d.tags}["mlflow.data.context"] for n, d in inputs.items()
    }
    assert contexts == {
        f"{name}-train": "training",
        f"{name}-val": "validation",
        f"{name}-test": "testing",
    }
    digests = {d.dataset.digest for d in inputs.values()}
    assert len(digests) == 3 and all(digests)
    train = inputs[f"{name}-train"].dataset
    tags = {n: {t.key: t.value for t in d.tags} for n, d in inputs.items()}
    rows = [  # a training split read from a file is stored, described by its rows
        int(tags[n]["rows"])
        if "rows" in tags[n]
        else json.loads(d.dataset.profile)["features_shape"]["x"][0]
        for n, d in inputs.items()
    ]
    assert sum(rows) == 64 and min(rows) > 0  # the tiny tasks' 64 examples, split
    if name != "textcls":
        schema = json.loads(json.loads(train.schema)["mlflow_tensorspec"]["features"])
        assert "x" in [column["name"] for column in schema]
    if name == "textcls":
        tags = {t.key: t.value for t in inputs[f"{name}-train"].tags}
        assert len(tags["file_sha256"]) == 64 and train.source_type == "local"
    else:
        assert train.source_type == "code" and '"seed": "0"' in train.source
    assert any(key.startswith("system/") for key in run.data.metrics), sorted(run.data.metrics)


@pytest.mark.slow
def test_sweep_creates_parent_nested_runs_and_comparison(store, tmp_path):
    config = write_config(tmp_path, TINY_TASKS["reverse"], tracking={"log_model": False})
    grid = "model.attention.score=dot,general,additive"
    threads = _artifact_threads()

    assert main(["sweep", str(config), "--grid", grid]) == 0

    assert _artifact_threads() == threads  # every run's artifact thread was stopped

    all_runs = runs(store)
    parents = [r for r in all_runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in all_runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 3
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert sorted(c.data.params["model.attention.score"] for c in children) == [
        "additive",
        "dot",
        "general",
    ]
    assert all(c.info.status == "FINISHED" for c in children)
    files = artifact_paths(store, parent.info.run_id)
    assert {"comparison.json", "comparison.csv", "comparison.png"} <= files
    for score in ("dot", "general", "additive"):  # each point's labelled final heatmap
        assert f"heatmaps/model.attention.score-{score}/probe_0.png" in files

    import json

    import mlflow

    local = mlflow.artifacts.download_artifacts(
        run_id=parent.info.run_id, artifact_path="comparison.json", tracking_uri=store
    )
    table = json.loads(Path(local).read_text())
    assert len(table["data"]) == 3
    assert {"run_id", "model.attention.score", "test_exact_match_greedy"} <= set(table["columns"])


def test_bad_grid_exits_2_before_any_run(store, tmp_path, capsys):
    config = write_config(tmp_path, TINY_TASKS["reverse"])
    before = snapshot(tmp_path / "mlruns")
    code = main(["sweep", str(config), "--grid", "model.attention.score=dot,dott"])
    assert code == 2
    assert "model.attention.score" in capsys.readouterr().err
    assert snapshot(tmp_path / "mlruns") == before and runs(store) == []


def test_heatmaps_render_off_the_training_thread_and_failures_fail_the_run(
    store, tmp_path, monkeypatch
):
    import threading

    from keras_attn_rnn import plotting

    threads = []

    def broken_plot(**kwargs):
        threads.append(threading.current_thread().name)
        raise RuntimeError("cannot draw")

    monkeypatch.setattr(plotting, "plot_attention", broken_plot)
    config = write_config(
        tmp_path, TINY_TASKS["needle"], train={"epochs": 2}, tracking={"log_model": False}
    )
    before = _artifact_threads()
    with pytest.raises(RuntimeError, match="cannot draw"):
        main(["run", str(config)])
    (run,) = runs(store)
    assert run.info.status == "FAILED"
    assert threads and all(name.startswith("mlflow-artifacts") for name in threads)
    assert _artifact_threads() == before  # stopped, also when the run failed
