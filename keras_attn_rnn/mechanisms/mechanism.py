"""The `Mechanism` base class: how a decoder step turns its query into alignments."""

import math

import keras
from keras import ops

from keras_attn_rnn import masking, normalizers


class Mechanism(keras.layers.Layer):
    """Base of the attention mechanisms of `AttentionDecoder`: a score, a normalizer and a state.

    A mechanism scores the decoder's query against the memory and normalizes
    the scores into alignments; a stateful one also carries what it must
    remember from one step to the next (the previous alignments, a coverage
    vector). The state is a dict of batch-first tensors, so beam search can
    tile and reorder it; the decoder carries it through its loop and its step
    API under `state["attention_state"]`.

    Subclasses implement:

    - `build(query_shape, memory_shape)`: the weights, named after their role;
    - `prepare_keys(memory)`: what depends on the memory only, once per
      sequence (default: the memory itself);
    - `initial_state(keys, memory_mask)`: the state before the first step
      (default: `{}`);
    - `call(query, prepared_keys, memory, memory_mask, state, training)`:
      `query (B, d_q)`, `prepared_keys` from `prepare_keys`, `memory
      (B, S, d_m)`, `memory_mask (B, S)` bool (or None), `state` a dict ->
      `(alignments (B, S) float32, next_state)`.

    Args:
        normalizer: a name of `keras_attn_rnn.normalizers.names()` or a
            function `(scores, axis) -> weights`.
    """

    def __init__(self, normalizer="softmax", **kwargs):  # pragma: no mutate block
        self.normalizer_fn = normalizers.get(normalizer)
        super().__init__(**kwargs)
        self.normalizer = normalizer

    def _w(self, variable):
        """A weight in the compute dtype (a float32 variable under mixed precision)."""
        return ops.cast(variable, self.compute_dtype)

    def prepare_keys(self, memory):
        return memory

    def initial_state(self, keys, memory_mask):
        return {}

    def normalize(self, scores, memory_mask, extra_mask=None):
        """float32 alignments `(B, S)` from scores, with exact zeros on masked keys."""
        scores = masking.clip_to_dtype(scores, scores.dtype)
        mask = masking.combine_masks(memory_mask, extra_mask)
        return masking.masked_softmax(scores, mask, normalizer=self.normalizer_fn)

    def get_config(self):
        return {**super().get_config(), "normalizer": normalizers.serialize(self.normalizer)}


def softplus_inverse(y):
    """`x` with `softplus(x) = y` (`y > 0`): a bias that starts a softplus output at `y`."""
    return y + math.log(-math.expm1(-y))
