"""How `AttentionDecoder` runs its cell: the LSTM/GRU fast path, or the cell's own call.

For a plain `LSTMCell` or `GRUCell` without dropout the cell maths is re-done
here so that the `x_t` half of the input matmul (`x @ kernel[:d_in] + bias`)
is applied to all steps at once before the loop; only the attention and
recurrent halves stay inside it. Every other cell is called as is.

The LSTM's two in-loop halves are one matmul of `concat(attention, h)` against
the stacked kernel where a fusing compiler runs (`_compilation.fuses_elementwise()`:
JAX, XLA), and two matmuls op by op (TensorFlow's graph mode, eager): there the
`h @ recurrent_kernel` of a step can start as soon as the step before has its
`h`, on the second inter-op thread, while that step's attention is still being
formed. Measured on a 2-core AVX-512 CPU (docs/results/benchmarks.md): in TF
graph mode two matmuls took 0.93-0.99 of one's time per `Seq2Seq` training
step and 0.93-0.94 at `decoder_vs_tfa`'s shapes; under JAX 1.03-1.04, under
TensorFlow's XLA 0.98-1.00, in PyTorch eager within its noise.

`cell_maths(cell, kind, input_dim, input_feeding)` returns an object with
`project_inputs(x)` (before the loop), `weights()` (per-step weights,
prepared once per sequence) and `step(x, cell_state, attention, weights,
training) -> (cell_output, new_cell_state)`.
"""

import keras
from keras import ops, tree

from keras_attn_rnn import _compilation
from keras_attn_rnn.layers import _common


def fast_path_kind(cell):
    """`"lstm"` / `"gru"` when the cell's maths can be re-done with hoisted inputs, else None."""
    kind = {keras.layers.LSTMCell: "lstm", keras.layers.GRUCell: "gru"}.get(type(cell))
    if kind is None or cell.dropout or cell.recurrent_dropout:
        return None
    return kind


def cell_maths(cell, kind, input_dim, input_feeding):
    """The step maths for `cell`: `kind` is `fast_path_kind(cell)` or None (call the cell)."""
    maths = {"lstm": _LSTMMaths, "gru": _GRUMaths, None: _CellCall}[kind]
    return maths(cell, input_dim, input_feeding)


class _CellCall:
    """Calls the cell on `concat(x_t, attention)` (with input feeding)."""

    def __init__(self, cell, input_dim, input_feeding):
        self.cell, self.input_dim, self.input_feeding = cell, input_dim, input_feeding

    def project_inputs(self, x):
        return x

    def weights(self):
        return None

    def step(self, x, cell_state, attention, weights, training):
        cell_input = ops.concatenate([x, attention], axis=-1) if self.input_feeding else x
        kwargs = {"training": training} if _common.call_has_training_arg(self.cell) else {}
        output, new_state = self.cell(cell_input, cell_state, **kwargs)
        new_state = new_state if tree.is_nested(new_state) else [new_state]
        return output, tree.pack_sequence_as(cell_state, tree.flatten(new_state))


class _HoistedInputs(_CellCall):
    """The loop-independent part of the cell input, `x @ kernel[:d_in] + bias`, up front."""

    def _cast(self, value):
        return ops.cast(value, self.cell.compute_dtype)

    def _input_bias(self):
        return self.cell.bias

    def project_inputs(self, x):
        z = ops.matmul(x, self._cast(self.cell.kernel[: self.input_dim]))
        if self.cell.use_bias:
            z = z + self._cast(self._input_bias())
        return z

    def _feed_kernel(self):
        """The rows of the kernel that multiply the fed-back attention."""
        return self._cast(self.cell.kernel[self.input_dim :])


class _LSTMMaths(_HoistedInputs):
    def weights(self):
        recurrent = self._cast(self.cell.recurrent_kernel)
        if not self.input_feeding:
            return {"kernel": recurrent}
        if _compilation.fuses_elementwise():  # one matmul of concat(attention, h) per step
            return {"kernel": ops.concatenate([self._feed_kernel(), recurrent], axis=0)}
        # op by op, two: `h @ recurrent` runs beside the attention of the step before
        return {"kernel": recurrent, "feed": self._feed_kernel()}

    def step(self, x, cell_state, attention, weights, training):
        cell = self.cell
        h, c = cell_state
        if "feed" in weights:
            z = x + ops.matmul(h, weights["kernel"]) + ops.matmul(attention, weights["feed"])
        else:
            hidden = ops.concatenate([attention, h], axis=-1) if self.input_feeding else h
            z = x + ops.matmul(hidden, weights["kernel"])
        z_i, z_f, z_c, z_o = ops.split(z, 4, axis=-1)
        c = cell.recurrent_activation(z_f) * c + cell.recurrent_activation(z_i) * cell.activation(
            z_c
        )
        h = cell.recurrent_activation(z_o) * cell.activation(c)
        return h, [h, c]


class _GRUMaths(_HoistedInputs):
    def _input_bias(self):
        return self.cell.bias[0] if self.cell.reset_after else self.cell.bias

    def weights(self):
        cell = self.cell
        weights = {
            "feed": self._feed_kernel() if self.input_feeding else None,
            "recurrent": self._cast(cell.recurrent_kernel),
        }
        if cell.use_bias and cell.reset_after:
            weights["bias"] = self._cast(cell.bias[1])
        return weights

    def step(self, x, cell_state, attention, weights, training):
        cell = self.cell
        (h,) = cell_state
        units = cell.units
        if self.input_feeding:
            x = x + ops.matmul(attention, weights["feed"])
        x_z, x_r, x_h = ops.split(x, 3, axis=-1)
        recurrent = weights["recurrent"]
        if cell.reset_after:
            inner = ops.matmul(h, recurrent)
            if "bias" in weights:
                inner = inner + weights["bias"]
            r_z, r_r, r_h = ops.split(inner, 3, axis=-1)
            z = cell.recurrent_activation(x_z + r_z)
            r = cell.recurrent_activation(x_r + r_r)
            hh = cell.activation(x_h + r * r_h)
        else:
            inner = ops.matmul(h, recurrent[:, : 2 * units])
            z = cell.recurrent_activation(x_z + inner[:, :units])
            r = cell.recurrent_activation(x_r + inner[:, units:])
            hh = cell.activation(x_h + ops.matmul(r * h, recurrent[:, 2 * units :]))
        h = z * h + (1 - z) * hh
        return h, [h]
