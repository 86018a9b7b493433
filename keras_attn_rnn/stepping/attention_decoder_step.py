"""`AttentionDecoderStep`: an `AttentionDecoder`'s generation step, as a decoder of
`DecoderStep` takes it."""

from keras import ops


class AttentionDecoderStep:
    """`initial_cache` and `step` of a built `AttentionDecoder`.

    Args:
        decoder: the `AttentionDecoder`.

    The cache is the decoder's step state (a dict, batch first); beam
    search's coverage penalty starts from its `initial_alignments`, the
    alignments before the first step (tfa's: one-hot at 0 for monotonic
    attention), where the mechanism has them. With several mechanisms the
    step reports the first one's alignments.
    """

    # the entries of the cache that no step changes (`get_initial_state`'s memory)
    fixed_entries = ("keys", "memory", "memory_mask", "initial_alignments")

    def __init__(self, decoder):
        self.decoder = decoder

    def initial_cache(self, memory, memory_mask, states):
        """The state before the first step: `memory (B, S, d_m)`, `memory_mask (B, S)` (or
        None) and the cell's initial `states` (None: zeros)."""
        cache = self.decoder.get_initial_state(memory, memory_mask=memory_mask, cell_state=states)
        initial = cache["attention_state"][0].get("alignments")
        if initial is not None:
            cache["initial_alignments"] = ops.cast(initial, "float32")
        return cache

    def step(self, inputs, cache):
        """One step on `inputs (B, d_in)`: `(output (B, d), alignments (B, S), features,
        cache)`; the features (what a pointer-generator's `p_gen` reads) are the output."""
        output, cache, alignments = self.decoder.step(inputs, cache)
        if isinstance(alignments, list):
            alignments = alignments[0]
        return output, alignments, output, cache
