"""One step of the parts every step reads: a token's embedding and an RNN cell."""

import keras
from keras import ops, tree

from keras_attn_rnn import _keras_compat


def embed_token(layer, token):
    """One step of tokens `(B,)` embedded; an `Embedding` attaches no Keras mask."""
    token = ops.cast(token, "int32")
    if isinstance(layer, keras.layers.Embedding):
        return layer.call(token)
    return layer(token)


def cell_step(cell, inputs, states):
    """One inference step of an RNN cell: `(B, d_in)` -> `(output (B, units), states list)`."""
    output, new_states = cell(inputs, list(states), training=False)
    return output, list(new_states) if tree.is_nested(new_states) else [new_states]


def run_cell(cell, sequence, mask):
    """The cell over a `(B, T, d)` sequence: `(outputs (B, T, units), final states)`; masked
    steps (right padding) carry the states over, so the final states are the last real
    step's."""
    batch = ops.shape(sequence)[0]
    initial = [
        ops.zeros((batch, size), dtype=cell.compute_dtype) for size in tree.flatten(cell.state_size)
    ]
    _, outputs, states = _keras_compat.rnn(
        lambda x, states: cell_step(cell, x, states), sequence, initial, mask=mask
    )
    return outputs, list(states)
