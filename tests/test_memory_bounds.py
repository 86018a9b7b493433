"""Inputs that cannot exhaust memory (issue 43, item 7): each runs under a real limit.

Each hostile input once cost gigabytes (a YAML alias bomb 8.5 GB, a newline-free CSV
2.5 times its size, a 1,000-class confusion figure 9.3 GB, the linear baseline with
10,000 classes 7.5 GB, a megabyte string sent to the text model 3.7 GB). Each now runs
in a child process limited to what the same code needs for a harmless input plus a
small allowance (`memory_helpers.run_within`), and ends with a clear refusal or a
bounded result.
"""

from __future__ import annotations

import json

import pytest
from memory_helpers import MIB, alias_bomb, run_within

from experiments import bounded_input
from experiments.tracking import text_model

pytestmark = pytest.mark.slow  # each test starts four TensorFlow processes

# `python -m experiments run CONFIG`, reporting its exit code.
RUN = """
import sys
from experiments.commands import main
print("EXIT", main(["run", sys.argv[1]]), flush=True)
"""

# `TextClsTask.build` of a CSV file: the task's size, or the refusal.
TEXTCLS = """
import sys
from experiments import config
from experiments.errors import ConfigError
section = config.validate({"task": {"name": "textcls", "path": sys.argv[1], "max_length": 12}})
try:
    print("BUILT", len(section.task.build().class_names), flush=True)
except ConfigError as err:
    print("REFUSED", err, flush=True)
"""

# The end of a classification run (`final_artifacts`: confusion matrix JSON and figure,
# probes page) with CLASSES classes, two test rows each, an untrained model; the linear
# baseline, which has a test of its own below, answers at once.
FINAL_ARTIFACTS = """
import io, json, sys
import numpy as np
from experiments.data import baseline
from experiments import kinds
from experiments.data.split import Split
from experiments.data.task import Task
from experiments.data.vocab import Vocab
from keras_attn_rnn import models
classes = int(sys.argv[1])
baseline.linear_baseline = lambda train, test, num_classes: {"accuracy": 0.0}
rng = np.random.default_rng(0)
vocab = Vocab([f"w{i}" for i in range(300)], joiner=" ")
x = rng.integers(4, len(vocab), (2 * classes, 12)).astype("int32")
split = Split(x, (np.arange(2 * classes) % classes).astype("int32"))
names = [f"class {i}" for i in range(classes)]
task = Task("textcls", kinds.get("classification"), vocab, split, split, split, split.take(slice(0, 2)),
            class_names=names)
model = models.AttentiveClassifier(vocabulary_size=len(vocab), num_classes=classes, units=4,
                                   embedding_dim=4)
artifacts = kinds.get("classification").final_artifacts(model, task, split)
png = io.BytesIO()
artifacts.figures["confusion_matrix.png"].savefig(png, format="png")
matrix = json.dumps(artifacts.dicts["confusion_matrix.json"])
sizes = {"metrics": sorted(artifacts.metrics), "png": len(png.getvalue()), "json": len(matrix)}
print("DONE", json.dumps(sizes), flush=True)
"""

# The linear baseline alone, CLASSES classes of two training rows each.
BASELINE = """
import sys
import numpy as np
from experiments.data import baseline
from experiments.data.split import Split
classes = int(sys.argv[1])
rng = np.random.default_rng(0)
x = rng.integers(4, 20000, (2 * classes, 12)).astype("int32")
split = Split(x, (np.arange(2 * classes) % classes).astype("int32"))
print("SCORES", sorted(baseline.linear_baseline(split, split, classes)), flush=True)
"""

# The text model of an untrained `reverse` run, sent TEXT repeated TIMES times.
SERVE = """
import json, sys
import mlflow
from experiments import config
from experiments.tracking import text_model
from experiments.training import run as training_run
task = {"name": "reverse", "num_examples": 64, "max_length": 6, "num_probes": 2}
prepared = training_run.validate(config.validate(
    {"task": task, "model": {"embedding_dim": 8, "units": 8}, "generate": {"max_length": 8}}
))
task, cfg = prepared.task, prepared.cfg
model = task.kind.build_model(cfg, task)
model([part[:1] for part in task.train.inputs])
served = text_model.TextModel()
served.card = json.loads(json.dumps(task.kind.text_card(task, cfg)))
served.codec = text_model.TextCodec(served.card)
served.model = model
try:
    answer = served.predict(None, [sys.argv[1] * int(sys.argv[2])])
    print("ANSWERED", len(json.dumps(answer)), flush=True)
except mlflow.exceptions.MlflowException as err:
    print("REFUSED", err.error_code, err.message, flush=True)
"""


def _last(result, prefix: str) -> str:
    lines = [line for line in result.stdout.splitlines() if line.startswith(prefix)]
    assert lines, f"exit {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return lines[-1]


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    (tmp_path / "bomb.yaml").write_text(alias_bomb(9), encoding="utf-8")  # 387 million values
    (tmp_path / "typo.yaml").write_text("task: {name: needle, num_clases: 4}\n", encoding="utf-8")
    result, _ = run_within(RUN, ["typo.yaml"], ["bomb.yaml"], 128 * MIB, timeout=300, cwd=tmp_path)
    assert _last(result, "EXIT") == "EXIT 2"
    assert f"more than {bounded_input.MAX_YAML_VALUES} values" in result.stderr
    assert len(result.stderr) < 2000, result.stderr[:2000]  # the value is never printed
    assert not (tmp_path / "mlruns").exists()


def test_a_csv_without_newlines_is_refused_after_one_row(tmp_path):
    harmless = tmp_path / "ok.csv"
    harmless.write_text(
        "text,label\n" + "".join(f"text {i} here,c{i % 2}\n" for i in range(40)), encoding="utf-8"
    )
    hostile = tmp_path / "one_line.csv"
    with open(hostile, "w", encoding="utf-8") as handle:  # twice the allowance, no newline
        handle.write("text,label\n")
        for _ in range(128):
            handle.write("x" * MIB)
    result, _ = run_within(TEXTCLS, [str(harmless)], [str(hostile)], 64 * MIB, timeout=300)
    refused = _last(result, "REFUSED")
    assert "task.max_row_chars: line 2 of" in refused and str(hostile) in refused
    assert "longer than 1000000 characters" in refused


def test_the_confusion_matrix_of_a_thousand_classes_is_bounded():
    result, _ = run_within(FINAL_ARTIFACTS, ["3"], ["1000"], 256 * MIB, timeout=300)
    done = json.loads(_last(result, "DONE").removeprefix("DONE "))
    assert done["metrics"] == ["baseline_test_accuracy"]
    assert 0 < done["png"] < 2 * MIB  # 30 classes drawn, not a million cells
    assert done["json"] < MIB  # the non-zero cells (at most one per row), not a 1000² matrix


def test_the_linear_baseline_with_five_thousand_classes_is_bounded():
    result, _ = run_within(BASELINE, ["3"], ["5000"], 512 * MIB, timeout=300)
    assert _last(result, "SCORES") == "SCORES ['accuracy', 'macro_f1']"


def test_a_megabyte_string_sent_to_the_text_model_is_refused_at_once():
    result, _ = run_within(SERVE, ["abc", "1"], ["abc", str(350_000)], 128 * MIB, timeout=300)
    refused = _last(result, "REFUSED")
    assert "INVALID_PARAMETER_VALUE" in refused  # HTTP 400 from the scoring server
    assert f"at most {text_model.MAX_INPUT_CHARS} characters" in refused
    assert "Received: 1050000 characters at position 0" in refused
