"""The state `AttentionDecoder` carries from step to step, and how padding keeps it.

The loop state is a dict of tensors, batch first: `"cell_state"` (a list
shaped as the cell's `state_size`), `"attention"` `(B, d_att)` (the last
step's attention; zeros before the first step) and `"attention_state"` (one
dict per mechanism). The step API's state adds what every step reads and
none changes: `"keys"` (each mechanism's prepared keys), `"memory"` and
`"memory_mask"`.

At a padded input step a row keeps its state, as in `keras.layers.RNN`: its
output and alignments are zero and the last output is the one of its last
real step. The decoder keeps the state of padded rows at each step
(`keep_padded_rows`) and zeroes their outputs and alignments after the loop,
once for all steps.
"""

from keras import ops, tree


def zero_cell_state(cell, batch_size):
    """The cell's own initial state (zeros for Keras's cells), as a list."""
    get_initial_state = getattr(cell, "get_initial_state", None)
    if get_initial_state is not None:
        state = get_initial_state(batch_size=batch_size)
    else:
        state = [
            ops.zeros((batch_size, d), dtype=cell.compute_dtype)
            for d in tree.flatten(cell.state_size)
        ]
    return list(state) if tree.is_nested(state) else [state]


def cell_initial_state(cell, batch_size, cell_state=None):
    """`cell_state` (e.g. an encoder's `[h, c]`) checked against the cell's `state_size` and
    packed as its zero state, or that zero state when None."""
    default = zero_cell_state(cell, batch_size)
    if cell_state is None:
        return default
    flat = tree.flatten(cell_state)
    sizes = tree.flatten(cell.state_size)
    shapes = [tuple(s.shape) for s in flat]
    if len(flat) != len(sizes) or any(len(s) != 2 or s[-1] != d for s, d in zip(shapes, sizes)):
        raise ValueError(
            f"initial_state must match the cell's state_size {list(sizes)}: "
            f"{len(sizes)} tensor(s) of shape (batch, size). "
            f"Received: initial_state with shapes {shapes}"
        )
    flat = [ops.cast(s, cell.compute_dtype) for s in flat]
    return tree.pack_sequence_as(default, flat)


def initial_state(cell, mechanisms, attention_size, dtype, memory, memory_mask, cell_state):
    """The loop state before the first step, and the prepared keys every step reads.

    Returns `(state, keys)`: `state` as in the module docstring, `keys` one entry per
    mechanism (`mechanism.prepare_keys(memory)`, computed once per sequence).
    """
    batch_size = ops.shape(memory)[0]
    keys = [mechanism.prepare_keys(memory) for mechanism in mechanisms]
    state = {
        "cell_state": cell_initial_state(cell, batch_size, cell_state),
        "attention": ops.zeros((batch_size, attention_size), dtype=dtype),
        "attention_state": [
            mechanism.initial_state(k, memory_mask) for mechanism, k in zip(mechanisms, keys)
        ],
    }
    return state, keys


def per_row(keep, like):
    """A `(B, 1)` condition shaped to select whole rows of `like` (any rank)."""
    if len(like.shape) == 2:
        return keep
    return ops.reshape(keep, (-1,) + (1,) * (len(like.shape) - 1))


def keep_padded_rows(real, new_state, state):
    """`new_state` with the rows where `real` `(B, 1)` is False taken from `state`: a padded
    input step carries a row's state over, as in `keras.layers.RNN`."""
    return tree.map_structure(
        lambda new, old: ops.where(per_row(real, new), new, old), new_state, state
    )
