"""`tools/seed_table.py`: a row per value, mean (min-max) over its runs, run ids listed."""

from tools import seed_table


def test_rows_are_means_with_ranges_and_missing_figures_are_dashes():
    groups = {
        "bahdanau": [
            {"test_chrf_greedy": 20.0, "seconds_per_epoch": 40.0, "run_id": "a"},
            {"test_chrf_greedy": 23.0, "seconds_per_epoch": 44.0, "run_id": "b"},
            # an older run, logged before the peak memory was: a dash where none has it
        ],
        "keras": [
            {
                "test_chrf_greedy": 18.25,
                "seconds_per_epoch": 20.0,
                "tokens_per_second": 5120.4,
                "peak_memory_mb": 1500.2,
                "train_peak_memory_mb": 1505.5,
                "run_peak_memory_mb": 1510.7,
                "run_id": "c",
            }
        ],
    }
    text = seed_table.table(groups, "model.decoder", ["test_chrf_greedy"])
    lines = text.splitlines()
    assert lines[0] == (
        "| model.decoder | runs | test_chrf_greedy | seconds_per_epoch | tokens_per_second "
        "| model_parameters | peak_memory_mb | train_peak_memory_mb | run_peak_memory_mb |"
    )
    assert lines[2] == "| bahdanau | 2 | 21.5 (20.0–23.0) | 42.0 (40.0–44.0) | – | – | – | – | – |"
    assert lines[3] == "| keras | 1 | 18.2 | 20.0 | 5120 | – | 1500 | 1506 | 1511 |"
    assert "model.decoder=bahdanau: a, b" in text and "model.decoder=keras: c" in text


def test_exact_match_keeps_three_digits_and_parameters_none():
    assert seed_table.spread([0.0125, 0.0375], 3) == "0.025 (0.013–0.037)"
    groups = {"luong": [{"model_parameters": 553064.0, "seconds_per_epoch": 1.0, "run_id": "x"}]}
    assert "| 553064 |" in seed_table.table(groups, "model.decoder", [])
