"""Generate ``tests/data/tfa_golden.npz``: reference outputs of TensorFlow Addons'
``tfa.seq2seq.AttentionWrapper`` for parity tests of ``AttentionDecoder``.

This script runs ONLY under a separate TF 2.15 + tensorflow-addons 0.23 environment,
never the project's own one (tfa is not, and must not become, a project dependency)::

    python3 -m venv /work/tfa-venv
    /work/tfa-venv/bin/pip install "tensorflow==2.15.*" "tensorflow-addons==0.23.*" "numpy<2"
    /work/tfa-venv/bin/python tests/data/make_tfa_golden.py      # from the repo root

Setup (all float32, numpy seed 1234): B=3 batch, T=4 decoder steps, S=5 memory steps,
input dim 3, memory dim 6, cell units 4. Every weight is drawn from numpy
``uniform(-0.5, 0.5)`` (except the scalar gains noted below) and assigned to the tfa /
tf.keras variables, then read back and checked. The wrapper is stepped manually::

    state = wrapper.get_initial_state(batch_size=B, dtype=tf.float32)
    for t in range(T): out_t, state = wrapper(inputs[:, t], state)

and the result is additionally checked against an independent float64 numpy re-implementation
(``numpy_reference`` below), which doubles as the spec of the tfa semantics:

* Initial state (``AttentionWrapper.get_initial_state``): cell state = the cell's zero
  state (LSTM [h, c] zeros, GRU h zeros), previous attention = zeros of size
  ``attention_layer_size`` (or memory dim when it is None), alignments = zeros (B, S).
* Step: ``cell_in = concat([x_t, prev_attention], -1)``; ``cell_out, cell_state =
  cell(cell_in, cell_state)``; the query is ``cell_out``; ``alignments = softmax(masked
  score)``; ``context = alignments @ values``; ``attention = concat([cell_out, context]) @
  W_attn`` (no bias, no activation) or ``context`` when attention_layer_size is None;
  the step output is ``attention`` (output_attention=True) or ``cell_out`` (False), and
  the next step's prev_attention is always ``attention``.
* Memory masking with ``memory_sequence_length``: ``values = memory * seq_mask`` (padded
  rows zeroed BEFORE the key projection), ``keys = values @ K`` (Dense, no bias); the
  score at padded positions is replaced by ``float32.min`` (-3.4028235e38, i.e.
  ``score.dtype.min``, via tf.where) before softmax -> exactly-0 probabilities.
  Lengths must be >= 1 (tfa asserts positive).
* Bahdanau: ``score = sum(v * tanh(keys + q @ Wq), -1)``; Wq (query_layer) and K
  (memory_layer) are bias-free Dense. normalize=True: ``score = sum(g * v / ||v||_2 *
  tanh(keys + q @ Wq + b), -1)`` (g scalar init sqrt(1/units), b (units,) init 0).
* Luong: no query layer, ``score = q . keys`` (query = cell output, so units must equal
  the cell size); scale=True: ``score = g * (q . keys)`` with scalar g (``attention_g``,
  init 1), applied to the raw score before masking.

Keys in the npz are ``CASE/...``; see ``CASES`` and ``run_case`` for the layout.
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

CASES = {
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

BAHDANAU_G = 1.3  # non-default (default sqrt(1/units)) so the test is meaningful
LUONG_SCALE = 1.7  # non-default (default 1.0)


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


def numpy_reference(cfg, arrays):
    f = {k: np.asarray(v, np.float64) for k, v in arrays.items() if v is not None}
    x, memory, lengths = f["inputs"], f["memory"], arrays["memory_lengths"]
    mask = np.arange(S)[None, :] < lengths[:, None]  # (B, S)
    values = memory * mask[:, :, None]
    attn_size = cfg["attn"] if cfg["attn"] is not None else MEM_DIM
    if cfg["mech"] == "bahdanau":
        keys = values @ f["score/key_kernel"]
    else:
        keys = values @ f["score/kernel"]
    h = np.zeros((B, CELL_UNITS))
    state = (h, np.zeros((B, CELL_UNITS))) if cfg["cell"] == "lstm" else (h,)
    prev_attn = np.zeros((B, attn_size))
    outs, aligns = [], []
    for t in range(T):
        cell_in = np.concatenate([x[:, t], prev_attn], -1)
        if cfg["cell"] == "lstm":
            q, state = _lstm_step(
                cell_in, *state, f["cell/kernel"], f["cell/recurrent_kernel"], f["cell/bias"]
            )
        else:
            q, state = _gru_step(
                cell_in, *state, f["cell/kernel"], f["cell/recurrent_kernel"], f["cell/bias"]
            )
        if cfg["mech"] == "bahdanau":
            pq = (q @ f["score/query_kernel"])[:, None, :]
            v = f["score/v"]
            if cfg["norm"]:
                nv = f["score/g"] * v / np.sqrt(np.sum(v * v))
                score = np.sum(nv * np.tanh(keys + pq + f["score/b"]), -1)
            else:
                score = np.sum(v * np.tanh(keys + pq), -1)
        else:
            score = np.einsum("bu,bsu->bs", q, keys)
            if cfg["norm"]:
                score = f["score/scale"] * score
        score = np.where(mask, score, F32_MIN)
        a = _softmax(score)
        context = np.einsum("bs,bsd->bd", a, values)
        if cfg["attn"] is not None:
            attention = np.concatenate([q, context], -1) @ f["attention_layer/kernel"]
        else:
            attention = context
        outs.append(attention if cfg["out_attn"] else q)
        aligns.append(a)
        prev_attn = attention
    return np.stack(outs, 1), np.stack(aligns, 1), state, prev_attn


# --------------------------------------------------------------------------------------
# tfa run
# --------------------------------------------------------------------------------------
def run_case(name, cfg, rng):
    lengths = np.asarray(cfg["lengths"], np.int32)
    inputs = rng.uniform(-1.0, 1.0, size=(B, T, IN_DIM)).astype(np.float32)
    # padded memory rows are non-zero on purpose: tfa must zero them itself
    memory = rng.uniform(-1.0, 1.0, size=(B, S, MEM_DIM)).astype(np.float32)
    attn_size = cfg["attn"] if cfg["attn"] is not None else MEM_DIM
    cell_in_dim = IN_DIM + attn_size

    # ---- build layers
    if cfg["mech"] == "bahdanau":
        mech = tfa.seq2seq.BahdanauAttention(
            units=cfg["units"], memory=memory, memory_sequence_length=lengths, normalize=cfg["norm"]
        )
    else:
        mech = tfa.seq2seq.LuongAttention(
            units=cfg["units"], memory=memory, memory_sequence_length=lengths, scale=cfg["norm"]
        )
    if cfg["cell"] == "lstm":
        cell = tf.keras.layers.LSTMCell(CELL_UNITS)
    else:
        cell = tf.keras.layers.GRUCell(CELL_UNITS)  # reset_after=True default
    wrapper = tfa.seq2seq.AttentionWrapper(
        cell,
        mech,
        attention_layer_size=cfg["attn"],
        output_attention=cfg["out_attn"],
        alignment_history=True,
    )
    # one throw-away step builds every variable
    st0 = wrapper.get_initial_state(batch_size=B, dtype=tf.float32)
    _, st1 = wrapper(tf.constant(inputs[:, 0]), st0)
    st1.alignment_history.mark_used()  # silence TF's "TensorArray never used" log

    # ---- draw + assign weights (fixed order)
    w = {}
    w["cell/kernel"] = _u(rng, (cell_in_dim, (4 if cfg["cell"] == "lstm" else 3) * CELL_UNITS))
    w["cell/recurrent_kernel"] = _u(
        rng, (CELL_UNITS, (4 if cfg["cell"] == "lstm" else 3) * CELL_UNITS)
    )
    w["cell/bias"] = _u(rng, (4 * CELL_UNITS,) if cfg["cell"] == "lstm" else (2, 3 * CELL_UNITS))
    assigned = [
        (cell.kernel, "cell/kernel"),
        (cell.recurrent_kernel, "cell/recurrent_kernel"),
        (cell.bias, "cell/bias"),
    ]
    u = cfg["units"]
    if cfg["mech"] == "bahdanau":
        w["score/query_kernel"] = _u(rng, (CELL_UNITS, u))
        w["score/key_kernel"] = _u(rng, (MEM_DIM, u))
        w["score/v"] = _u(rng, (u,))
        assigned += [
            (mech.query_layer.kernel, "score/query_kernel"),
            (mech.memory_layer.kernel, "score/key_kernel"),
            (mech.attention_v, "score/v"),
        ]
        if cfg["norm"]:
            w["score/g"] = np.float32(BAHDANAU_G)
            w["score/b"] = _u(rng, (u,))
            assigned += [(mech.attention_g, "score/g"), (mech.attention_b, "score/b")]
    else:
        w["score/kernel"] = _u(rng, (MEM_DIM, u))
        assigned += [(mech.memory_layer.kernel, "score/kernel")]
        if cfg["norm"]:
            w["score/scale"] = np.float32(LUONG_SCALE)
            assigned += [(mech.scale_weight, "score/scale")]
    if cfg["attn"] is not None:
        w["attention_layer/kernel"] = _u(rng, (CELL_UNITS + MEM_DIM, cfg["attn"]))
        assigned += [(wrapper._attention_layers[0].kernel, "attention_layer/kernel")]
    for var, key in assigned:
        _assign(var, w[key])

    # every trainable variable of the wrapper must be one we assigned
    got = {id(v) for v in wrapper.trainable_variables}
    want = {id(v) for v, _ in assigned}
    assert got == want, (name, [v.name for v in wrapper.trainable_variables])
    for var, key in assigned:  # read back
        np.testing.assert_array_equal(var.numpy(), w[key])

    # keys were computed eagerly at setup_memory time with the OLD memory_layer kernel:
    # recompute them with the assigned kernel.
    mech.setup_memory(memory, memory_sequence_length=lengths)
    mask = (np.arange(S)[None, :] < lengths[:, None]).astype(np.float32)
    kk = w["score/key_kernel"] if cfg["mech"] == "bahdanau" else w["score/kernel"]
    np.testing.assert_allclose(mech.values.numpy(), memory * mask[:, :, None], rtol=0, atol=0)
    np.testing.assert_allclose(mech.keys.numpy(), (memory * mask[:, :, None]) @ kk, atol=1e-6)

    # ---- the real run
    state = wrapper.get_initial_state(batch_size=B, dtype=tf.float32)
    for s in tf.nest.flatten(state.cell_state) + [state.attention, state.alignments]:
        assert not np.any(s.numpy()), "initial state is expected to be all zeros"
    assert state.attention.shape == (B, attn_size)
    outs, aligns = [], []
    for t in range(T):
        out, state = wrapper(tf.constant(inputs[:, t]), state)
        outs.append(out.numpy())
        aligns.append(state.alignments.numpy())
    outputs = np.stack(outs, 1).astype(np.float32)
    alignments = np.stack(aligns, 1).astype(np.float32)
    hist = np.transpose(state.alignment_history.stack().numpy(), (1, 0, 2))
    np.testing.assert_array_equal(hist, alignments)
    cell_state = [np.asarray(s, np.float32) for s in tf.nest.flatten(state.cell_state)]
    final_attention = state.attention.numpy().astype(np.float32)

    # masked alignments are exactly zero
    assert np.all(
        alignments[~np.broadcast_to(mask[:, None, :].astype(bool), alignments.shape)] == 0.0
    )

    # ---- numpy cross-check
    ref_out, ref_al, ref_state, ref_attn = numpy_reference(
        cfg, {"inputs": inputs, "memory": memory, "memory_lengths": lengths, **w}
    )
    np.testing.assert_allclose(outputs, ref_out, atol=2e-6, rtol=1e-5)
    np.testing.assert_allclose(alignments, ref_al, atol=2e-6, rtol=1e-5)
    np.testing.assert_allclose(final_attention, ref_attn, atol=2e-6, rtol=1e-5)
    assert len(ref_state) == len(cell_state)
    for a, r in zip(cell_state, ref_state):
        np.testing.assert_allclose(a, r, atol=2e-6, rtol=1e-5)

    res = {
        "inputs": inputs,
        "memory": memory,
        "memory_lengths": lengths,
        "outputs": outputs,
        "alignments": alignments,
        "final_attention": final_attention,
        "meta_output_attention": np.int32(cfg["out_attn"]),
        "meta_attention_layer_size": np.int32(cfg["attn"] or 0),  # 0 == None
        "meta_units": np.int32(cfg["units"]),
        "meta_is_lstm": np.int32(cfg["cell"] == "lstm"),
        "meta_is_bahdanau": np.int32(cfg["mech"] == "bahdanau"),
        "meta_normalize_or_scale": np.int32(cfg["norm"]),
    }
    for i, s in enumerate(cell_state):  # LSTM: _0 = h, _1 = c ; GRU: _0 = h
        res[f"final_cell_state_{i}"] = s
    for k, v in w.items():
        res[k] = np.asarray(v, np.float32)
    return {f"{name}/{k}": v for k, v in res.items()}


def main():
    print(
        f"tensorflow {tf.__version__}, tensorflow-addons {tfa.__version__}, numpy {np.__version__}"
    )
    rng = np.random.default_rng(SEED)
    np.random.seed(SEED)
    tf.random.set_seed(SEED)
    data = {}
    for name, cfg in CASES.items():
        data.update(run_case(name, cfg, rng))
        print(f"{name}: ok (tfa == numpy reference)")
    np.savez_compressed(OUT_PATH, **data)
    size = os.path.getsize(OUT_PATH)
    print(f"wrote {OUT_PATH} ({size} bytes, {len(data)} arrays)")
    assert size < 300_000
    with np.load(OUT_PATH) as z:
        for k in sorted(z.files):
            print(f"  {k:48s} {str(z[k].dtype):8s} {z[k].shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
