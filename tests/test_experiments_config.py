"""Config schema, overrides and the CLI's fast paths (no training here)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from experiments_helpers import TINY_TASKS, migrated_store, snapshot, store_uri, write_config

from experiments import config as config_lib
from experiments import tasks
from experiments.commands import build_parser, main
from experiments.data.modeling import GREEDY
from experiments.ready_configs import directory as configs_dir
from experiments.training import run
from keras_attn_rnn import mechanisms, scores

# (config changes, --set overrides, text the error must contain)
BAD_CASES = {
    "unknown_top_key": ({"extra": {"a": 1}}, [], "extra"),
    "unknown_nested_key": ({}, ["train.epoch=3"], "train.epoch"),
    "wrong_type": ({}, ["train.batch_size=many"], "train.batch_size"),
    "negative_epochs": ({}, ["train.epochs=-1"], "train.epochs"),
    "zero_units": ({}, ["model.units=0"], "model.units"),
    "unknown_task": ({}, ["task.name=sorting"], "task.name"),
    "unknown_score": ({}, ["model.attention.score=dott"], "model.attention.score"),
    "unknown_rnn": ({}, ["model.rnn=transformer"], "model.rnn"),
    "bad_set_syntax": ({}, ["train.epochs"], "train.epochs"),
    "bad_set_yaml": ({}, ["train.epochs=[1"], "train.epochs"),
    "missing_textcls_file": (
        {"task": {"name": "textcls", "path": "/no/such/file.csv"}},
        [],
        "task.path",
    ),
    "textcls_without_path": ({"task": {"name": "textcls"}}, [], "task.path"),
    "min_above_max": ({}, ["task.min_length=20", "task.max_length=5"], "task"),
    "dropout_out_of_range": ({}, ["model.dropout=1.5"], "model.dropout"),
    "bad_optimizer": ({}, ["train.optimizer=adamz"], "train.optimizer: got 'adamz'"),
    "bad_lr_schedule": ({}, ["train.lr_schedule=linear"], "train.lr_schedule"),
    "seq2seq_layers": ({"task": TINY_TASKS["reverse"]}, ["model.num_layers=2"], "model.num_layers"),
    "top_k_bad_k": ({}, ["generate.sampler={name: top_k, k: 0}"], "generate.sampler"),
    "unknown_sampler": ({}, ["generate.sampler=nucleus"], "sampler must be one of"),
    "argument_the_sampler_lacks": (
        {},
        ["generate.sampler={name: greedy, k: 5}"],
        "k is not an argument of sampler='greedy'",
    ),
    "sampler_and_older_key": (
        {},
        ["generate.sampler=beam", "generate.beam_width=3"],
        "generate.sampler or the older generate.beam_width",
    ),
    "k_with_greedy": ({}, ["generate.k=5"], "generate.k would be ignored"),
    "beam_width_with_top_p": (
        {},
        ["generate.strategy=top_p", "generate.p=0.9", "generate.beam_width=8"],
        "generate.beam_width would be ignored",
    ),
    "unknown_monitor": ({}, ["train.early_stopping.monitor=val_bleu"], "monitor"),
    "monitor_without_direction": (
        {},
        ["train.early_stopping={monitor: val_macro_f1}"],
        "train.early_stopping.mode",
    ),
    "task_key_of_other_task": ({}, ["task.digits=3"], "task.digits"),
    "section_not_mapping": ({"train": 5}, [], "train"),
    "zero_test_fraction": ({}, ["task.test_fraction=0"], "task.test_fraction"),
    "copy_buckets_past_the_lengths": (
        {"task": {"name": "copy", "num_examples": 64}},
        ["task.length_buckets=[13, 60]"],
        "task.length_buckets",
    ),
    "scan_buckets_not_from_24": (
        {"task": {"name": "scan", "train_size": 64}},
        ["task.length_buckets=[20, 30]"],
        "task.length_buckets",
    ),
    "unknown_mechanism": ({}, ["model.attention.mechanism=monotone"], "model.attention.mechanism"),
    "unknown_normalizer": ({}, ["model.attention.normalizer=sparse"], "model.attention.normalizer"),
    "bad_monotonic_mode": (
        {"task": TINY_TASKS["reverse"]},
        ["model.attention.mechanism=monotonic", "model.attention.mode=soft"],
        "model.attention.mode",
    ),
    "negative_sigmoid_noise": ({}, ["model.attention.sigmoid_noise=-1"], "sigmoid_noise"),
    "bad_location_features": ({}, ["model.attention.location_features=sum"], "location_features"),
    "two_location_switches": (
        {"task": TINY_TASKS["reverse"]},
        [
            "model.attention.mechanism=location",
            "model.attention.cumulative=true",
            "model.attention.location_features=both",
        ],
        "location_features",
    ),
    "option_of_no_mechanism_in_use": (
        {},
        ["model.attention.cumulative=true"],
        "model.attention.cumulative: got True; expected no such key",
    ),
    "even_kernel_size": ({}, ["model.attention.kernel_size=4"], "model.attention.kernel_size"),
    "mechanism_on_classification": (
        {},
        ["model.attention.mechanism=monotonic"],
        "model.attention.mechanism",
    ),
    "option_the_mechanism_lacks": (
        {"task": TINY_TASKS["reverse"]},
        ["model.attention.mechanism=monotonic", "model.attention.window=3"],
        "model.attention.window: got 3; expected no such key: not an option of mechanism",
    ),
    "stateful_mechanism_with_luong": (
        {"task": TINY_TASKS["reverse"]},
        ["model.attention.mechanism=coverage", "model.decoder=luong"],
        "mechanism='content' only",
    ),
    "alignment_loss_without_ground_truth": (
        {"task": TINY_TASKS["dates"]},
        ["train.alignment_loss_weight=1.0"],
        "train.alignment_loss_weight",
    ),
    "coverage_loss_on_classification": (
        {},
        ["train.coverage_loss_weight=0.5"],
        "train.coverage_loss_weight",
    ),
    "test_lengths_not_longer": (
        {"task": TINY_TASKS["reverse"]},
        ["task.test_min_length=3", "task.test_max_length=8"],
        "task.test_min_length",
    ),
    "lm_test_split_empty": (
        {"task": {"name": "lm", "max_chars": 200, "seq_length": 8}},
        ["task.test_fraction=0.001"],
        "task.test_fraction",
    ),
}


@pytest.fixture(scope="module")
def store_folder(tmp_path_factory):
    """A store that already holds one experiment, so 'unchanged' is meaningful."""
    import mlflow

    folder = tmp_path_factory.mktemp("store")
    mlflow.MlflowClient(migrated_store(folder)).create_experiment("existing")
    return folder


@pytest.fixture
def existing_store(store_folder, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri(store_folder))
    monkeypatch.chdir(store_folder)
    return store_folder


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_config_exits_2_and_leaves_store_unchanged(case, existing_store, capsys):
    changes, overrides, needle = dict(BAD_CASES[case][0]), *BAD_CASES[case][1:]
    task = changes.pop("task", TINY_TASKS["needle"])
    path = write_config(existing_store, task, name=f"{case}.yaml", **changes)
    before = snapshot(existing_store / "mlruns")
    args = ["run", str(path)]
    for item in overrides:
        args += ["--set", item]

    assert main(args) == 2

    err = capsys.readouterr().err
    assert needle in err, err
    assert snapshot(existing_store / "mlruns") == before
    assert not (existing_store / "mlruns" / "checkpoints").exists()


def test_missing_config_file_exits_2(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_error_message_names_key_value_and_expectation(tmp_path):
    path = write_config(tmp_path, TINY_TASKS["needle"])
    with pytest.raises(config_lib.ConfigError) as info:
        config_lib.load_config(path, ["train.epochs=-4"])
    message = str(info.value)
    assert "train.epochs" in message and "-4" in message and "a value >= 1" in message
    assert "Input should" not in message


def test_overrides_parse_values_as_yaml(tmp_path):
    path = write_config(tmp_path, TINY_TASKS["reverse"])
    cfg = config_lib.load_config(
        path,
        [
            "train.epochs=3",
            "train.learning_rate=2e-3",
            "train.mixed_precision=true",
            "model.attention.units=null",
            "tracking.tags={team: nlp}",
            "train.early_stopping={monitor: val_loss, patience: 2}",
        ],
    )
    assert cfg.train.epochs == 3
    assert cfg.train.learning_rate == pytest.approx(2e-3)
    assert cfg.train.mixed_precision is True
    assert cfg.model.attention.units is None
    assert cfg.tracking.tags == {"team": "nlp"}
    assert cfg.train.early_stopping.patience == 2


def test_cosine_schedule_decays_to_zero_at_the_last_step(tmp_path):
    import keras

    path = write_config(
        tmp_path, TINY_TASKS["needle"], train={"epochs": 3, "lr_schedule": "cosine"}
    )
    prepared = run.validate(config_lib.load_config(path))
    cfg, task = prepared.cfg, prepared.task
    model = task.kind.build_model(cfg, task)
    run.compile_model(model, cfg, task)
    schedule = keras.optimizers.schedules.deserialize(model.optimizer.get_config()["learning_rate"])
    last = 3 * -(-len(task.train) // cfg.train.batch_size)
    assert float(schedule(0)) == pytest.approx(cfg.train.learning_rate)
    assert float(schedule(last // 2)) == pytest.approx(cfg.train.learning_rate / 2, rel=0.05)
    assert float(schedule(last)) == pytest.approx(0.0, abs=1e-9)


def test_temperature_0_validates_and_generates_greedily(tmp_path):
    task = {**TINY_TASKS["lm"], "max_chars": 400}
    path = write_config(tmp_path, task, generate={"sampler": "sample", "max_length": 6})
    prepared = run.validate(config_lib.load_config(path, ["generate.sampler.temperature=0"]))
    cfg, task = prepared.cfg, prepared.task
    assert cfg.generate.sampler == {"name": "sample", "temperature": 0}
    model = task.kind.build_model(cfg, task)
    prompts = [task.vocab.encode(p) for p in task.prompts]
    sampled = [
        task.kind.decode(model, cfg.generate.built_sampler, prompts, 6, seed=s) for s in (0, 1)
    ]
    expected = task.kind.decode(model, GREEDY, prompts, 6)
    np.testing.assert_array_equal(sampled[0], expected)
    np.testing.assert_array_equal(sampled[1], expected)


def test_score_names_come_from_the_library():
    """The names are the registries', read when a config is validated (no copy in the schema)."""
    for name in scores.names():
        assert config_lib.validate(
            {"task": {"name": "needle"}, "model": {"attention": {"score": name}}}
        )
    with pytest.raises(config_lib.ConfigError, match="score must be one of 'dot'"):
        config_lib.validate({"task": {"name": "needle"}, "model": {"attention": {"score": "dott"}}})
    assert not hasattr(config_lib, "SCORES")  # no hand-typed copy left


def test_flatten_gives_dotted_keys():
    flat = config_lib.flatten({"a": {"b": 1, "c": {"d": None}}, "e": []})
    assert flat == {"a.b": 1, "a.c.d": None, "e": []}


@pytest.mark.parametrize("path", sorted(configs_dir().glob("*.yaml")), ids=lambda p: p.stem)
def test_ready_configs_validate(path):
    cfg = config_lib.load_config(path)
    assert cfg.task.name in tasks.names()


def test_ready_configs_cover_every_task_and_demo_uses_bahdanau():
    names = {p.stem for p in configs_dir().glob("*.yaml")}
    assert {"needle", "textcls", "reverse", "dates", "addition", "lm", "demo"} <= names
    assert {"copy", "lookup", "scan"} <= names  # the length generalisation benchmarks
    assert "copy_slots" in names  # copy attention, with and without
    demo = config_lib.load_config(configs_dir() / "demo.yaml")
    assert demo.task.name in ("reverse", "dates")
    assert demo.model.decoder == "bahdanau"


def test_list_prints_ready_configs(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "demo" in out and "lm" in out


def test_ui_binds_localhost_on_the_store(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri(tmp_path))
    assert main(["ui", "--dry-run", "--port", "5123"]) == 0
    out = capsys.readouterr().out
    assert "--host 127.0.0.1" in out and "--port 5123" in out and store_uri(tmp_path) in out
    # on the model-training view, not MLflow 3's GenAI default
    assert "http://127.0.0.1:5123/#/?workflowType=machine_learning" in out
    # two web workers, not MLflow's four: each imports MLflow's server on the same cores
    assert "--workers 2" in out


def test_ui_takes_workers_and_refuses_none(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri(tmp_path))
    assert main(["ui", "--dry-run", "--workers", "4"]) == 0
    assert "--workers 4" in capsys.readouterr().out
    assert main(["ui", "--dry-run", "--workers", "0"]) == 2
    err = capsys.readouterr().err
    assert "--workers" in err and "expected 1 or more" in err and "--workers=0" in err


def test_ui_env_turns_mlflow_s_job_runner_off_unless_the_user_chose(monkeypatch):
    from experiments.commands.ui import JOB_EXECUTION, QUIET_WARNINGS, ui_env

    env = ui_env({})
    assert env[JOB_EXECUTION] == "false"
    assert env["PYTHONWARNINGS"] == QUIET_WARNINGS[0]  # what every MLflow server gets
    assert ui_env({JOB_EXECUTION: "true"})[JOB_EXECUTION] == "true"
    # MLflow reads the variable as we write it: the job runner is off
    from mlflow.environment_variables import MLFLOW_SERVER_ENABLE_JOB_EXECUTION

    assert MLFLOW_SERVER_ENABLE_JOB_EXECUTION.name == JOB_EXECUTION
    monkeypatch.setenv(JOB_EXECUTION, env[JOB_EXECUTION])
    assert MLFLOW_SERVER_ENABLE_JOB_EXECUTION.get() is False


def test_experiments_are_created_as_model_training(tmp_path, monkeypatch):
    from experiments.tracking import store

    monkeypatch.setenv("MLFLOW_TRACKING_URI", migrated_store(tmp_path))
    client = store.connect()
    experiment = client.get_experiment(store.experiment_id(client, "mine"))
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert store.experiment_id(client, "mine") == experiment.experiment_id  # found, not remade


def test_parser_has_all_commands_and_requires_one():
    parser = build_parser()
    for command in ("run x.yaml", "sweep x.yaml --grid a=1,2", "resume abc", "ui", "list"):
        assert parser.parse_args(command.split()).handler
    with pytest.raises(SystemExit) as info:
        parser.parse_args([])
    assert info.value.code == 2


def test_validating_mechanism_options_creates_no_backend_variable():
    """The config check constructs the mechanism; a multi-worker strategy must come before
    TensorFlow's first op, so construction may create no variable (a seed state included)."""
    cfg = config_lib.validate(
        {
            "task": {"name": "reverse"},
            "model": {"attention": {"mechanism": "monotonic", "sigmoid_noise": 1.0}},
        }
    )
    assert cfg.model.attention.model_extra == {"sigmoid_noise": 1.0}
    for name in mechanisms.names():
        required = set(mechanisms.REGISTRY.arguments(name))
        required -= set(mechanisms.REGISTRY.defaults(name))
        units = {"units": 4} if "units" in required else {}
        noise = {"sigmoid_noise": 1.0} if name == "monotonic" else {}
        assert mechanisms.get(name, **units, **noise).variables == [], name


def test_configs_written_before_generate_sampler_mean_the_same_sampler():
    """A resolved config logged by an older run (every option listed) still validates, to the
    sampler it meant: `resume` reads those."""
    older = {
        "strategy": "beam",
        "max_length": 9,
        "temperature": 1.0,
        "k": None,
        "p": None,
        "beam_width": 3,
        "length_penalty": 0.6,
        "prompts": [],
        "seed": 0,
    }
    cfg = config_lib.validate({"task": {"name": "reverse"}, "generate": older})
    assert cfg.generate.sampler == {"name": "beam", "num_beams": 3, "length_penalty": 0.6}
    assert cfg.generate.built_sampler.get_config()["num_beams"] == 3
    greedy = config_lib.validate(
        {
            "task": {"name": "reverse"},
            "generate": {**older, "strategy": "greedy", "beam_width": 4, "length_penalty": 0.0},
        }
    )
    assert greedy.generate.sampler == {"name": "greedy", "temperature": 1.0}
    # the new form resolves once, and a name alone is the sampler with its defaults
    cfg = config_lib.validate({"task": {"name": "reverse"}, "generate": {"sampler": "top_p"}})
    assert cfg.generate.built_sampler.get_config()["p"] == 0.9


def test_choices_the_library_or_keras_own_are_read_from_them():
    """`model.rnn`, `model.decoder` and `train.optimizer` take what the library's models and
    Keras take (no copy of the choices in the schema): any Keras optimizer by name."""
    from keras_attn_rnn import models

    base = {"task": TINY_TASKS["reverse"]}
    for rnn in models.RNN_KINDS:
        assert config_lib.validate({**base, "model": {"rnn": rnn}}).model.rnn == rnn
    for decoder in models.DECODERS:
        assert config_lib.validate({**base, "model": {"decoder": decoder}}).model.decoder == decoder
    for name in ("lion", "nadam", "AdamW"):
        cfg = config_lib.validate({**base, "train": {"optimizer": name}})
        optimizer = cfg.train.build_optimizer(learning_rate=0.01, clipnorm=1.0)
        assert type(optimizer) is type(keras.optimizers.get(name.lower()))
        assert optimizer.clipnorm == 1.0
    with pytest.raises(config_lib.ConfigError, match=r"train\.optimizer: got 'adamz'.*'lion'"):
        config_lib.validate({**base, "train": {"optimizer": "adamz"}})


def test_the_sampler_is_built_once_when_the_config_is_validated(monkeypatch):
    """The run's one `Sampler` is built by validation and passed down: decoding builds none."""
    from keras_attn_rnn import samplers

    cfg = config_lib.validate(
        {"task": TINY_TASKS["reverse"], "generate": {"sampler": {"name": "beam", "beam_width": 2}}}
    )
    sampler = cfg.generate.built_sampler
    assert isinstance(sampler, samplers.BeamSampler) and sampler.beam_width == 2
    built = []
    init = samplers.BeamSampler.__init__
    monkeypatch.setattr(
        samplers.BeamSampler, "__init__", lambda self, **k: built.append(k) or init(self, **k)
    )
    cfg.generate.max_length = 3  # validating another key keeps it
    assert cfg.generate.built_sampler is sampler
    assert cfg.model_copy(deep=True).generate.built_sampler.beam_width == 2
    prepared = run.validate(cfg)
    task = prepared.task
    model = task.kind.build_model(prepared.cfg, task)
    task.kind.test_metrics(model, task, task.test.take(slice(0, 2)), prepared.cfg.generate)
    assert built == []
