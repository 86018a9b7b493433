"""The final numbers (issue 21): after early stopping the best epoch's weights are evaluated and
logged, on the whole test split, and a resume after the stop trains no further epoch."""

from __future__ import annotations

from pathlib import Path

import keras
import mlflow
import numpy as np
import pytest
import yaml
from experiments_helpers import TINY_TASKS, migrated_store, runs, write_config
from scaleout_helpers import metric_steps

from experiments.commands import main
from experiments.config import validate
from experiments.data import metrics
from experiments.data.modeling import GREEDY
from experiments.kinds import seq2seq
from experiments.training import callbacks
from experiments.training import run as training_run
from experiments.training.callbacks import Checkpoint
from keras_attn_rnn.plotting import plot_attention

# No later epoch can beat the first by `min_delta`: the run stops after its second epoch,
# whose weights are not the best.
STOPS_AFTER_TWO = {"monitor": "val_loss", "min_delta": 100.0, "patience": 1}
# Fewer rows than the test split's 6: the per-epoch subset is not what the test reports.
TRAIN = {"eval_examples": 2, "keep_checkpoints": True}  # the tests read the weights


def _run(
    folder: Path,
    uri: str,
    log_model: bool = False,
    task: dict = TINY_TASKS["needle"],
    model: dict | None = None,
    **train,
) -> mlflow.entities.Run:
    """One `run` of a tiny task (`needle`) into its own experiment (named after `folder`)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = write_config(
        folder,
        task,
        model=model or {},
        train={**TRAIN, "checkpoint_dir": str(folder / "ck"), **train},
        tracking={"experiment": folder.name, "log_model": log_model},
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        assert main(["run", str(config)]) == 0
    (run,) = runs(uri, folder.name)
    return run


def _test_metrics(run) -> dict[str, float]:
    return {k: v for k, v in run.data.metrics.items() if k.startswith("test_")}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Runs shared by the tests: one epoch only, and three epochs that stop after two."""
    folder = tmp_path_factory.mktemp("best")
    uri = migrated_store(folder)
    one = _run(folder / "one", uri, True, epochs=1)
    stopped = _run(folder / "stopped", uri, True, epochs=3, early_stopping=STOPS_AFTER_TWO)
    return folder, uri, one, stopped


@pytest.mark.slow
@pytest.mark.xdist_group("best_epoch")  # one worker makes `reference`
def test_early_stopping_evaluates_the_best_epoch_on_the_whole_test_split(reference):
    folder, uri, one, stopped = reference
    steps = metric_steps(mlflow.MlflowClient(uri), stopped.info.run_id)
    assert steps["loss"] == [1, 2]
    # A reference on every test row, from the one-epoch run's checkpointed weights.
    cfg = validate(yaml.safe_load((folder / "one" / "config.yaml").read_text()))
    prepared = training_run.validate(cfg)
    task = prepared.task
    model = task.kind.build_model(prepared.cfg, task)
    model(task.train.x[:2])
    (checkpoint,) = (folder / "one" / "ck").glob("*/epoch-0000")
    model.load_weights(checkpoint / "model.weights.h5")
    assert len(task.test) > TRAIN["eval_examples"]
    full = task.kind.evaluate(model, task, task.test)
    expected = _test_metrics(one)
    for key, value in full.items():
        assert expected[f"test_{key}"] == pytest.approx(value, rel=1e-5), key
    # The weights evaluated are the first epoch's, as a run of one epoch has them.
    got = _test_metrics(stopped)
    assert got.keys() == expected.keys() and "test_attention_entropy" in got
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-5), key
    assert stopped.data.metrics["best_epoch"] == 1
    assert stopped.data.params["val_eval_rows"] == str(TRAIN["eval_examples"])


@pytest.mark.slow
@pytest.mark.xdist_group("best_epoch")  # one worker makes `reference`
def test_the_logged_model_holds_the_best_epochs_weights(reference):
    folder, uri, one, stopped = reference
    outputs = [
        np.load(
            mlflow.artifacts.download_artifacts(
                run_id=run.info.run_id, artifact_path="expected_output.npy", tracking_uri=uri
            )
        )
        for run in (one, stopped)
    ]
    # What the logged model serves for its input example: the first epoch's logits.
    np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-5, atol=1e-6)
    assert "model_uri" in stopped.data.tags
    # Only the best epoch's weights are kept beside the checkpoint.
    (run_dir,) = (folder / "stopped" / "ck").iterdir()
    assert sorted(p.name for p in run_dir.glob("best-*")) == ["best-0000.weights.h5"]


def test_the_final_heatmaps_name_the_epoch_of_the_weights_they_show(tmp_path, monkeypatch):
    """Two epochs, the first the best: the final heatmaps are of its weights, and say so."""
    titles = []

    def plot(**kwargs):
        titles.append(kwargs["title"])
        return plot_attention(**kwargs)

    monkeypatch.setattr(callbacks.plotting, "plot_attention", plot)
    run = _run(
        tmp_path / "best", migrated_store(tmp_path), epochs=2, early_stopping=STOPS_AFTER_TWO
    )
    assert run.data.metrics["best_epoch"] == 1
    assert titles and all(title.endswith("(epoch 1)") for title in titles), titles


class _KillAfterCheckpoint(keras.callbacks.Callback):
    """Ctrl+C once the stopping epoch (index 1) is checkpointed, before MLflow logs it."""

    def on_epoch_end(self, epoch, logs=None):
        if epoch == 1:
            raise KeyboardInterrupt


def _kill_after_checkpoint(monkeypatch) -> None:
    original = training_run.make_callbacks

    def patched(*args, **kwargs):
        callbacks = original(*args, **kwargs)
        index = next(i for i, c in enumerate(callbacks) if isinstance(c, Checkpoint))
        return [*callbacks[: index + 1], _KillAfterCheckpoint(), *callbacks[index + 1 :]]

    monkeypatch.setattr(training_run, "make_callbacks", patched)


def _kill_in_finish(monkeypatch) -> None:
    def killed(*args, **kwargs):  # fit returned: killed before the test metrics
        raise KeyboardInterrupt

    monkeypatch.setattr(training_run, "_finish", killed)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kill", [_kill_after_checkpoint, _kill_in_finish], ids=["checkpoint", "finish"]
)
def test_a_kill_after_the_early_stop_then_resume_equals_uninterrupted(reference, kill):
    folder, uri, _, stopped = reference
    name = f"killed-{kill.__name__}"
    with pytest.MonkeyPatch.context() as patch:
        kill(patch)
        with pytest.raises(KeyboardInterrupt):
            _run(folder / name, uri, epochs=3, early_stopping=STOPS_AFTER_TWO)
    (killed_run,) = runs(uri, name)
    assert killed_run.info.status == "KILLED"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        assert main(["resume", killed_run.info.run_id]) == 0

    client = mlflow.MlflowClient(uri)
    resumed = client.get_run(killed_run.info.run_id)
    assert resumed.info.status == "FINISHED"
    # The same epochs (none trained after the stop, each logged once), the same numbers.
    assert metric_steps(client, resumed.info.run_id) == metric_steps(client, stopped.info.run_id)
    assert resumed.data.metrics["best_epoch"] == 1
    got, expected = _test_metrics(resumed), _test_metrics(stopped)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-5), key


@pytest.mark.slow
def test_seq2seq_test_metrics_score_every_test_row(tmp_path, monkeypatch):
    # Decoded 8 sources at a time, the per-epoch subset 2 rows: neither is the test split.
    monkeypatch.setattr(seq2seq, "EVAL_BATCH", 8)
    finished = {}
    finish = training_run._finish

    def spy(model, cfg, task, *args, **kwargs):
        finished.update(model=model, task=task)
        finish(model, cfg, task, *args, **kwargs)

    monkeypatch.setattr(training_run, "_finish", spy)
    task = {
        "name": "reverse",
        "num_examples": 300,
        "alphabet_size": 2,
        "min_length": 1,
        "max_length": 4,
        "test_fraction": 0.2,
        "num_probes": 1,
    }
    run = _run(
        tmp_path / "reverse",
        migrated_store(tmp_path),
        task=task,
        model={"units": 16},
        epochs=6,
        learning_rate=0.05,
        run_eagerly=False,  # six epochs: quicker traced
    )
    model, test = finished["model"], finished["task"].test
    assert len(test) > 8 and len(test) % 8 and len(test) > TRAIN["eval_examples"]
    # A reference on every test row at once: one forward pass, one greedy decode.
    logits = np.asarray(model(test.inputs, training=False))
    decoded = seq2seq.Seq2Seq().decode(model, GREEDY, test.x, test.y.shape[1])
    token_accuracy = metrics.token_accuracy(test.y, logits)
    exact_match = metrics.exact_match(test.y, decoded)
    assert 0 < exact_match < 1  # some rows right, some wrong: a lost row would show
    got = run.data.metrics
    assert got["test_token_accuracy"] == pytest.approx(token_accuracy, rel=1e-5)
    assert got["test_exact_match_greedy"] == pytest.approx(exact_match, rel=1e-6)
