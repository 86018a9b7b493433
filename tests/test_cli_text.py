"""What the command line says is true: `list` gives each ready config's first sentence
whole, `tune --help` names where the study's default storage really goes, and the ready
`textcls` config writes out the encoder direction it trains with."""

from __future__ import annotations

import re

import pytest
from experiments_helpers import use_store

from experiments import config as config_lib
from experiments import ready_configs
from experiments.commands import build_parser, listing, main
from experiments.training import run


def test_list_gives_each_ready_configs_first_sentence_whole(capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    paths = sorted(ready_configs.directory().glob("*.yaml"))
    assert [line.split()[0] for line in lines] == [p.stem for p in paths]
    column = len(lines[0]) - len(lines[0].split(maxsplit=1)[1])
    for line, path in zip(lines, paths):
        about = line[column:]
        assert re.search(r"[.!?]$", about), line  # a sentence, not cut mid-way
        comment = " ".join(
            raw.lstrip("#").strip()
            for raw in path.read_text(encoding="utf-8").splitlines()
            if raw.startswith("#")
        )
        assert comment.startswith(about), (about, comment[:200])
    # The addition config's first sentence runs over three comment lines.
    (addition,) = [line for line in lines if line.startswith("addition ")]
    assert addition.endswith("a cosine learning-rate decay so the last epochs settle.")


@pytest.mark.parametrize(
    "text, first",
    [
        ("# One. Two.\nx: 1", "One."),
        ("# Lookup (Liska et al. 2018; Dubois et al. 2020): a,\n# b and c.\n# More.", None),
        ("# no end at all\n#   python -m x", "no end at all python -m x"),
        ("task: {}", ""),
    ],
)
def test_describe_ends_at_the_first_sentence(text, first):
    expected = (
        first
        if first is not None
        else ("Lookup (Liska et al. 2018; Dubois et al. 2020): a, b and c.")
    )
    assert listing.describe(text) == expected


def test_tune_help_names_the_default_storage_beside_the_store(tmp_path, monkeypatch):
    from experiments.tuning import study_storage

    (storage,) = [a for a in _subparser("tune")._actions if "--storage" in a.option_strings]
    assert "beside the MLflow store" in storage.help
    # ... which is where it goes, for a store of the user's own too.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'elsewhere' / 'mlflow.db'}")
    assert study_storage.default_url() == f"sqlite:///{tmp_path / 'elsewhere' / 'optuna.db'}"


def _subparser(name: str):
    parser = build_parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    return commands.choices[name]


def test_the_ready_textcls_config_writes_out_the_encoder_it_trains(tmp_path, monkeypatch):
    use_store(tmp_path, monkeypatch)
    path = ready_configs.resolve("textcls")
    written = config_lib.read_yaml(path)["model"]
    resolved = run.validate(config_lib.load_config(path)).cfg.model
    assert written["bidirectional"] is resolved.bidirectional is True
    # `--set model.bidirectional=false` is the one change of direction that does something.
    changed = run.validate(config_lib.load_config(path, ["model.bidirectional=false"])).cfg
    assert changed.model.bidirectional is False
