"""Exit codes that mean one thing (issue 50): 0 done, 1 failure, 2 refused input, 3 no
tracking server, 4 the run held by another process, 130/143 interrupted; every command
refuses a user's bad input with 2, and `--help` lists the codes."""

from __future__ import annotations

import os
import subprocess
import sys

import mlflow
import pytest
from experiments_helpers import use_store

from experiments import errors
from experiments.commands import build_parser, main
from experiments.tracking import run_folder
from experiments.tracking import spool as spool_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# One refused input per command (exit 2): each command must have one here.
REFUSED = {
    "run": ["run", "demo", "--set", "train.epoch=2"],
    "sweep": ["sweep", "demo"],  # no --grid
    "tune": ["tune", "demo", "--set", "tune.trails=2"],
    "resume": ["resume", "../x"],
    "ui": ["ui", "--port", "70000", "--dry-run"],
    "serve": ["serve", "0123abcd", "--port", "0", "--dry-run"],
    "list": ["list", "extra"],
    "bench": ["bench", "--only", "nosuchbench"],
    "sync": ["sync", "../x"],
    "export": ["export", "../x"],
    "prune": ["prune", "--checkpoint-dir", "no/such/folder"],
}


def _exit_code(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exit_:  # argparse's refusals
        return exit_.code


def test_every_command_has_a_refused_input_case():
    names = set(build_parser()._subparsers._group_actions[0].choices)
    assert names == set(REFUSED)


@pytest.mark.parametrize("command", sorted(REFUSED))
def test_a_refused_input_exits_2(command, tmp_path, monkeypatch, capsys):
    use_store(tmp_path, monkeypatch)
    assert _exit_code(REFUSED[command]) == errors.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err


def test_done_exits_0(tmp_path, monkeypatch, capsys):
    use_store(tmp_path, monkeypatch)
    assert main(["list"]) == 0
    assert main(["ui", "--dry-run"]) == 0


@pytest.mark.parametrize("argv", [["--help"], ["sync", "--help"], ["run", "--help"]])
def test_help_lists_the_exit_codes(argv, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    out = capsys.readouterr().out
    assert "exit codes:" in out
    for code in (0, 1, 2, 3, 4, 130, 143):
        assert f"  {code:>3}  {errors.EXIT_CODES[code]}\n" in out
    assert errors.EXIT_CODES[2].startswith("refused input")


@pytest.fixture
def two_runs(tmp_path, monkeypatch):
    client = mlflow.MlflowClient(use_store(tmp_path, monkeypatch))
    experiment = client.create_experiment("codes", artifact_location=(tmp_path / "a").as_uri())
    return client, [client.create_run(experiment).info.run_id for _ in range(2)], tmp_path


def test_sync_of_another_runs_folder_or_an_unreadable_run_json_exits_2(two_runs, capsys):
    client, (run_a, run_b), tmp_path = two_runs
    folder = tmp_path / "ck" / run_a
    run_folder.claim(folder, run_a)
    spool = spool_lib.Spool(folder / spool_lib.SPOOL_DIR)
    spool.append({"op": "tags", "tags": {"k": "v"}})
    spool.close()
    assert main(["sync", run_b, "--checkpoint-dir", str(folder)]) == errors.EXIT_CONFIG
    assert f"holds the checkpoints and spool of run {run_a}" in capsys.readouterr().err
    (folder / run_folder.MARKER).write_text("{not json")
    assert main(["sync", run_a, "--checkpoint-dir", str(folder)]) == errors.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "--checkpoint-dir" in err and "run.json: unreadable" in err
    assert "k" not in client.get_run(run_a).data.tags  # nothing uploaded


def test_a_refused_resume_exits_2(two_runs, capsys):
    client, (run_a, _), tmp_path = two_runs
    client.set_terminated(run_a, "FINISHED")
    assert main(["resume", run_a]) == errors.EXIT_CONFIG
    assert "already FINISHED" in capsys.readouterr().err


def test_ctrl_c_exits_130_without_a_traceback():
    code = (
        "import runpy\n"
        "from experiments import commands\n"
        "def interrupted(argv=None):\n"
        "    raise KeyboardInterrupt\n"
        "commands.main = interrupted\n"
        "runpy.run_module('experiments', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=60,
    )
    assert done.returncode == errors.EXIT_INTERRUPTED == 130
    assert done.stderr.strip() == "stopped by Ctrl+C"
