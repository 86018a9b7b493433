"""The test split's beam search decodes `EVAL_BATCH` model rows at a time (each prompt one per
beam), not `EVAL_BATCH` prompts: the peer's run on the GNU pairs needed 133 MB more for
2,048 rows at once than its training had (docs/results/real-text.md)."""

from __future__ import annotations

import keras
import numpy as np

from experiments import kinds
from experiments.data import modeling
from experiments.data.split import Split
from experiments.kinds import seq2seq
from keras_attn_rnn import models, samplers


def _decoded_batches(monkeypatch, sampler, rows: int = 10) -> list[int]:
    keras.utils.set_random_seed(0)
    model = models.Seq2Seq(11, 9, embedding_dim=6, units=8)
    rng = np.random.default_rng(0)
    split = Split(
        x=rng.integers(3, 11, (rows, 5)).astype("int32"),
        y=rng.integers(3, 9, (rows, 4)).astype("int32"),
    )
    kind = kinds.get("seq2seq")
    whole = kind.decode(model, sampler, split.x, split.y.shape[1])  # every prompt at once
    sizes, generated = [], modeling.generated

    def counted(model, sampler, prompts, *args, **kwargs):
        sizes.append(len(prompts))
        return generated(model, sampler, prompts, *args, **kwargs)

    monkeypatch.setattr(seq2seq, "EVAL_BATCH", 4)
    monkeypatch.setattr(modeling, "generated", counted)
    decoded = kind.exact_match(model, sampler, split)  # decodes the split as the test scores do
    assert 0 <= decoded <= 1
    batched = kind._decoded(model, sampler, split)
    np.testing.assert_array_equal(batched, whole)  # batching changes no row's decoding
    return sizes


def test_beam_search_batches_hold_eval_batch_rows_of_beams(monkeypatch):
    sizes = _decoded_batches(monkeypatch, samplers.BeamSampler(num_beams=2))
    assert sizes == [2] * 10  # 2 prompts x 2 beams = 4 rows, twice: exact_match, _decoded


def test_greedy_batches_hold_eval_batch_prompts(monkeypatch):
    sizes = _decoded_batches(monkeypatch, modeling.GREEDY)
    assert sizes == [4, 4, 2] * 2
