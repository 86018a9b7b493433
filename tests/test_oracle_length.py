"""The oracle-length evaluation (Newman et al. 2020, "The EOS Decision and Length
Extrapolation"): greedy decoding that cannot emit `</s>` before each row's true target length
and is cut there (`Seq2Seq.exact_match_oracle`, logged as `test_exact_match_oracle*`)."""

from __future__ import annotations

import numpy as np
from fake_models import StepTableModel

from experiments import kinds
from experiments.data import metrics
from experiments.data.modeling import GREEDY
from experiments.data.split import Split
from experiments.data.vocab import END

V = 8  # fake target vocabulary: 0 pad, 1 <s>, 2 </s>, 3-7 tokens
TARGETS = np.array(
    [
        [4, 5, 6, 2, 0],  # right, ends right
        [7, 3, 4, 5, 2],  # right tokens, but ends one token early
        [5, 2, 0, 0, 0],  # right tokens, but ends one token early
        [6, 6, 7, 2, 0],  # a wrong token (the model says 3 at step 1)
    ]
)
EARLY, WRONG = (1, 2), {3: (1, 3)}


def _fake_model(targets, early=(), wrong=None, end_always=False) -> StepTableModel:
    """A seq2seq model whose best token at step `t` of row `b` is `targets[b, t]`, then `</s>`
    (at the row's length); on `early` rows `</s>` one step before that (the true token second
    best); `wrong[b] = (t, token)` puts a wrong token first; `end_always`: `</s>` first at every
    step (the true token second)."""
    rows, width = targets.shape
    steps = width + 2
    lengths = metrics.target_lengths(targets)
    logits = np.full((rows, steps, V, V), -10.0, "float32")
    for b in range(rows):
        for t in range(steps):
            logits[b, t, :, targets[b, t] if t < lengths[b] else END] = 0.0
            if end_always or (b in early and t == lengths[b] - 1):
                logits[b, t, :, END] = 1.0
        if wrong and b in wrong:
            t, token = wrong[b]
            logits[b, t, :, token] = 2.0
    return StepTableModel(logits, np.zeros((rows, steps, V, 3), "float32"))


def _split(targets) -> Split:
    return Split(x=np.full((len(targets), 3), 3, "int32"), y=targets.astype("int32"))


def test_target_lengths_and_the_cut_by_hand():
    targets = np.array([[4, 5, 2, 0], [6, 2, 0, 0], [4, 4, 4, 4], [2, 0, 0, 0]])
    lengths = metrics.target_lengths(targets)
    np.testing.assert_array_equal(lengths, [2, 1, 4, 0])
    decoded = np.array([[4, 5, 7, 2], [6, 6, 6, 6], [4, 4, 4, 4], [5, 2, 0, 0]])
    np.testing.assert_array_equal(
        metrics.cut_to_lengths(decoded, lengths),
        [[4, 5, 2, 0, 0], [6, 2, 0, 0, 0], [4, 4, 4, 4, 2], [2, 0, 0, 0, 0]],
    )


def test_oracle_decoding_never_ends_before_the_true_length_and_has_exactly_it():
    """A model that wants to end at every step: its free output is `</s>` alone; with the
    oracle length no row ends early, and cut it has each target's length and tokens."""
    kind, split = kinds.get("seq2seq"), _split(TARGETS)
    model = _fake_model(TARGETS, end_always=True)
    lengths = metrics.target_lengths(TARGETS)
    free = kind.decode(model, GREEDY, split.x, TARGETS.shape[1])
    assert np.all(free[:, 0] == END)
    decoded = kind.decode(model, GREEDY, split.x, int(lengths.max()), min_length=lengths)
    for row, n in zip(decoded, lengths):
        assert END not in row[:n] and 0 not in row[:n]
    cut = metrics.cut_to_lengths(decoded, lengths)
    np.testing.assert_array_equal(metrics.target_lengths(cut), lengths)
    assert kind.exact_match(model, GREEDY, split) == 0.0
    assert kind.exact_match_oracle(model, split) == 1.0


def test_a_model_that_stops_early_scores_higher_with_the_oracle_length():
    kind, split = kinds.get("seq2seq"), _split(TARGETS)
    model = _fake_model(TARGETS, early=EARLY, wrong=WRONG)
    assert kind.exact_match(model, GREEDY, split) == 0.25  # row 0 only
    assert kind.exact_match_oracle(model, split) == 0.75  # rows 0-2; row 3's token is wrong


class _Tables:
    """The tracker of a sweep's parent: keeps the tables and figures it is given."""

    def __init__(self):
        self.tables, self.figures = {}, {}

    def log_table(self, rows, path):
        self.tables[path] = rows

    def log_figure(self, figure, path):
        self.figures[path] = figure


def test_a_sweep_compares_free_and_oracle_exact_match_per_bucket():
    from experiments.training import sweep

    def row(point, free, oracle):
        out = {"point": point, "test_exact_match_greedy": free[0], "test_loss": 1.0}
        for bucket, f, o in zip(("len_4_12", "len_13_16", "len_17_20"), free, oracle):
            out[f"test_exact_match_greedy_{bucket}"] = f
            out[f"test_exact_match_oracle_{bucket}"] = o
        return out

    rows = [
        row("m=content", (0.9, 0.3, 0.0), (0.95, 0.6, 0.1)),
        row("m=gmm", (0.8, 0.5, 0.2), (0.8, 0.5, 0.3)),
    ]
    tracker = _Tables()
    sweep._log_length_comparison(
        tracker, rows, ["test_exact_match_greedy", "test_exact_match_oracle"]
    )
    table = tracker.tables["length_comparison.json"]
    assert [(r["point"], r["bucket"]) for r in table][:3] == [
        ("m=content", "4_12"),
        ("m=content", "13_16"),  # buckets by length, not by name
        ("m=content", "17_20"),
    ]
    assert table[4] == {
        "point": "m=gmm",
        "bucket": "13_16",
        "exact_match_greedy": 0.5,
        "exact_match_oracle": 0.5,
    }
    axes = tracker.figures["length_comparison.png"].axes
    assert [ax.get_ylabel() for ax in axes] == ["exact_match_greedy", "exact_match_oracle"]
    assert [p.get_height() for p in axes[1].patches] == [0.95, 0.6, 0.1, 0.8, 0.5, 0.3]
    # No buckets (a task without a generalisation split): nothing logged.
    tracker = _Tables()
    sweep._log_length_comparison(
        tracker, [{"point": "a", "test_exact_match_greedy": 1.0}], ["test_exact_match_greedy"]
    )
    assert tracker.tables == tracker.figures == {}
