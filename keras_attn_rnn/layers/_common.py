"""The attention core, mask splitting and the cell helpers shared by the layers."""

import inspect

import keras
from keras import ops, tree

from keras_attn_rnn import checks, masking


def split_masks(mask, count):
    """A Keras mask argument (None, a tensor or a list) as a list of `count` entries."""
    if mask is None:
        return [None] * count
    if isinstance(mask, (list, tuple)):
        mask = list(mask) + [None] * (count - len(mask))
        return mask[:count]
    return [mask] + [None] * (count - 1)


def split_call_masks(mask, names):
    """The `mask` of a call on list inputs: one entry (or None) per name, in order.

    A single tensor raises: it could be meant for any of the inputs (a memory
    mask taken as the inputs' mask would be silently wrong).
    """
    if mask is not None and not isinstance(mask, (list, tuple)):
        raise ValueError(
            f"mask must be a list [{', '.join(names)}] (an entry may be None): a single "
            f"tensor could be meant for any of them. Received: mask={checks.describe(mask)}"
        )
    return split_masks(mask, len(names))


def attend(
    score, query, prepared_keys, values, mask=None, normalizer=None, dropout=None, training=None
):
    """One attention read: `masked_softmax(score(query, keys)) . values`.

    Args:
        score: a built `scores.Score`.
        query: `(B, Tq, d_q)` raw query.
        prepared_keys: `score.prepare_keys(keys)`, `(B, Tv, d')`.
        values: `(B, Tv, d_v)`.
        mask: boolean, broadcastable to `(B, Tq, Tv)`.

    Returns:
        `(context (B, Tq, d_v), weights (B, Tq, Tv) float32)`.
    """
    scores = score.pairwise(score.prepare_query(query), prepared_keys)
    scores = masking.clip_to_dtype(scores, scores.dtype)
    weights = masking.masked_softmax(scores, mask, normalizer=normalizer)
    applied = dropout(weights, training=training) if dropout is not None else weights
    context = ops.matmul(ops.cast(applied, values.dtype), values)
    return context, weights


# --- cells ---------------------------------------------------------------------------


def call_has_training_arg(layer):
    """Whether `layer.call` takes `training` (the rule Keras itself applies)."""
    return "training" in inspect.signature(layer.call).parameters


def has_dropout(cell):
    """Whether `cell` (or a cell it stacks) draws dropout masks."""
    if isinstance(cell, keras.layers.StackedRNNCells):
        return any(has_dropout(inner) for inner in cell.cells)
    return bool(getattr(cell, "dropout", 0) or getattr(cell, "recurrent_dropout", 0))


def prime_dropout_masks(cell, step_input, state):
    """Creates a dropout cell's masks before a loop, as `keras.layers.RNN` does."""
    if hasattr(cell, "get_dropout_mask"):
        cell.get_dropout_mask(step_input)
        cell.get_recurrent_dropout_mask(state[0] if tree.is_nested(state) else state)
    if isinstance(cell, keras.layers.StackedRNNCells):
        for inner, inner_state in zip(cell.cells, state):
            prime_dropout_masks(inner, step_input, inner_state)
            inner_state = list(inner_state) if tree.is_nested(inner_state) else [inner_state]
            step_input, _ = inner(step_input, inner_state)


def reset_dropout_masks(cell):
    """Drops the masks `prime_dropout_masks` made: they are per call."""
    if hasattr(cell, "reset_dropout_mask"):
        cell.reset_dropout_mask()
        cell.reset_recurrent_dropout_mask()
    if isinstance(cell, keras.layers.StackedRNNCells):
        for inner in cell.cells:
            reset_dropout_masks(inner)
