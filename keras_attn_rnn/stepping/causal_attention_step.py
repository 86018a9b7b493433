"""`CausalAttentionStep`: a language model's decoding step with cached causal attention."""

from keras import ops

from keras_attn_rnn.stepping import _ops


class CausalAttentionStep:
    """The step API of an RNN language model that attends over its own past.

    The model computes, for tokens `(B, T)` (0 pads): `h` through each RNN
    in turn from `embedding(tokens)`, `context = attention([h, h],
    use_causal_mask=True)` and `logits = head(h, context)`. After the
    prompts ran once, each token costs one step of each cell and one cached
    attention read (keys prepared once, as keras-hub's
    `CachedMultiHeadAttention`), never a re-run of the prefix.

    Args:
        embedding: the layer that embeds token ids.
        cells: the RNN cells, in stacking order.
        attention: the causal `SequenceAttention`.
        head: `head(hidden (B, d), context (B, d_v))` -> logits `(B, V)`.

    The cache is a dict: `states` (per RNN layer), `attention` (the
    attention's cache of `(B, L, .)` prepared keys and hidden states) and
    `position` `(B,)` (where the next token goes).
    """

    def __init__(self, embedding, cells, attention, head):
        self.embedding = embedding
        self.cells = list(cells)
        self.attention = attention
        self.head = head

    def start(self, hidden, mask, states, max_length):
        """The first step, after the prompts ran through the RNNs.

        Args:
            hidden: `(B, P, d)`: the last RNN's outputs over the prompts.
            mask: `(B, P)`, True at real tokens (each prompt right-padded).
            states: each RNN's final states (the last real token's).
            max_length: the number of tokens that will be generated.

        Returns:
            logits: float32 `(B, V)`, after each prompt's last token.
            weights: float32 `(B, L)`, that position's weights over the cache
                (`L = P + max_length`).
            cache: the cache.
        """
        lengths = ops.sum(ops.cast(mask, "int32"), axis=1)
        context, weights = self.attention(
            [hidden, hidden], mask=[mask, mask], use_causal_mask=True, return_attention_scores=True
        )
        logits = self.head(last_valid(hidden, lengths), last_valid(context, lengths))
        cache = {
            "states": list(states),
            "attention": self.attention.init_cache(pad_time(hidden, max_length)),
            "position": lengths,
        }
        weights = pad_time(last_valid(weights, lengths), max_length)
        return ops.cast(logits, "float32"), weights, cache

    def next_logits(self, token, cache):
        """One token `(B,)`: `(logits (B, V) float32, weights (B, L) float32, cache)`."""
        x = _ops.embed_token(self.embedding, token)
        states = []
        for cell, layer_states in zip(self.cells, cache["states"]):
            x, layer_states = _ops.cell_step(cell, x, layer_states)
            states.append(layer_states)
        step = ops.expand_dims(x, 1)
        context, weights, attention = self.attention(
            [step, step],
            cache=cache["attention"],
            cache_update_index=cache["position"],
            use_causal_mask=True,
            return_attention_scores=True,
        )
        logits = self.head(x, ops.squeeze(context, 1))
        cache = {"states": states, "attention": attention, "position": cache["position"] + 1}
        return ops.cast(logits, "float32"), ops.squeeze(weights, 1), cache


def with_start(prompts, start_id):
    """Prompts as int32 `(B, P)`, with `start_id` prepended to each row when it is set."""
    prompts = ops.cast(prompts, "int32")
    if start_id is None:
        return prompts
    start = ops.full((ops.shape(prompts)[0], 1), start_id, dtype="int32")
    return ops.concatenate([start, prompts], axis=1)


def last_valid(sequence, lengths):
    """`sequence[b, lengths[b] - 1]` for a `(B, T, ...)` tensor."""
    index = ops.reshape(ops.cast(lengths, "int32") - 1, (-1,) + (1,) * (len(sequence.shape) - 1))
    return ops.squeeze(ops.take_along_axis(sequence, index, axis=1), 1)


def pad_time(sequence, extra):
    """Pads a `(B, T, ...)` tensor with `extra` zero steps at the end of axis 1."""
    if extra == 0:
        return sequence
    widths = [(0, 0)] * len(sequence.shape)
    widths[1] = (0, extra)
    return ops.pad(sequence, widths)
