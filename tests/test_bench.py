"""`python -m experiments bench`: the JSON schema and the MLflow run, not the timings."""

import json

import pytest

from experiments import commands
from experiments.bench.cases import BENCHMARKS
from experiments.bench.goals import GOALS, goal_met
from experiments.bench.profiles import TINY_ENV
from experiments.bench.timing import summarize

pytestmark = pytest.mark.slow

CURVES = (
    "attention_pooling",
    "sequence_attention_full",
    "sequence_attention_window",
    "attention_decoder",
)


def _check_result(name, result):
    assert result["goal"] == GOALS[name]
    assert result["goal"][:2] in ("<=", ">=")
    if "skipped" in result:
        assert isinstance(result["skipped"], str) and result["skipped"]
        assert result["ratio"] is None and result["met"] is None
        return
    assert "error" not in result, result.get("traceback")
    for key in ("ratio", "project_s", "peer_s"):
        assert isinstance(result[key], float) and result[key] > 0, (name, key)
    assert isinstance(result["met"], bool)
    assert result["met"] == goal_met(result["goal"], result["ratio"])
    q1, q3 = result["spread"]["iqr"]
    assert result["spread"]["min"] <= q1 <= result["ratio"] <= q3 <= result["spread"]["max"]
    assert isinstance(result["shapes"], dict) and result["shapes"]
    assert isinstance(result["project"], str) and isinstance(result["peer"], str)


def test_bench_quick_writes_the_json_schema_and_an_mlflow_run(tmp_path, monkeypatch):
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv(TINY_ENV, "1")  # the smallest shapes, one repeat
    out = tmp_path / "f.json"

    assert commands.main(["bench", "--quick", "--out", str(out)]) == 0

    report = json.loads(out.read_text())
    assert report["settings"]["profile"] == "tiny"
    for key in ("device", "cpu_count", "tensorflow", "keras", "load_average_start"):
        assert key in report["machine"]
    assert set(report["results"]) == set(BENCHMARKS)
    for name, result in report["results"].items():
        _check_result(name, result)
    # no --tfa-python: the tfa comparison is skipped and says how to enable it
    assert "--tfa-python" in report["results"]["decoder_vs_tfa"]["skipped"]
    for name in CURVES:
        curve = report["scaling"][name]
        assert len(curve["T"]) == len(curve["seconds"]) >= 2
        assert all(s > 0 for s in curve["seconds"])
        assert curve["expected"] in ("linear", "quadratic")
    memory = report["scaling"]["attention_pooling_memory"]
    assert (
        len(memory["T"])
        == len(memory["analytic_bytes"])
        == len(memory["peak_rss_bytes_above_start"])
    )

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("bench")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    measured = [n for n, r in report["results"].items() if r["ratio"] is not None]
    for name in measured:
        assert run.data.metrics[f"{name}.ratio"] == pytest.approx(report["results"][name]["ratio"])
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"bench.json", "scaling.png", "summary.txt"} <= artifacts


def test_only_runs_the_named_benchmarks_and_skips_missing_peers(tmp_path, monkeypatch):
    monkeypatch.setenv(TINY_ENV, "1")
    out = tmp_path / "only.json"
    argv = ["bench", "--only", "causal_dot_vs_keras", "decoder_vs_tfa", "--no-mlflow"]
    argv += ["--tfa-python", str(tmp_path / "no-such-python"), "--out", str(out)]

    assert commands.main(argv) == 0

    report = json.loads(out.read_text())
    assert set(report["results"]) == {"causal_dot_vs_keras", "decoder_vs_tfa"}
    assert report["scaling"] == {}
    assert "does not exist" in report["results"]["decoder_vs_tfa"]["skipped"]
    _check_result("causal_dot_vs_keras", report["results"]["causal_dot_vs_keras"])


def test_decoder_vs_tfa_reports_the_floor_beside_the_peer(tmp_path, monkeypatch):
    """A stand-in peer interpreter answers with fixed times: the floor (the decoder's step
    without attention) is timed in this process, and the speedup limit is peer / floor."""
    monkeypatch.setenv(TINY_ENV, "1")
    peer = tmp_path / "peer-python"
    peer.write_text(
        "#!/bin/sh\n"
        'echo \'{"times_s": [0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25], "tf": "stand-in"}\'\n'
    )
    peer.chmod(0o755)
    out = tmp_path / "tfa.json"
    argv = ["bench", "--only", "decoder_vs_tfa", "--no-mlflow", "--tfa-python", str(peer)]

    assert commands.main([*argv, "--out", str(out)]) == 0

    result = json.loads(out.read_text())["results"]["decoder_vs_tfa"]
    _check_result("decoder_vs_tfa", result)
    assert result["peer_s"] == 0.25
    for mode in ("graph", "xla"):
        assert result["modes"][mode]["floor_s"] > 0
    assert result["floor_s"] == result["modes"][result["fastest"]["project"]]["floor_s"]
    assert result["speedup_limit"] == pytest.approx(0.25 / result["floor_s"])


def test_ratio_is_the_median_pair_ratio_and_speedup_inverts_it():
    cost = summarize([2.0, 3.0, 4.0], [1.0, 1.0, 1.0], speedup=False)
    assert cost["ratio"] == 3.0 and cost["spread"]["iqr"] == [2.5, 3.5]
    speed = summarize([1.0, 1.0, 1.0], [2.0, 3.0, 4.0], speedup=True)
    assert speed["ratio"] == 3.0
    assert goal_met("<=1.10", 1.1) and not goal_met("<=1.10", 1.2)
    assert goal_met(">=10", 10.0) and not goal_met(">=10", 9.9)


def test_unknown_benchmark_name_is_rejected(capsys):
    with pytest.raises(SystemExit) as exit_info:
        commands.main(["bench", "--only", "no_such_bench"])
    assert exit_info.value.code == 2
    assert "no_such_bench" in capsys.readouterr().err
