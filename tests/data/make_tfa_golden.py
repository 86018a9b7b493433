"""Generate ``tests/data/tfa_golden.npz``: reference outputs of TensorFlow Addons'
``tfa.seq2seq.AttentionWrapper`` (and ``tfa.activations.sparsemax``) for the parity tests
of ``AttentionDecoder`` and ``keras_attn_rnn.normalizers``.

This script runs ONLY under a separate TF 2.15 + tensorflow-addons 0.23 environment,
never the project's own one (tfa is not, and must not become, a project dependency)::

    python3 -m venv /work/tfa-venv
    /work/tfa-venv/bin/pip install "tensorflow==2.15.*" "tensorflow-addons==0.23.*" "numpy<2"
    /work/tfa-venv/bin/python tests/data/make_tfa_golden.py      # from the repo root

Setup (all float32, numpy seed 1234): B=3 batch, T=4 decoder steps, S=5 memory steps,
input dim 3, memory dim 6, cell units 4. Every weight is drawn from numpy
``uniform(-0.5, 0.5)`` (except the scalar gains and score biases noted below) and assigned
to the tfa / tf.keras variables, then read back and checked. The wrapper is stepped
manually::

    state = wrapper.get_initial_state(batch_size=B, dtype=tf.float32)
    for t in range(T): out_t, state = wrapper(inputs[:, t], state)

and the result is additionally checked against an independent float64 numpy re-implementation
(``numpy_reference`` below), which doubles as the spec of the tfa semantics:

* Initial state (``AttentionWrapper.get_initial_state``): cell state = the cell's zero
  state (LSTM [h, c] zeros, GRU h zeros), previous attention = zeros of size
  ``sum(attention_layer_size)`` (or of the memory dims when it is None), alignments and
  attention state = ``initial_alignments``: zeros (B, S) for content mechanisms, one-hot
  at position 0 for the monotonic ones.
* Step: ``cell_in = concat([x_t, prev_attention], -1)``; ``cell_out, cell_state =
  cell(cell_in, cell_state)``; the query is ``cell_out``; for each mechanism ``m``:
  ``alignments_m = probability_fn(masked score, attention_state_m)``, ``context_m =
  alignments_m @ values``; ``attention_m = concat([cell_out, context_m]) @ W_attn_m`` (no
  bias, no activation) or ``context_m`` when attention_layer_size is None;
  ``attention = concat_m(attention_m)``; the next ``attention_state_m`` is
  ``alignments_m``; the step output is ``attention`` (output_attention=True) or
  ``cell_out`` (False), and the next step's prev_attention is always ``attention``.
* Memory masking with ``memory_sequence_length``: ``values = memory * seq_mask`` (padded
  rows zeroed BEFORE the key projection), ``keys = values @ K`` (Dense, no bias); the
  score at padded positions is replaced by ``float32.min`` (-3.4028235e38, i.e.
  ``score.dtype.min``, via tf.where) before the probability function -> exactly-0
  probabilities (softmax, hardmax) / choosing probabilities (monotonic: ``sigmoid(min) ==
  0``, ``min > 0`` is False). Lengths must be >= 1 (tfa asserts positive).
* Bahdanau: ``score = sum(v * tanh(keys + q @ Wq), -1)``; Wq (query_layer) and K
  (memory_layer) are bias-free Dense. normalize=True: ``score = sum(g * v / ||v||_2 *
  tanh(keys + q @ Wq + b), -1)`` (g scalar init sqrt(1/units), b (units,) init 0).
* Luong: no query layer, ``score = q . keys`` (query = cell output, so units must equal
  the cell size); scale=True: ``score = g * (q . keys)`` with scalar g (``scale_weight``,
  ``attention_g`` for the monotonic one; init 1), applied to the raw score before masking.
  ``probability_fn="hardmax"``: one-hot of the first maximum of the masked score.
* Monotonic (``BahdanauMonotonicAttention`` / ``LuongMonotonicAttention``, sigmoid_noise=0):
  ``score += attention_score_bias`` (scalar), then masking, then ``p = sigmoid(score)``
  (mode "hard": ``p = (score > 0)``) and ``monotonic_attention(p, prev_alignments, mode)``:
  "recursive": ``q_i = (1 - p_{i-1}) q_{i-1} + prev_i`` (q_{-1} = 0), ``a = p * q``;
  "parallel": ``c = safe_cumprod(1 - p, exclusive)`` (log-space, clipped at float tiny),
  ``a = p * c * cumsum(prev / clip(c, 1e-10, 1))``; "hard": ``p *= cumsum(prev)``,
  ``a = p * cumprod(1 - p, exclusive)``.
* ``sparsemax/inputs`` -> ``sparsemax/outputs``: ``tfa.activations.sparsemax`` on a few
  rows (ties, all-equal, one-hot, large and negative values), checked against a sort-based
  float64 numpy sparsemax.

Keys in the npz are ``CASE/...``. Weights are stored by role:

* one mechanism: ``CASE/cell/{kernel,recurrent_kernel,bias}``, ``CASE/score/<role>``
  (additive: ``query_kernel``, ``key_kernel``, ``v``, normalized also ``g``, ``b``;
  general: ``kernel``, scaled also ``scale``), ``CASE/mechanism/score_bias`` (monotonic
  only), ``CASE/attention_layer/kernel``; alignments ``CASE/alignments`` (B, T, S);
* several mechanisms: ``CASE/mechanism_<i>/score/<role>``, ``CASE/mechanism_<i>/score_bias``,
  ``CASE/attention_layer_<i>/kernel``; alignments ``CASE/alignments_<i>``;
* always: ``inputs``, ``memory``, ``memory_lengths``, ``outputs``, ``final_attention``,
  ``final_cell_state_<k>`` (LSTM: 0 = h, 1 = c; GRU: 0 = h).

Metadata: the six original cases (``LEGACY_CASES``, built in the test with the
``AttentionDecoder(score=...)`` shorthand) keep their ``meta_is_bahdanau``, ``meta_units``,
``meta_normalize_or_scale``, ``meta_attention_layer_size`` (0 == None),
``meta_output_attention``, ``meta_is_lstm``. The mechanism cases (``MECHANISM_CASES``) have
``meta_output_attention``, ``meta_is_lstm``, ``meta_num_mechanisms`` and per mechanism
``meta_mechanism_<i>_{class,score,units,normalize_or_scale,mode,normalizer,
attention_layer_size}`` (class "content" | "monotonic"; score "additive" | "general"; mode ""
for content; attention_layer_size 0 == None).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import warnings  # noqa: E402

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_addons as tfa  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "tfa_golden.npz")

SEED = 1234
B, T, S = 3, 4, 5
IN_DIM, MEM_DIM, CELL_UNITS = 3, 6, 4
F32_MIN = np.finfo(np.float32).min
MAX_BYTES = 300_000

LEGACY_CASES = {
    # name: mechanism, mech_units, normalize/scale, cell, attention_layer_size, output_attention, lengths
    "bahdanau_lstm": dict(
        mech="bahdanau", units=5, norm=False, cell="lstm", attn=7, out_attn=True, lengths=[5, 1, 3]
    ),
    "bahdanau_norm_lstm": dict(
        mech="bahdanau", units=5, norm=True, cell="lstm", attn=7, out_attn=True, lengths=[5, 2, 4]
    ),
    "luong_lstm": dict(
        mech="luong", units=4, norm=False, cell="lstm", attn=7, out_attn=True, lengths=[1, 5, 3]
    ),
    "luong_scaled_gru": dict(
        mech="luong", units=4, norm=True, cell="gru", attn=7, out_attn=True, lengths=[5, 5, 2]
    ),
    "bahdanau_gru_noattnlayer": dict(
        mech="bahdanau",
        units=5,
        norm=False,
        cell="gru",
        attn=None,
        out_attn=True,
        lengths=[5, 1, 4],
    ),
    "bahdanau_lstm_cellout": dict(
        mech="bahdanau", units=5, norm=False, cell="lstm", attn=7, out_attn=False, lengths=[3, 5, 1]
    ),
}


def _mono(score, mode, norm, bias, units):
    return dict(kind="monotonic", score=score, units=units, norm=norm, mode=mode, bias=bias)


def _content(score, units, norm=False, normalizer="softmax"):
    return dict(kind="content", score=score, units=units, norm=norm, normalizer=normalizer)


# Mechanism cases: `mechs` (one or several), `attn` an int / None (one mechanism) or a list
# of ints / None (several; tfa has no per-mechanism None). Score biases are non-default
# (tfa's default is 0); the "hard" ones are chosen so that every row attends for several
# steps and the attended position moves (asserted in `_check_hard`).
MECHANISM_CASES = {
    "bahdanau_monotonic_parallel_lstm": dict(
        mechs=[_mono("additive", "parallel", False, -0.6, 5)],
        cell="lstm",
        attn=7,
        out_attn=True,
        lengths=[5, 1, 3],
    ),
    "bahdanau_monotonic_norm_recursive_gru": dict(
        mechs=[_mono("additive", "recursive", True, 0.8, 5)],
        cell="gru",
        attn=7,
        out_attn=True,
        lengths=[1, 5, 4],
    ),
    "bahdanau_monotonic_norm_hard_lstm": dict(
        mechs=[_mono("additive", "hard", True, 0.2, 5)],
        cell="lstm",
        attn=7,
        out_attn=True,
        lengths=[5, 3, 1],
    ),
    "luong_monotonic_scaled_parallel_gru": dict(
        mechs=[_mono("general", "parallel", True, 0.5, 4)],
        cell="gru",
        attn=None,
        out_attn=True,
        lengths=[5, 2, 5],
    ),
    "luong_monotonic_recursive_lstm_cellout": dict(
        mechs=[_mono("general", "recursive", False, -0.4, 4)],
        cell="lstm",
        attn=7,
        out_attn=False,
        lengths=[4, 5, 1],
    ),
    "luong_monotonic_scaled_hard_gru": dict(
        mechs=[_mono("general", "hard", True, 0.5, 4)],
        cell="gru",
        attn=7,
        out_attn=True,
        lengths=[5, 1, 5],
    ),
    "luong_hardmax_gru": dict(
        mechs=[_content("general", 4, normalizer="hardmax")],
        cell="gru",
        attn=7,
        out_attn=True,
        lengths=[3, 5, 1],
    ),
    "two_bahdanau_luong_monotonic_lstm": dict(
        mechs=[_content("additive", 5), _mono("general", "parallel", True, -0.3, 4)],
        cell="lstm",
        attn=[7, 3],
        out_attn=True,
        lengths=[5, 1, 3],
    ),
    "two_bahdanau_norm_luong_gru_nolayer": dict(
        mechs=[_content("additive", 5, norm=True), _content("general", 4)],
        cell="gru",
        attn=None,
        out_attn=True,
        lengths=[2, 5, 1],
    ),
}

BAHDANAU_G = 1.3  # non-default (default sqrt(1/units)) so the test is meaningful
LUONG_SCALE = 1.7  # non-default (default 1.0)
HARD_MARGIN = 1e-3  # |score| (hard monotonic) / top-2 gap (hardmax) away from a decision tie

SPARSEMAX_ROWS = [
    [1.0, 1.0, 0.2, -0.5, 1.0],  # three-way tie at the maximum
    [0.5, 0.5, 0.5, 0.5, 0.5],  # all equal -> uniform
    [2.0, 0.0, -1.0, 0.5, 3.1],  # gap > 1 -> one-hot
    [0.1, 0.4, 0.4, -0.3, 0.0],  # tie inside the support
    [-3.0, -3.2, -10.0, -3.1, -2.9],  # all negative
    [100.0, 100.5, 99.0, 0.0, -100.0],  # large magnitudes
    [1.0, 0.0, 0.0, -2.0, 0.5],  # a tie at the support boundary
]


def _legacy_spec(cfg):
    """A legacy case in the mechanism-case form (same weight draw order and names)."""
    score = "additive" if cfg["mech"] == "bahdanau" else "general"
    return dict(
        mechs=[_content(score, cfg["units"], norm=cfg["norm"])],
        cell=cfg["cell"],
        attn=cfg["attn"],
        out_attn=cfg["out_attn"],
        lengths=cfg["lengths"],
    )


def _layer_sizes(spec):
    attn = spec["attn"]
    if len(spec["mechs"]) == 1:
        return [attn]
    return list(attn) if attn is not None else [None] * len(spec["mechs"])


def _prefixes(spec):
    """Per mechanism: (score prefix, mechanism prefix, attention layer prefix)."""
    if len(spec["mechs"]) == 1:
        return [("score/", "mechanism/", "attention_layer/")]
    return [
        (f"mechanism_{i}/score/", f"mechanism_{i}/", f"attention_layer_{i}/")
        for i in range(len(spec["mechs"]))
    ]


def _u(rng, shape):
    return rng.uniform(-0.5, 0.5, size=shape).astype(np.float32)


def _assign(var, value):
    value = np.asarray(value, dtype=np.float32)
    assert tuple(var.shape) == value.shape, (var.name, var.shape, value.shape)
    var.assign(value)


# --------------------------------------------------------------------------------------
# Independent numpy reference (float64) -- the tfa semantics in plain code.
# --------------------------------------------------------------------------------------
def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _lstm_step(x, h, c, k, rk, b):
    # tf.keras 2.x LSTMCell: gates i, f, c, o; activation tanh, recurrent sigmoid.
    z = x @ k + h @ rk + b
    i, f, g, o = np.split(z, 4, axis=-1)
    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    h = _sigmoid(o) * np.tanh(c)
    return h, (h, c)


def _gru_step(x, h, k, rk, b):
    # tf.keras 2.x GRUCell, reset_after=True: bias (2, 3u) = [input_bias, recurrent_bias],
    # gates z, r, h.
    xz, xr, xh = np.split(x @ k + b[0], 3, axis=-1)
    hz, hr, hh = np.split(h @ rk + b[1], 3, axis=-1)
    z = _sigmoid(xz + hz)
    r = _sigmoid(xr + hr)
    hhat = np.tanh(xh + r * hh)
    h = z * h + (1.0 - z) * hhat
    return h, (h,)


def _softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def _hardmax(x):
    return np.eye(x.shape[-1])[np.argmax(x, -1)]


def _exclusive_cumprod(x):
    return np.concatenate([np.ones_like(x[:, :1]), np.cumprod(x, -1)[:, :-1]], -1)


def monotonic_reference(p, prev, mode):
    """tfa's ``monotonic_attention`` in float64 (parallel: with tfa's clipping)."""
    if mode == "recursive":
        q = np.zeros_like(p)
        carry = np.zeros(p.shape[0])
        for i in range(p.shape[1]):
            carry = (1.0 - p[:, i - 1] if i else 1.0) * carry + prev[:, i]
            q[:, i] = carry
        return p * q
    if mode == "parallel":
        c = _exclusive_cumprod(np.clip(1.0 - p, np.finfo(np.float32).tiny, 1.0))
        return p * c * np.cumsum(prev / np.clip(c, 1e-10, 1.0), -1)
    assert mode == "hard", mode
    p = p * np.cumsum(prev, -1)
    return p * _exclusive_cumprod(1.0 - p)


def _raw_score(m, f, pre, q, keys):
    if m["score"] == "additive":
        pq = (q @ f[pre + "query_kernel"])[:, None, :]
        v = f[pre + "v"]
        if m["norm"]:
            nv = f[pre + "g"] * v / np.sqrt(np.sum(v * v))
            return np.sum(nv * np.tanh(keys + pq + f[pre + "b"]), -1)
        return np.sum(v * np.tanh(keys + pq), -1)
    score = np.einsum("bu,bsu->bs", q, keys)
    if m["norm"]:
        score = f[pre + "scale"] * score
    return score


def numpy_reference(spec, arrays):
    """``(outputs, [alignments per mechanism], cell state, final attention, margins)``;
    ``margins`` is the smallest distance of a discrete decision from its tie, per mechanism
    (inf for continuous ones)."""
    f = {k: np.asarray(v, np.float64) for k, v in arrays.items() if v is not None}
    x, memory, lengths = f["inputs"], f["memory"], arrays["memory_lengths"]
    mask = np.arange(S)[None, :] < lengths[:, None]  # (B, S)
    values = memory * mask[:, :, None]
    mechs, sizes, prefixes = spec["mechs"], _layer_sizes(spec), _prefixes(spec)
    keys = [
        values @ f[sp + ("key_kernel" if m["score"] == "additive" else "kernel")]
        for m, (sp, _, _) in zip(mechs, prefixes)
    ]
    h = np.zeros((B, CELL_UNITS))
    state = (h, np.zeros((B, CELL_UNITS))) if spec["cell"] == "lstm" else (h,)
    prev_attn = np.zeros((B, sum(MEM_DIM if s is None else s for s in sizes)))
    prev_align = [
        np.eye(S)[np.zeros(B, int)] if m["kind"] == "monotonic" else np.zeros((B, S)) for m in mechs
    ]
    outs, aligns, margins = [], [[] for _ in mechs], [np.inf for _ in mechs]
    for t in range(T):
        cell_in = np.concatenate([x[:, t], prev_attn], -1)
        step = _lstm_step if spec["cell"] == "lstm" else _gru_step
        q, state = step(
            cell_in, *state, f["cell/kernel"], f["cell/recurrent_kernel"], f["cell/bias"]
        )
        attentions = []
        for i, (m, (sp, mp, lp), size) in enumerate(zip(mechs, prefixes, sizes)):
            score = _raw_score(m, f, sp, q, keys[i])
            if m["kind"] == "monotonic":
                score = score + f[mp + "score_bias"]
                if m["mode"] == "hard":
                    margins[i] = min(margins[i], np.abs(score[mask]).min())
                    p = np.where(mask, (score > 0).astype(np.float64), 0.0)
                else:
                    p = np.where(mask, _sigmoid(score), 0.0)
                a = monotonic_reference(p, prev_align[i], m["mode"])
            else:
                score = np.where(mask, score, F32_MIN)
                if m["normalizer"] == "hardmax":
                    top2 = np.sort(score, -1)[:, -2:]
                    gaps = (top2[:, 1] - top2[:, 0])[lengths > 1]
                    if gaps.size:
                        margins[i] = min(margins[i], gaps.min())
                    a = _hardmax(score)
                else:
                    a = _softmax(score)
            context = np.einsum("bs,bsd->bd", a, values)
            attentions.append(
                context if size is None else np.concatenate([q, context], -1) @ f[lp + "kernel"]
            )
            aligns[i].append(a)
            prev_align[i] = a
        attention = np.concatenate(attentions, -1)
        outs.append(attention if spec["out_attn"] else q)
        prev_attn = attention
    return np.stack(outs, 1), [np.stack(a, 1) for a in aligns], state, prev_attn, margins


def sparsemax_reference(z):
    z = np.asarray(z, np.float64)
    s = -np.sort(-z, -1)
    k = np.arange(1, z.shape[-1] + 1)
    cum = np.cumsum(s, -1)
    support = np.sum(1.0 + k * s > cum, -1)
    tau = (np.take_along_axis(cum, support[:, None] - 1, -1) - 1.0) / support[:, None]
    return np.maximum(z - tau, 0.0)


# --------------------------------------------------------------------------------------
# tfa run
# --------------------------------------------------------------------------------------
def _tfa_mechanism(m, memory, lengths):
    common = dict(units=m["units"], memory=memory, memory_sequence_length=lengths)
    if m["kind"] == "monotonic":
        extra = dict(sigmoid_noise=0.0, score_bias_init=0.0, mode=m["mode"])
        if m["score"] == "additive":
            return tfa.seq2seq.BahdanauMonotonicAttention(normalize=m["norm"], **common, **extra)
        return tfa.seq2seq.LuongMonotonicAttention(scale=m["norm"], **common, **extra)
    if m["score"] == "additive":
        assert m["normalizer"] == "softmax"
        return tfa.seq2seq.BahdanauAttention(normalize=m["norm"], **common)
    return tfa.seq2seq.LuongAttention(scale=m["norm"], probability_fn=m["normalizer"], **common)


def _mechanism_weights(m, mech, sp, mp, rng, w):
    """Draws the mechanism's weights (fixed order) into ``w``; ``[(variable, key)]``."""
    u = m["units"]
    assigned = []
    if m["score"] == "additive":
        w[sp + "query_kernel"] = _u(rng, (CELL_UNITS, u))
        w[sp + "key_kernel"] = _u(rng, (MEM_DIM, u))
        w[sp + "v"] = _u(rng, (u,))
        assigned += [
            (mech.query_layer.kernel, sp + "query_kernel"),
            (mech.memory_layer.kernel, sp + "key_kernel"),
            (mech.attention_v, sp + "v"),
        ]
        if m["norm"]:
            w[sp + "g"] = np.float32(BAHDANAU_G)
            w[sp + "b"] = _u(rng, (u,))
            assigned += [(mech.attention_g, sp + "g"), (mech.attention_b, sp + "b")]
    else:
        assert u == CELL_UNITS  # Luong: the query is the cell output
        w[sp + "kernel"] = _u(rng, (MEM_DIM, u))
        assigned += [(mech.memory_layer.kernel, sp + "kernel")]
        if m["norm"]:
            w[sp + "scale"] = np.float32(LUONG_SCALE)
            scale = mech.attention_g if m["kind"] == "monotonic" else mech.scale_weight
            assigned += [(scale, sp + "scale")]
    if m["kind"] == "monotonic":
        assert m["bias"] != 0.0, "score_bias must be non-default (tfa's default is 0)"
        w[mp + "score_bias"] = np.float32(m["bias"])
        assigned += [(mech.attention_score_bias, mp + "score_bias")]
    return assigned


def _check_hard(name, alignments):
    """A hard monotonic case must really attend: every row one-hot at >= 2 steps, and the
    attended position moves in at least one row."""
    attended = np.all(np.isin(alignments, (0.0, 1.0))) and np.all(alignments.sum(-1) <= 1.0)
    assert attended, (name, alignments)
    steps = alignments.sum(-1)  # (B, T) in {0, 1}
    assert np.all(steps.sum(-1) >= 2), (name, "a row attends for < 2 steps", steps)
    positions = [np.argmax(alignments[b, steps[b] > 0], -1) for b in range(B)]
    assert any(len(set(p.tolist())) > 1 for p in positions), (name, "never moves", positions)
    for p in positions:  # monotonic: never backwards
        assert np.all(np.diff(p) >= 0), (name, positions)


def run_case(name, spec, rng, legacy_cfg=None):
    lengths = np.asarray(spec["lengths"], np.int32)
    inputs = rng.uniform(-1.0, 1.0, size=(B, T, IN_DIM)).astype(np.float32)
    # padded memory rows are non-zero on purpose: tfa must zero them itself
    memory = rng.uniform(-1.0, 1.0, size=(B, S, MEM_DIM)).astype(np.float32)
    mechs, sizes, prefixes = spec["mechs"], _layer_sizes(spec), _prefixes(spec)
    multi = len(mechs) > 1
    attn_size = sum(MEM_DIM if s is None else s for s in sizes)
    cell_in_dim = IN_DIM + attn_size

    # ---- build layers
    tfa_mechs = [_tfa_mechanism(m, memory, lengths) for m in mechs]
    if spec["cell"] == "lstm":
        cell = tf.keras.layers.LSTMCell(CELL_UNITS)
    else:
        cell = tf.keras.layers.GRUCell(CELL_UNITS)  # reset_after=True default
    wrapper = tfa.seq2seq.AttentionWrapper(
        cell,
        tfa_mechs if multi else tfa_mechs[0],
        attention_layer_size=spec["attn"],
        output_attention=spec["out_attn"],
        alignment_history=True,
    )
    # one throw-away step builds every variable
    st0 = wrapper.get_initial_state(batch_size=B, dtype=tf.float32)
    _, st1 = wrapper(tf.constant(inputs[:, 0]), st0)
    for history in tf.nest.flatten(st1.alignment_history):
        history.mark_used()  # silence TF's "TensorArray never used" log

    # ---- draw + assign weights (fixed order: cell, each mechanism, each attention layer)
    w = {}
    gates = 4 if spec["cell"] == "lstm" else 3
    w["cell/kernel"] = _u(rng, (cell_in_dim, gates * CELL_UNITS))
    w["cell/recurrent_kernel"] = _u(rng, (CELL_UNITS, gates * CELL_UNITS))
    w["cell/bias"] = _u(rng, (4 * CELL_UNITS,) if spec["cell"] == "lstm" else (2, 3 * CELL_UNITS))
    assigned = [
        (cell.kernel, "cell/kernel"),
        (cell.recurrent_kernel, "cell/recurrent_kernel"),
        (cell.bias, "cell/bias"),
    ]
    for m, mech, (sp, mp, _) in zip(mechs, tfa_mechs, prefixes):
        assigned += _mechanism_weights(m, mech, sp, mp, rng, w)
    for i, (size, (_, _, lp)) in enumerate(zip(sizes, prefixes)):
        if size is not None:
            w[lp + "kernel"] = _u(rng, (CELL_UNITS + MEM_DIM, size))
            assigned += [(wrapper._attention_layers[i].kernel, lp + "kernel")]
    for var, key in assigned:
        _assign(var, w[key])

    # every trainable variable of the wrapper must be one we assigned
    got = {id(v) for v in wrapper.trainable_variables}
    want = {id(v) for v, _ in assigned}
    assert got == want, (name, [v.name for v in wrapper.trainable_variables])
    assert len(assigned) == len(want) == len(w), name
    for var, key in assigned:  # read back
        np.testing.assert_array_equal(var.numpy(), w[key])

    # keys were computed eagerly at setup_memory time with the OLD memory_layer kernel:
    # recompute them with the assigned kernel.
    mask = (np.arange(S)[None, :] < lengths[:, None]).astype(np.float32)
    for m, mech, (sp, _, _) in zip(mechs, tfa_mechs, prefixes):
        mech.setup_memory(memory, memory_sequence_length=lengths)
        kk = w[sp + ("key_kernel" if m["score"] == "additive" else "kernel")]
        np.testing.assert_allclose(mech.values.numpy(), memory * mask[:, :, None], rtol=0, atol=0)
        np.testing.assert_allclose(mech.keys.numpy(), (memory * mask[:, :, None]) @ kk, atol=1e-6)

    # ---- the real run
    state = wrapper.get_initial_state(batch_size=B, dtype=tf.float32)
    for s in tf.nest.flatten(state.cell_state) + [state.attention]:
        assert not np.any(s.numpy()), "initial cell state / attention are expected to be zeros"
    initial = tf.nest.flatten(state.alignments)
    initial_states = tf.nest.flatten(state.attention_state)
    for m, a0, s0 in zip(mechs, initial, initial_states):
        want0 = np.eye(S)[np.zeros(B, int)] if m["kind"] == "monotonic" else np.zeros((B, S))
        np.testing.assert_array_equal(a0.numpy(), want0)
        np.testing.assert_array_equal(s0.numpy(), want0)
    assert state.attention.shape == (B, attn_size)
    outs, aligns = [], [[] for _ in mechs]
    for t in range(T):
        out, state = wrapper(tf.constant(inputs[:, t]), state)
        outs.append(out.numpy())
        for i, a in enumerate(tf.nest.flatten(state.alignments)):
            aligns[i].append(a.numpy())
        for a, s in zip(tf.nest.flatten(state.alignments), tf.nest.flatten(state.attention_state)):
            np.testing.assert_array_equal(a.numpy(), s.numpy())  # attention_state == alignments
    outputs = np.stack(outs, 1).astype(np.float32)
    alignments = [np.stack(a, 1).astype(np.float32) for a in aligns]
    for a, history in zip(alignments, tf.nest.flatten(state.alignment_history)):
        np.testing.assert_array_equal(np.transpose(history.stack().numpy(), (1, 0, 2)), a)
    cell_state = [np.asarray(s, np.float32) for s in tf.nest.flatten(state.cell_state)]
    final_attention = state.attention.numpy().astype(np.float32)

    # internal consistency: >= 0, sums <= 1, exactly zero on padded positions
    padded = ~np.broadcast_to(mask[:, None, :].astype(bool), (B, T, S))
    for m, a in zip(mechs, alignments):
        assert np.all(a[padded] == 0.0), name
        assert np.all(a >= 0.0) and np.all(a.sum(-1) <= 1.0 + 1e-6), name
        if m["kind"] == "content":
            np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-6)
        if m.get("mode") == "hard" or m.get("normalizer") == "hardmax":
            assert np.all(np.isin(a, (0.0, 1.0))), name
        if m.get("mode") == "hard":
            _check_hard(name, a)

    # ---- numpy cross-check
    ref_out, ref_al, ref_state, ref_attn, margins = numpy_reference(
        spec, {"inputs": inputs, "memory": memory, "memory_lengths": lengths, **w}
    )
    for m, margin in zip(mechs, margins):  # discrete decisions are far from their ties
        assert margin > HARD_MARGIN, (name, m, margin)
    np.testing.assert_allclose(outputs, ref_out, atol=2e-6, rtol=1e-5)
    for a, r in zip(alignments, ref_al):
        np.testing.assert_allclose(a, r, atol=2e-6, rtol=1e-5)
    np.testing.assert_allclose(final_attention, ref_attn, atol=2e-6, rtol=1e-5)
    assert len(ref_state) == len(cell_state)
    for a, r in zip(cell_state, ref_state):
        np.testing.assert_allclose(a, r, atol=2e-6, rtol=1e-5)

    res = {
        "inputs": inputs,
        "memory": memory,
        "memory_lengths": lengths,
        "outputs": outputs,
        "final_attention": final_attention,
        "meta_output_attention": np.int32(spec["out_attn"]),
        "meta_is_lstm": np.int32(spec["cell"] == "lstm"),
    }
    if multi:
        for i, a in enumerate(alignments):
            res[f"alignments_{i}"] = a
    else:
        res["alignments"] = alignments[0]
    if legacy_cfg is not None:
        res.update(
            {
                "meta_attention_layer_size": np.int32(legacy_cfg["attn"] or 0),  # 0 == None
                "meta_units": np.int32(legacy_cfg["units"]),
                "meta_is_bahdanau": np.int32(legacy_cfg["mech"] == "bahdanau"),
                "meta_normalize_or_scale": np.int32(legacy_cfg["norm"]),
            }
        )
    else:
        res["meta_num_mechanisms"] = np.int32(len(mechs))
        for i, (m, size) in enumerate(zip(mechs, sizes)):
            p = f"meta_mechanism_{i}_"
            res[p + "class"] = np.str_(m["kind"])
            res[p + "score"] = np.str_(m["score"])
            res[p + "units"] = np.int32(m["units"])
            res[p + "normalize_or_scale"] = np.int32(m["norm"])
            res[p + "mode"] = np.str_(m.get("mode", ""))
            res[p + "normalizer"] = np.str_(m.get("normalizer", ""))
            res[p + "attention_layer_size"] = np.int32(size or 0)  # 0 == None
    for i, s in enumerate(cell_state):  # LSTM: _0 = h, _1 = c ; GRU: _0 = h
        res[f"final_cell_state_{i}"] = s
    for k, v in w.items():
        res[k] = np.asarray(v, np.float32)
    summary = " ".join(
        f"[{m['kind']} {m['score']}"
        + (f" {m['mode']} bias={m['bias']}" if m["kind"] == "monotonic" else "")
        + (" norm" if m["norm"] else "")
        + (f" {m['normalizer']}" if m.get("normalizer", "softmax") != "softmax" else "")
        + "]"
        for m in mechs
    )
    info = (
        f"{spec['cell']} lengths={lengths.tolist()} attention_layer_size={spec['attn']} {summary}"
    )
    return {f"{name}/{k}": v for k, v in res.items()}, info


def sparsemax_case():
    inputs = np.asarray(SPARSEMAX_ROWS, np.float32)
    outputs = tfa.activations.sparsemax(tf.constant(inputs)).numpy().astype(np.float32)
    np.testing.assert_allclose(outputs, sparsemax_reference(inputs), atol=1e-6, rtol=0)
    np.testing.assert_allclose(outputs.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(outputs[1], 0.2, atol=1e-7)  # all equal -> uniform
    assert np.count_nonzero(outputs[2]) == 1  # one-hot
    return {"sparsemax/inputs": inputs, "sparsemax/outputs": outputs}


def main():
    print(
        f"tensorflow {tf.__version__}, tensorflow-addons {tfa.__version__}, numpy {np.__version__}"
    )
    rng = np.random.default_rng(SEED)
    np.random.seed(SEED)
    tf.random.set_seed(SEED)
    data = {}
    # the legacy cases first: their draws from `rng` (and so their data) are unchanged
    for name, cfg in LEGACY_CASES.items():
        arrays, info = run_case(name, _legacy_spec(cfg), rng, legacy_cfg=cfg)
        data.update(arrays)
        print(f"{name}: ok (tfa == numpy reference) {info}")
    for name, spec in MECHANISM_CASES.items():
        arrays, info = run_case(name, spec, rng)
        data.update(arrays)
        print(f"{name}: ok (tfa == numpy reference) {info}")
    data.update(sparsemax_case())
    print("sparsemax: ok (tfa == numpy reference)")
    np.savez_compressed(OUT_PATH, **data)
    size = os.path.getsize(OUT_PATH)
    print(f"wrote {OUT_PATH} ({size} bytes, {len(data)} arrays)")
    assert size < MAX_BYTES, size
    with np.load(OUT_PATH) as z:
        for k in sorted(z.files):
            print(f"  {k:64s} {str(z[k].dtype):8s} {z[k].shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
