"""Generate ``tests/data/tfa_beam_golden.npz``: reference decodes of TensorFlow Addons'
``tfa.seq2seq.BeamSearchDecoder`` for the parity tests of ``BeamSampler``
(``tests/test_beam_tfa_parity.py``).

This script runs ONLY under a separate TF 2.15 + tensorflow-addons 0.23 environment,
never the project's own one (tfa is not, and must not become, a project dependency)::

    python3 -m venv /work/tfa-venv
    /work/tfa-venv/bin/pip install "tensorflow==2.15.*" "tensorflow-addons==0.23.*" "numpy<2"
    /work/tfa-venv/bin/python tests/data/make_tfa_beam_golden.py      # from the repo root

Setup (numpy seed 2024): vocabulary V=8 (id 0 is padding: log-probability -1e9, never
chosen; EOS = 7, start id 1), T=6 decoding steps (``maximum_iterations``), sources of
S=5 positions. The decoder is a table, not a network: a small ``tf.keras`` cell whose
output logits at step ``t`` with input token ``y`` for batch row ``b`` are the fixed
log-probabilities ``log_probs[b, t, y]`` (``(B, T, V, V)``, already log-softmaxed in
float64 then cast to float32) and whose state is an ``AttentionWrapperState`` whose
``alignments`` are ``attention[b, t, y]`` (``(B, T, V, S)``): exactly what the beam
search reads for its coverage penalty. Its ``cell_state`` carries ``(row, step)``.

Batch rows: three base rows with source lengths 5, 3 and 2 (attention exactly 0 past the
length, like a masked softmax), each in four variants (12 rows in all, row ``4 * base +
variant``): variant bit 0 = "zeros" (real position 1 gets exactly 0 attention after odd
input tokens: the case where tfa's coverage penalty and the project's differ), bit 1 =
"onehot" initial alignments (one-hot at position 0, as tfa's monotonic mechanisms start;
else zeros). Base row 0 favours EOS from step 2 (early EOS), row 1 almost never emits it
(maximum-length cut-off), row 2 has EOS and token 3 planted within 2e-3 in logit at
step 1 (a near-tie that the EOS length rule decides).

Configurations: ``beam_width`` in (1, 3, 5) x ``length_penalty_weight`` in (0, 0.6) x
``coverage_penalty_weight`` in (0, 0.4); each decodes all 12 rows. Stored per
configuration ``w{W}_lp{LP}_cp{CP}/``: ``step_ids`` and ``parent_ids`` (B, T, W) int32,
the per-step ``beam_search_decoder_output`` (padded with EOS / 0 after the last step),
``predicted_ids`` (B, T, W), tfa's ``gather_tree`` of them, ``scores`` (B, W) (the last
step's ``beam_search_decoder_output.scores``), ``lengths`` (B, W) (``final_state.lengths``)
and ``steps`` (number of steps run). Shared: ``log_probs``, ``attention``,
``initial_alignments``, ``source_lengths``, ``sources`` (B, S) ids (0-padded), ``eos_id``,
``start_id``, ``max_length``.

tfa quirk, kept out of the comparison: ``gather_tree`` walks back from step
``max(final lengths) - 1`` of each row, not from the last step, so when a row's beams have
all finished and are re-ranked afterwards (a finished beam's score changes once: its length
now counts EOS and its coverage penalty now applies), ``predicted_ids[b, :, w]`` is not the
beam that ``scores[b, w]`` belongs to. The tests backtrack ``step_ids`` / ``parent_ids``
from the last step instead, as ``BeamSampler`` does.
"""

import itertools
import os

import numpy as np
import tensorflow as tf
import tensorflow_addons as tfa
from tensorflow_addons.seq2seq import AttentionWrapperState

V, T, S = 8, 6, 5
EOS, START = 7, 1
WIDTHS = (1, 3, 5)
LENGTH_PENALTIES = (0.0, 0.6)
COVERAGE_PENALTIES = (0.0, 0.4)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tfa_beam_golden.npz")


def config_name(width, length_penalty, coverage_penalty):
    return f"w{width}_lp{length_penalty:g}_cp{coverage_penalty:g}"


def make_tables(rng):
    """`(log_probs (B, T, V, V), attention (B, T, V, S), initial (B, S), lengths (B,))`."""
    base_lengths = (5, 3, 2)
    log_probs, attention, initial, lengths = [], [], [], []
    for base, length in enumerate(base_lengths):
        logits = rng.normal(0.0, 1.5, (T, V, V))
        if base == 0:
            logits[2:, :, EOS] += 2.5  # early EOS
        elif base == 1:
            logits[:, :, EOS] -= 6.0  # cut off at max_length
        else:
            logits[:, :, EOS] -= 0.5
            # near-tie at step 1: EOS just above token 3
            logits[1, :, 3] = logits[1, :, 1:].max(-1) + 0.5  # no exact tie with another token
            logits[1, :, EOS] = logits[1, :, 3] + 2e-3
        logits[..., 0] = -np.inf
        row_log_probs = logits - logits.max(-1, keepdims=True)
        row_log_probs -= np.log(np.exp(row_log_probs).sum(-1, keepdims=True))
        row_log_probs[..., 0] = -1e9
        raw = rng.uniform(0.05, 1.0, (T, V, S))
        raw[..., length:] = 0.0
        for variant in range(4):
            weights = raw.copy()
            if variant & 1:
                weights[:, 1::2, 1] = 0.0  # exact zeros at a real position
            weights /= weights.sum(-1, keepdims=True)
            log_probs.append(row_log_probs)
            attention.append(weights)
            initial.append(np.eye(S)[0] if variant & 2 else np.zeros(S))
            lengths.append(length)
    return (
        np.asarray(log_probs, "float32"),
        np.asarray(attention, "float32"),
        np.asarray(initial, "float32"),
        np.asarray(lengths, "int32"),
    )


class TableCell(tf.keras.layers.Layer):
    """Logits `log_probs[row, step, input token]`, alignments `attention[row, step, token]`."""

    def __init__(self, log_probs, attention, **kwargs):
        super().__init__(**kwargs)
        self.log_probs = tf.constant(log_probs.reshape(-1, V))
        self.attention = tf.constant(attention.reshape(-1, S))

    @property
    def state_size(self):
        return AttentionWrapperState(
            cell_state=tf.TensorShape([2]),
            attention=tf.TensorShape([1]),
            alignments=tf.TensorShape([S]),
            alignment_history=(),
            attention_state=tf.TensorShape([S]),
        )

    @property
    def output_size(self):
        return tf.TensorShape([V])

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        raise NotImplementedError("the decoder is given its initial state")

    def call(self, inputs, state, training=None):
        token = tf.cast(tf.round(inputs[:, 0]), tf.int32)
        row = tf.cast(tf.round(state.cell_state[:, 0]), tf.int32)
        step = tf.cast(tf.round(state.cell_state[:, 1]), tf.int32)
        index = (row * T + tf.minimum(step, T - 1)) * V + token
        logits = tf.gather(self.log_probs, index)
        alignments = tf.gather(self.attention, index)
        counters = tf.stack([state.cell_state[:, 0], state.cell_state[:, 1] + 1.0], axis=1)
        return logits, state._replace(
            cell_state=counters, alignments=alignments, attention_state=alignments
        )


def decode(log_probs, attention, initial, width, length_penalty, coverage_penalty):
    batch = log_probs.shape[0]
    cell = TableCell(log_probs, attention)
    decoder = tfa.seq2seq.BeamSearchDecoder(
        cell,
        beam_width=width,
        embedding_fn=lambda ids: tf.cast(ids, tf.float32)[..., None],
        length_penalty_weight=length_penalty,
        coverage_penalty_weight=coverage_penalty,
        maximum_iterations=T,
    )
    state = AttentionWrapperState(
        cell_state=tf.stack([tf.range(batch, dtype=tf.float32), tf.zeros(batch)], axis=1),
        attention=tf.zeros((batch, 1)),
        alignments=tf.constant(initial),
        alignment_history=(),
        attention_state=tf.constant(initial),
    )
    state = tfa.seq2seq.tile_batch(state, width)
    outputs, final_state, _ = decoder(
        None, start_tokens=tf.fill([batch], START), end_token=EOS, initial_state=state
    )
    raw = outputs.beam_search_decoder_output
    steps = raw.predicted_ids.shape[1]

    def pad(ids, fill):
        padded = np.full((batch, T, width), fill, "int32")
        padded[:, :steps] = ids.numpy()
        return padded

    return {
        "predicted_ids": pad(outputs.predicted_ids, EOS),
        "step_ids": pad(raw.predicted_ids, EOS),
        "parent_ids": pad(raw.parent_ids, 0),
        "scores": raw.scores.numpy()[:, -1].astype("float32"),
        "lengths": final_state.lengths.numpy().astype("int32"),
        "steps": np.int32(steps),
    }


def main():
    rng = np.random.default_rng(2024)
    log_probs, attention, initial, lengths = make_tables(rng)
    sources = np.zeros((len(lengths), S), "int32")
    for b, length in enumerate(lengths):
        sources[b, :length] = rng.integers(1, V, length)
    arrays = {
        "log_probs": log_probs,
        "attention": attention,
        "initial_alignments": initial,
        "source_lengths": lengths,
        "sources": sources,
        "eos_id": np.int32(EOS),
        "start_id": np.int32(START),
        "max_length": np.int32(T),
    }
    for width, lp, cp in itertools.product(WIDTHS, LENGTH_PENALTIES, COVERAGE_PENALTIES):
        name = config_name(width, lp, cp)
        result = decode(log_probs, attention, initial, width, lp, cp)
        arrays.update({f"{name}/{key}": value for key, value in result.items()})
        print(name, "steps", result["steps"], "best", result["scores"][:, 0].round(3).tolist())
    np.savez_compressed(OUT, **arrays)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
