"""Fake next-token models for the decoding tests (no weights, keras.ops only).

A fake model's logits depend only on the last token it was fed (a `(V, V)`
table), so every expected sequence can be worked out by hand. One-hot x 1e9
tables make every strategy deterministic.
"""

import numpy as np
from keras import ops

V = 8
S = 3  # width of the fake attention weights


class TableModel:
    """Fake language model: `logits(next) = table[last token]`.

    Its cache holds the step counter (for the fake attention, a one-hot of the
    step over `S` positions) and the last token, so beam reordering is
    exercised.
    """

    def __init__(self, table, attention_table=None):
        self.table = np.asarray(table, "float32")
        # with `attention_table` (V, S'): the attention behind the next logits is its row
        # of the last token (a fixed lattice for the coverage penalty)
        self.attention_table = attention_table
        self.output_vocab_size = self.table.shape[0]
        self.calls = 0

    def _out(self, token, step):
        logits = ops.take(ops.convert_to_tensor(self.table), token, axis=0)
        if self.attention_table is not None:
            return logits, ops.take(ops.convert_to_tensor(self.attention_table), token, axis=0)
        weights = ops.one_hot(step % S, S)
        return logits, weights

    def init_cache(self, prompts, max_length, start_id=None):
        self.calls += 1
        prompts = ops.cast(prompts, "int32")
        lengths = ops.sum(ops.cast(ops.not_equal(prompts, 0), "int32"), axis=1)
        last = ops.squeeze(ops.take_along_axis(prompts, ops.expand_dims(lengths - 1, 1), 1), 1)
        step = ops.zeros_like(last)
        logits, weights = self._out(last, step)
        return logits, weights, {"last": last, "step": step}

    def next_logits(self, token, cache):
        step = cache["step"] + 1
        logits, weights = self._out(token, step)
        return logits, weights, {"last": token, "step": step}


def cycle_table(scale=1e9):
    """One-hot x 1e9 logits: after token i comes i % (V - 1) + 1 (1, 2, ..., 7, 1, ...)."""
    table = np.zeros((V, V), "float32")
    for i in range(V):
        table[i, i % (V - 1) + 1] = scale
    return table


def random_table(seed=0, scale=2.0):
    """Distinct logits per row (gaps >= 0.05), id 0 never best."""
    rng = np.random.default_rng(seed)
    table = np.zeros((V, V), "float32")
    for i in range(V):
        table[i] = rng.permutation(V) * 0.25 * scale / 2 + rng.uniform(0, 0.05, V)
    return table


def log_softmax_rows(table):
    masked = table.astype("float64").copy()
    masked[:, 0] = -np.inf  # id 0 (padding) is never generated
    masked -= masked.max(axis=1, keepdims=True)
    return masked - np.log(np.exp(masked).sum(axis=1, keepdims=True))


PROMPTS = [[3], [5, 6], [1, 2, 7]]


class StepTableModel:
    """Fake sequence-to-sequence model: per row, step and last token, fixed tables.

    `logits = log_probs[b, t, last token]` and the attention behind them
    `attention[b, t, last token]` (`(B, T, V, V)` and `(B, T, V, S)`; steps
    past `T` reuse the last). Its prompts are the sources `(B, S)`, 0-padded:
    the cache holds their `memory_mask` (as `Seq2Seq`'s does) and, if given,
    `initial_alignments` `(B, S)` (the attention state before the first step).
    """

    is_seq2seq = True

    def __init__(self, log_probs, attention, initial_alignments=None):
        self.log_probs = np.asarray(log_probs, "float32")
        self.attention = np.asarray(attention, "float32")
        self.initial_alignments = initial_alignments
        self.rows, self.steps, vocab, _ = self.log_probs.shape
        self.output_vocab_size = self.prompt_vocab_size = vocab

    def _out(self, token, cache):
        vocab = self.output_vocab_size
        step = ops.minimum(cache["step"], self.steps - 1)
        index = (cache["row"] * self.steps + step) * vocab + token
        source = self.attention.shape[-1]
        logits = ops.take(ops.convert_to_tensor(self.log_probs.reshape(-1, vocab)), index, axis=0)
        attention = ops.convert_to_tensor(self.attention.reshape(-1, source))
        return logits, ops.take(attention, index, axis=0)

    def init_cache(self, prompts, max_length, start_id=None):
        prompts = ops.cast(prompts, "int32")
        batch = ops.shape(prompts)[0]
        cache = {
            "row": ops.arange(batch, dtype="int32"),
            "step": ops.zeros((batch,), "int32"),
            "memory_mask": ops.not_equal(prompts, 0),
        }
        if self.initial_alignments is not None:
            cache["initial_alignments"] = ops.convert_to_tensor(
                np.asarray(self.initial_alignments, "float32")
            )
        logits, weights = self._out(ops.full((batch,), start_id, "int32"), cache)
        return logits, weights, cache

    def next_logits(self, token, cache):
        cache = {**cache, "step": cache["step"] + 1}
        logits, weights = self._out(token, cache)
        return logits, weights, cache
