"""`DecoderStep`: an encoder-decoder's generation step."""

from typing import NamedTuple

from keras import ops

from keras_attn_rnn.samplers import beam_sampler
from keras_attn_rnn.stepping import _ops


class DecoderStepOutputs(NamedTuple):
    """What one decoder step gives the head.

    Attributes:
        inputs: the embedded token `(B, e)`.
        output: the decoder's output `(B, d)`.
        alignments: `(B, S)` over the memory.
        features: what a pointer-generator's `p_gen` reads beside the inputs
            (`[s_t; c_t]`).
        cache: the new cache.
    """

    inputs: object
    output: object
    alignments: object
    features: object
    cache: object


class DecoderStep:
    """The step API of an encoder-decoder, from the encoder's outputs on.

    Each token: `y = embedding(token)`, one decoder step on `y`, `logits =
    head(outputs)`.

    Args:
        embedding: the layer that embeds target ids.
        decoder: an object with `initial_cache(memory, memory_mask, states)`
            (the cache before the first step) and `step(y, cache)` ->
            `(output, alignments, features, cache)`: an
            `AttentionDecoderStep`, or `Seq2Seq`'s Luong arrangement.
        head: `head(outputs)` -> logits `(B, V)` from a
            `DecoderStepOutputs`.
        token_ids: optional: maps the generated ids `(B,)` to the ids the
            embedding reads.
        fixed_entries: the names of the entries `start` may add for the head
            to read (no step changes them).

    The decoder may name, in `fixed_entries`, the entries of its cache that
    no step changes (its memory); beam search then leaves them, the same
    for every beam of a source, where they are (`reorder_cache`).
    """

    def __init__(self, embedding, decoder, head, token_ids=None, fixed_entries=()):
        self.embedding = embedding
        self.decoder = decoder
        self.head = head
        self.token_ids = token_ids
        self.fixed_entries = (*getattr(decoder, "fixed_entries", ()), *fixed_entries)

    def start(self, memory, memory_mask, states, start_id, entries=None):
        """The first step, on `start_id`, from the encoder's `memory (B, S, d_m)`, its mask
        and the decoder's initial `states`; `entries` (a dict) are added to the cache, for
        the head to read. Returns what `next_logits` does."""
        cache = {**self.decoder.initial_cache(memory, memory_mask, states), **(entries or {})}
        start = ops.full((ops.shape(memory)[0],), start_id, dtype="int32")
        return self.next_logits(start, cache)

    def next_logits(self, token, cache):
        """One step on `token` `(B,)`: `(logits (B, V) float32, alignments (B, S), cache)`."""
        if self.token_ids is not None:
            token = self.token_ids(token)
        y = _ops.embed_token(self.embedding, token)
        output, alignments, features, cache = self.decoder.step(y, cache)
        logits = self.head(DecoderStepOutputs(y, output, alignments, features, cache))
        return ops.cast(logits, "float32"), alignments, cache

    def reorder_cache(self, cache, parents):
        """Beam search's reorder (`parents` int `(B, W)`): the entries a step changes are
        gathered; the fixed ones, the same for every beam of a source, are kept as they
        are (copying the memory and its keys cost 13-21 % of a translator's beam search,
        docs/results/benchmarks.md)."""
        fixed = {name: cache[name] for name in self.fixed_entries if name in cache}
        changing = {name: entry for name, entry in cache.items() if name not in fixed}
        return {**beam_sampler.gather_beams(changing, parents), **fixed}
