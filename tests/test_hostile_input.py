"""Hostile input catalogue (issues 7, 6 and 43): every case gets a clear error or safe handling.

Layers, models and generation must raise a `ValueError` (or TensorFlow's
own index error) naming the bad argument; the CLI must exit with its
documented code before anything is created: no run in the store, no
checkpoint folder, no other file.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest
from experiments_helpers import TINY_TASKS, migrated_store, runs, snapshot, store_uri, write_config
from memory_helpers import alias_bomb
from scaleout_helpers import free_port

from experiments import config as config_lib
from experiments.commands import main
from experiments.tracking import resilient
from keras_attn_rnn import (
    AttentionDecoder,
    AttentionPooling,
    SequenceAttention,
    generation,
    models,
    samplers,
)

# --- layers, models, generation ---------------------------------------------------------


def _lm():
    return models.AttentiveLanguageModel(vocabulary_size=12, units=4, embedding_dim=4)


def _lambda_keras_file(folder: Path) -> Path:
    inputs = keras.Input((3,))
    outputs = keras.layers.Lambda(lambda x: x * 2)(inputs)
    path = folder / "lambda.keras"
    keras.Model(inputs, outputs).save(path)
    return path


LIBRARY = {
    "pooling_unknown_score": (lambda: AttentionPooling(score="dott"), "score='dott'"),
    "pooling_dropout_out_of_range": (lambda: AttentionPooling(dropout=1.5), "dropout"),
    "pooling_fixed_query_nan": (
        lambda: AttentionPooling(query="fixed", query_value=[float("nan")]),
        "finite",
    ),
    "pooling_rank_2_input": (
        lambda: AttentionPooling()(np.zeros((2, 3), "float32")),
        "rank 3",
    ),
    "sequence_attention_window_0": (lambda: SequenceAttention(window=0), "window"),
    "decoder_cell_not_a_cell": (lambda: AttentionDecoder(cell="lstm"), "cell"),
    "classifier_vocab_0": (
        lambda: models.AttentiveClassifier(vocabulary_size=0, num_classes=2),
        "vocabulary_size",
    ),
    "classifier_unknown_rnn": (
        lambda: models.AttentiveClassifier(vocabulary_size=5, num_classes=2, rnn="rnn"),
        "rnn",
    ),
    "seq2seq_unknown_decoder": (
        lambda: models.Seq2Seq(
            source_vocabulary_size=5, target_vocabulary_size=5, decoder="transformer"
        ),
        "decoder",
    ),
    "generate_unknown_strategy": (
        lambda: generation.generate(_lm(), [[3]], 2, sampler="nucleus"),
        "sampler",
    ),
    "generate_max_length_0": (lambda: generation.generate(_lm(), [[3]], 0), "max_length"),
    "generate_top_k_0": (
        lambda: generation.generate(_lm(), [[3]], 2, sampler=samplers.get("top_k", k=0)),
        "k",
    ),
    "generate_nan_temperature": (
        lambda: generation.generate(
            _lm(), [[3]], 2, sampler=samplers.get("sample", temperature=float("nan"))
        ),
        "temperature",
    ),
    "generate_ids_outside_vocab": (
        lambda: generation.generate(_lm(), [[50, 3]], 2),
        r"\[0, 12\)",
    ),
    "generate_empty_prompt": (lambda: generation.generate(_lm(), [[]], 2), "at least one"),
}


@pytest.mark.parametrize("case", sorted(LIBRARY))
def test_library_rejects_bad_arguments(case):
    build, message = LIBRARY[case]
    with pytest.raises(ValueError, match=message):
        build()


def test_generate_huge_max_length_is_a_clear_error():
    with pytest.raises(ValueError, match="max_length"):
        generation.generate(_lm(), [[3]], 10**12)


def test_token_ids_outside_the_vocabulary_are_an_error_not_garbage():
    model = models.AttentiveClassifier(vocabulary_size=10, num_classes=2, units=4, embedding_dim=4)
    with pytest.raises(Exception, match=r"not in \[0, 10\)"):
        model(np.array([[100, 2]], "int32"))


def test_nan_inputs_stay_in_their_own_row():
    x = np.random.default_rng(0).random((2, 5, 4)).astype("float32")
    x[1, 2, 0] = np.nan
    layer = AttentionPooling()
    both, alone = np.asarray(layer(x)), np.asarray(layer(x[:1]))
    assert np.isfinite(both[0]).all() and np.isnan(both[1]).any()
    np.testing.assert_allclose(both[0], alone[0], atol=1e-6)


def test_keras_file_with_lambda_layer_is_refused(tmp_path):
    path = _lambda_keras_file(tmp_path)
    with pytest.raises(ValueError, match="safe_mode"):
        resilient.load_keras(path)
    with pytest.raises(ValueError, match="safe_mode"):
        keras.saving.load_model(path)  # Keras's default is safe too


# --- the CLI: configs, flags and data files ------------------------------------------------


def _bytes(name: str, data: bytes):
    return lambda folder: (folder / name).write_bytes(data)


def _text(name: str, text: str):
    return lambda folder: (folder / name).write_text(text, encoding="utf-8")


def _link(name: str, target: str):
    return lambda folder: (folder / name).symlink_to(target)


def _dir(name: str):
    return lambda folder: (folder / name).mkdir()


def _fifo(name: str):
    return lambda folder: os.mkfifo(folder / name)


BINARY = bytes(range(256)) * 8


def _task(name: str, **fields) -> str:
    """A `--set task={...}` override replacing the whole task section."""
    items = ", ".join(f"{k}: {v}" for k, v in {"name": name, **fields}.items())
    return f"task={{{items}}}"


# name: (files to create, extra argv after `run CONFIG`, exit code, text the error contains)
CLI = {
    "yaml_python_object_tag": (
        _text("evil.yaml", '!!python/object/apply:os.system ["touch PWNED"]\n'),
        ["@evil.yaml"],
        2,
        "invalid YAML",
    ),
    "yaml_top_level_list": (_text("list.yaml", "- a\n- b\n"), ["@list.yaml"], 2, "mapping"),
    "binary_config_file": (_bytes("bin.yaml", BINARY), ["@bin.yaml"], 2, "bin.yaml"),
    "config_path_is_a_folder": (
        _dir("folder.yaml"),
        ["@folder.yaml"],
        2,
        "folder.yaml is a directory",
    ),
    "config_path_is_a_fifo": (_fifo("pipe.yaml"), ["@pipe.yaml"], 2, "pipe.yaml is a FIFO"),
    "config_file_over_1_mib": (
        _text("big.yaml", "task: {name: needle}\n" + "#" * (1 << 20) + "\n"),
        ["@big.yaml"],
        2,
        "big.yaml holds more than 1048576 bytes",
    ),
    "yaml_alias_bomb": (  # 531,441 values in 381 bytes
        _text("bomb.yaml", alias_bomb(6)),
        ["@bomb.yaml"],
        2,
        "bomb.yaml: refused: more than 100000 values once its aliases (*name) are expanded",
    ),
    "yaml_alias_inside_itself": (
        _text("loop.yaml", "task: &t {name: needle, x: [*t]}\n"),
        ["@loop.yaml"],
        2,
        "an alias inside the value it names (line 1, column 29)",
    ),
    "yaml_nested_too_deep": (
        _text("deep.yaml", "task: " + "[" * 5000 + "]" * 5000 + "\n"),
        ["@deep.yaml"],
        2,
        "deep.yaml: refused: values nested more than 64 deep",
    ),
    "int_past_4300_digits_in_set": (
        None,
        ["--set", "train.epochs=1" + "0" * 5000],
        2,
        "--set train.epochs: invalid YAML",
    ),
    "huge_sequence_length": (None, ["--set", "task.max_length=1000000000"], 2, "task.max_length"),
    "huge_lm_window": (
        None,
        [_task("lm", seq_length=1000000000)],
        2,
        "task.seq_length",
    ),
    "float_epochs": (None, ["--set", "train.epochs=1.5"], 2, "train.epochs"),
    "list_learning_rate": (None, ["--set", "train.learning_rate=[0.1]"], 2, "learning_rate"),
    "nan_learning_rate": (None, ["--set", "train.learning_rate=.nan"], 2, "learning_rate"),
    "inf_batch_size": (None, ["--set", "train.batch_size=.inf"], 2, "train.batch_size"),
    "python_tag_in_set": (
        None,
        ["--set", "tracking.tags=!!python/name:os.system"],
        2,
        "tracking.tags",
    ),
    "unknown_distribute": (None, ["--set", "train.distribute=tpu"], 2, "train.distribute"),
    "multi_worker_without_tf_config": (
        None,
        ["--set", "train.distribute=multi_worker"],
        2,
        "TF_CONFIG",
    ),
    "empty_data_file": (
        _text("empty.csv", ""),
        [_task("textcls", path="empty.csv", max_length=12)],
        2,
        "0 rows",
    ),
    "binary_data_file": (
        _bytes("blob.csv", BINARY),
        [_task("textcls", path="blob.csv", max_length=12)],
        2,
        "not a readable UTF-8 CSV",
    ),
    "wrong_csv_columns": (
        _text("cols.csv", "review,stars\ngood,5\nbad,1\nok,3\nmeh,2\n"),
        [_task("textcls", path="cols.csv", max_length=12)],
        2,
        "lacks the field 'text'",
    ),
    "labels_missing": (
        _text("nolabel.csv", "text,label\ngood\nbad\nok\nmeh\n"),
        [_task("textcls", path="nolabel.csv", max_length=12)],
        2,
        "has no 'label'",
    ),
    "jsonl_broken_line": (
        _text("broken.jsonl", '{"text": "a", "label": 1}\n{"text": \n'),
        [_task("textcls", path="broken.jsonl", max_length=12)],
        2,
        "not a readable UTF-8 JSONL",
    ),
    "jsonl_nested_too_deep": (
        _text("deep.jsonl", '{"text": "a", "label": "x"}\n' + "[" * 100_000 + "\n"),
        [_task("textcls", path="deep.jsonl", max_length=12, max_row_chars=200_000)],
        2,
        "deep.jsonl nests arrays or objects deeper than",
    ),
    "jsonl_row_not_object": (
        _text("lists.jsonl", '["a", 1]\n' * 5),
        [_task("textcls", path="lists.jsonl", max_length=12)],
        2,
        "not an object",
    ),
    "data_path_is_a_folder": (
        _dir("dir.csv"),
        [_task("textcls", path="dir.csv", max_length=12)],
        2,
        "dir.csv is a directory",
    ),
    "data_path_is_a_fifo": (
        _fifo("pipe.csv"),
        [_task("textcls", path="pipe.csv", max_length=12)],
        2,
        "pipe.csv is a FIFO (named pipe)",
    ),
    "label_with_a_nul_byte": (
        _text("nul.csv", "text,label\ngood,pos\nbad,neg\nfine,pos\nawful,neg\x00\n"),
        [_task("textcls", path="nul.csv", max_length=12)],
        2,
        "row 4 (line 5) of",
    ),
    "jsonl_label_with_a_nul_byte": (
        _text("nul.jsonl", "".join(f'{{"text": "t{i}", "label": "a\\u0000"}}\n' for i in range(5))),
        [_task("textcls", path="nul.jsonl", max_length=12)],
        2,
        "'a\\x00' holds the control character U+0000",
    ),
    "label_of_a_whole_text": (
        _text("long.csv", "text,label\n" + "".join(f"t{i},{'x' * 201}\n" for i in range(5))),
        [_task("textcls", path="long.csv", max_length=12)],
        2,
        "value is 201 characters long",
    ),
    "labels_past_max_labels": (
        _text("many.csv", "text,label\n" + "".join(f"text {i},c{i}\n" for i in range(61))),
        [_task("textcls", path="many.csv", max_length=12, max_labels=60)],
        2,
        "many.csv holds 61 distinct 'label' values (labels); expected at most task.max_labels=60",
    ),
    "row_past_max_row_chars": (
        _text("wide.csv", "text,label\n" + "good,pos\n" * 4 + "x" * 150 + ",neg\n"),
        [_task("textcls", path="wide.csv", max_length=12, max_row_chars=100)],
        2,
        "task.max_row_chars: line 6 of",
    ),
    "quoted_field_of_many_lines_past_max_row_chars": (
        _text("lines.csv", 'text,label\ngood,pos\n"' + "x\n" * 150 + '",neg\n'),
        [_task("textcls", path="lines.csv", max_length=12, max_row_chars=100)],
        2,
        "the row ending on line 53 of",
    ),
    "symlink_outside_project_to_non_data": (
        _link("passwd.csv", "/etc/passwd"),
        [_task("textcls", path="passwd.csv", max_length=12)],
        2,
        "links to /etc/passwd",
    ),
    "lm_binary_text": (
        _bytes("blob.txt", b"\xff\xfe\x00" * 400),
        [_task("lm", path="blob.txt")],
        2,
        "not UTF-8",
    ),
    "lm_vocabulary_too_small_for_its_characters": (
        _text(
            "han.txt", "".join(chr(0x4E00 + i) + ("\n" if i % 20 == 19 else "") for i in range(800))
        ),
        [_task("lm", path="han.txt", units="subword", max_vocab=300)],
        2,
        "task.max_vocab: the tokenizer could not learn a vocabulary of at most 300 tokens",
    ),
    "lm_empty_text": (
        _text("empty.txt", ""),
        [_task("lm", path="empty.txt", seq_length=8)],
        2,
        "0 characters",
    ),
    "lm_device_file": (
        None,
        [_task("lm", path="/dev/zero")],
        2,
        "/dev/zero is a character device",
    ),
    "lm_path_is_a_folder": (
        _dir("texts"),
        [_task("lm", path="texts")],
        2,
        "is a directory",
    ),
}


def _argv(extra: list[str], folder: Path) -> list[str]:
    """`run CONFIG` plus overrides; bare `key=value` items become `--set key=value`."""
    config = folder / "config.yaml"
    out, items = [], list(extra)
    if items and items[0].startswith("@"):
        config = folder / items.pop(0)[1:]
    for item in items:
        out += [item] if item.startswith("--") or out[-1:] == ["--set"] else ["--set", item]
    return ["run", str(config), *out]


@pytest.fixture(scope="module")
def template_store(tmp_path_factory):
    """One store with an experiment, created once (creating a SQLite store takes seconds)."""
    import mlflow

    folder = tmp_path_factory.mktemp("template")
    mlflow.MlflowClient(migrated_store(folder)).create_experiment("tests")
    return folder / "mlruns"


@pytest.fixture
def sandbox(tmp_path, monkeypatch, template_store):
    """An existing store, a tiny config, and a checkpoint folder that must never appear."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri(tmp_path))
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(template_store, tmp_path / "mlruns")
    write_config(tmp_path, TINY_TASKS["needle"], train={"checkpoint_dir": str(tmp_path / "ck")})
    return tmp_path


@pytest.mark.parametrize("case", sorted(CLI))
def test_cli_rejects_hostile_input_and_writes_nothing(case, sandbox, capsys):
    setup, extra, code, message = CLI[case]
    if setup is not None:
        setup(sandbox)
    before = snapshot(sandbox)
    assert main(_argv(extra, sandbox)) == code
    err = capsys.readouterr().err
    assert message in err, err
    assert snapshot(sandbox) == before  # no run, no checkpoint, no stray file
    assert runs(store_uri(sandbox)) == []
    assert not (sandbox / "PWNED").exists()


def test_a_long_value_is_shown_shortened_in_the_error(sandbox, capsys):
    assert main(_argv(["--set", "train.epochs=" + "9x" * 50_000], sandbox)) == 2
    err = capsys.readouterr().err
    assert "train.epochs: got '9x9x9x" in err, err[:300]
    got = err.split("got ", 1)[1].split("; expected", 1)[0]
    assert "..." in got and len(got) <= 200  # not the 100,000 characters received


def test_symlink_to_data_outside_the_project_is_followed_and_recorded(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    real = outside / "reviews.csv"
    real.write_text("text,label\n" + "good film,pos\nbad film,neg\n" * 4, encoding="utf-8")
    (tmp_path / "project").mkdir()
    link = tmp_path / "project" / "data.csv"
    link.symlink_to(real)
    path = write_config(tmp_path / "project", {"name": "textcls", "path": "data.csv"})
    cfg = config_lib.load_config(path)
    assert cfg.task.path == str(real.resolve())  # the real file is what gets logged


def test_unreachable_tracking_server_exits_3_and_writes_nothing(sandbox, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("ATTN_RNN_TRACKING_TIMEOUT", "0.5")
    before = snapshot(sandbox)
    assert main(_argv([], sandbox)) == 3
    assert "did not answer" in capsys.readouterr().err
    assert snapshot(sandbox) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["frobnicate"],
        ["ui", "--port", "http"],
        ["run"],
        ["sweep", "x.yaml", "--grid"],
    ],
    ids=["unknown_command", "ui_port_not_int", "run_without_config", "grid_without_value"],
)
def test_bad_cli_flags_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["resume", "sync"])
def test_run_id_with_path_traversal_exits_2(command, sandbox, capsys):
    before = snapshot(sandbox)
    assert main([command, "../../etc/passwd"]) == 2
    assert "run_id" in capsys.readouterr().err
    assert snapshot(sandbox) == before


def test_ui_binds_localhost_unless_host_is_given(capsys):
    assert main(["ui", "--dry-run"]) == 0
    assert "--host 127.0.0.1" in capsys.readouterr().out
    assert main(["ui", "--dry-run", "--host", "0.0.0.0"]) == 0
    captured = capsys.readouterr()
    assert "--host 0.0.0.0" in captured.out and "warning" in captured.err


def test_nothing_is_unpickled():
    root = Path(__file__).resolve().parents[1] / "experiments"
    text = "\n".join(p.read_text(encoding="utf-8") for p in root.rglob("*.py"))
    for pattern in (
        r"import pickle",
        r"pickle\.loads?\(",
        r"allow_pickle=True",
        r"yaml\.(unsafe_)?load\(",
        r"safe_mode=False",
        r"\beval\(",
    ):
        assert not re.search(pattern, text), pattern
