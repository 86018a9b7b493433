"""One step of `AttentionDecoder`: the cell, then every mechanism's attention, then the output.

Exactly as TensorFlow Addons' `AttentionWrapper`, for the step input `x_t`:

    cell_output, cell_state = cell(concat(x_t, attention_{t-1}), cell_state)
    for each mechanism m (with its attention layer W_m, if any):
        a_m = m(cell_output, keys_m, memory, memory_mask, m_state)     # (B, S) float32
        context_m = a_m . memory                                       # (B, d_m)
        attention_m = concat(cell_output, context_m) W_m  (or context_m without a layer)
    attention_t = concat over m of attention_m
    output = attention_t | cell_output | concat(cell_output, attention_t)

(`concat(x_t, attention_{t-1})` only with input feeding.) The cell's part is
`_decoder_cells`: with its fast path, `x_t` arrives already multiplied by the
input half of the cell's kernel (`project_inputs`, once for all steps).
"""

from keras import ops


class DecoderStep:
    """The step maths of a built decoder; made once per call (or per `step()`).

    Args:
        cell_maths: `_decoder_cells.cell_maths(...)` for the decoder's cell.
        mechanisms: the decoder's attention mechanisms.
        attention_layers: one `Dense` (or None) per mechanism.
        output_attention: the decoder's `output_attention`.
    """

    def __init__(self, cell_maths, mechanisms, attention_layers, output_attention):
        self.cell_maths = cell_maths
        self.mechanisms = mechanisms
        self.attention_layers = attention_layers
        self.output_attention = output_attention

    def project_inputs(self, inputs):
        """The part of the cell's input maths that needs no state, for all steps at once."""
        return self.cell_maths.project_inputs(inputs)

    def weights(self):
        """The per-step weights, prepared once per sequence (outside the loop)."""
        return self.cell_maths.weights()

    def __call__(self, x, state, keys, memory, memory_mask, weights, training):
        """One step: `(output, alignments, new_state)`.

        `x` is `project_inputs(x_t)`, `state` the loop state of `_decoder_state`
        (cell state, attention, mechanism states), `keys` the mechanisms'
        prepared keys and `weights` the result of `weights()`.
        """
        cell_output, cell_state = self.cell_maths.step(
            x, state["cell_state"], state["attention"], weights, training
        )
        attention, alignments, attention_state = self.attend(
            cell_output, state["attention_state"], keys, memory, memory_mask, training
        )
        new_state = {
            "cell_state": cell_state,
            "attention": attention,
            "attention_state": attention_state,
        }
        return self.output(cell_output, attention), alignments, new_state

    def attend(self, cell_output, attention_state, keys, memory, memory_mask, training):
        """Every mechanism's alignments and attention: `(attention, alignments, states)`."""
        attentions, alignments, states = [], [], []
        for mechanism, layer, state, prepared in zip(
            self.mechanisms, self.attention_layers, attention_state, keys
        ):
            weights, state = mechanism.call(
                cell_output, prepared, memory, memory_mask, state, training=training
            )
            context = ops.squeeze(
                ops.matmul(ops.expand_dims(ops.cast(weights, memory.dtype), 1), memory), 1
            )
            if layer is not None:
                context = layer(ops.concatenate([cell_output, context], axis=-1))
            attentions.append(context)
            alignments.append(weights)
            states.append(state)
        attention = attentions[0] if len(attentions) == 1 else ops.concatenate(attentions, -1)
        return attention, alignments, states

    def output(self, cell_output, attention):
        """The step's output, as `output_attention` asks."""
        if self.output_attention == "both":
            return ops.concatenate([ops.cast(cell_output, attention.dtype), attention], axis=-1)
        return attention if self.output_attention else cell_output
