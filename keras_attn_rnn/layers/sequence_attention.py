import keras
from keras import ops

from keras_attn_rnn import checks, masking, normalizers, scores, serializable
from keras_attn_rnn.layers import _common


@serializable.register
class SequenceAttention(keras.layers.Layer):
    """Attention of every query position over a sequence, with any score.

    Follows the calling convention of `keras.layers.Attention`. Used for
    Luong-style attention after a decoder RNN (parallel over time in
    training) and for causal self-attention over RNN outputs.

    Args:
        score: a score name (`"dot"`, `"scaled_dot"`, `"general"`,
            `"additive"`, `"tanh_dot"`) or a `scores.Score` instance.
        units: hidden size of `score="additive"` (default: the key size);
            other scores project to the query size and take no `units`.
        window: if set, each query `i` only sees keys `j` with
            `|i - j| <= window` (local attention; with the causal mask,
            `i - window <= j <= i`).
        dropout: dropout rate on the attention weights.
        normalizer: `"softmax"`, `"hardmax"`, `"sparsemax"`, `"entmax15"` or a
            function `(scores, axis) -> weights`.

    Call arguments:
        - inputs: `[query (B, Tq, d_q), value (B, Tv, d_v)]` or
              `[query, value, key (B, Tv, d_k)]`; `key` defaults to `value`.
        - mask: `[query_mask (B, Tq), value_mask (B, Tv)]`, booleans.
        - training: whether dropout is active.
        - return_attention_scores: also return the weights.
        - use_causal_mask: query `i` only sees keys `j <= i`.
        - cache: the decoding cache from `init_cache(value, key)`: a dict of
              the prepared keys `(B, L, d')` and the values `(B, L, d_v)`, or
              of the values alone when they are the keys.
              With a cache, `inputs` is the query alone (the cache is read as
              is) or, with `cache_update_index`, `[query, value(, key)]` of the
              new positions.
        - cache_update_index: where the new positions' keys and values are
              written into the cache: an int, or a `(B,)` tensor (one position
              per row); it is also the absolute position of the first query
              for the causal and window masks. The new positions must lie
              inside the cache (an int that puts them past it is refused).
        - inputs_mask: the same as `mask`; Keras fills it from the inputs'
              masks when a `cache` is passed too (`mask` wins).

    Returns:
        context: `(B, Tq, d_v)`.
        weights: float32 `(B, Tq, Tv)`, only when `return_attention_scores=True`.
        cache: the updated cache, last, only when called with a `cache`.

    Masked keys get weight exactly 0; a query whose every key is masked gets
    a zero context. Outputs at masked query positions are zero, and the
    query mask is passed on as the output mask.

    Cached decoding (after keras-hub's `CachedMultiHeadAttention`): keys are
    projected once, when written into the cache; each step attends over the
    cache (`value_mask` then masks cache positions) and returns it updated.

    Examples:
        >>> from keras_attn_rnn import SequenceAttention
        >>> q = keras.random.normal((2, 4, 8))
        >>> v = keras.random.normal((2, 6, 8))
        >>> keras.ops.shape(SequenceAttention(score="general")([q, v]))
        (2, 4, 8)

        Causal self-attention, one new position at a time:

        >>> layer = SequenceAttention(score="dot")
        >>> h = keras.random.normal((2, 5, 8))
        >>> full = layer([h, h], use_causal_mask=True)
        >>> cache = layer.init_cache(keras.ops.zeros((2, 5, 8)))
        >>> for t in range(5):
        ...     h_t = h[:, t : t + 1]
        ...     out, cache = layer([h_t, h_t], cache=cache, cache_update_index=t,
        ...                        use_causal_mask=True)
        >>> keras.ops.shape(out)
        (2, 1, 8)
        >>> bool(keras.ops.all(keras.ops.isclose(out[:, 0], full[:, -1], atol=1e-5)))
        True

    Reference:
        Luong et al., 2015, "Effective Approaches to Attention-based Neural
        Machine Translation".
    """

    def __init__(
        self, score="dot", units=None, window=None, dropout=0.0, normalizer="softmax", **kwargs
    ):
        checks.check_positive_int("units", units)
        checks.check_positive_int("window", window)
        checks.check_dropout(dropout)
        scores.check_units(score, units, "query size")
        self.normalizer_fn = normalizers.get(normalizer)
        super().__init__(**kwargs)
        self.score = scores.serialize(score)  # config form; the layer is score_layer
        self.units = units
        self.window = window
        self.dropout = dropout
        self.normalizer = normalizer
        self.score_layer = scores.get(score, units=units, dtype=self.dtype_policy, name="score")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.supports_masking = True

    @staticmethod
    def _split(inputs):
        if (
            not isinstance(inputs, (list, tuple))
            or checks.is_shape(inputs)
            or len(inputs) not in (2, 3)
        ):
            raise ValueError(
                "SequenceAttention expects inputs=[query, value] or [query, value, key]. "
                f"Received: inputs={checks.describe(inputs)}"
            )
        query, value = inputs[0], inputs[1]
        key = inputs[2] if len(inputs) == 3 else value
        return query, value, key

    def build(self, input_shape):
        query_shape, value_shape, key_shape = self._split(input_shape)
        for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
            checks.check_rank(name, shape, 3)
        if (
            key_shape[1] is not None
            and value_shape[1] is not None
            and key_shape[1] != value_shape[1]
        ):
            raise ValueError(
                "key and value must have the same length. "
                f"Received: key_shape={tuple(key_shape)}, value_shape={tuple(value_shape)}"
            )
        self._check_batch(query_shape, value_shape, key_shape)
        self.score_layer.build_for(tuple(query_shape), tuple(key_shape))

    @staticmethod
    def _check_batch(query_shape, value_shape, key_shape):
        shapes = {"query": query_shape, "value": value_shape, "key": key_shape}
        known = {name: shape[0] for name, shape in shapes.items() if shape[0] is not None}
        if len(set(known.values())) > 1:
            received = ", ".join(f"{name}.shape={tuple(shapes[name])}" for name in known)
            raise ValueError(
                f"query, value and key must have the same batch size. Received: {received}"
            )

    def key_mask(self, query_length, key_length, value_mask=None, use_causal_mask=False, offset=0):
        """The `(B or 1, Tq, Tv)` boolean mask of the keys each query may see.

        `offset` is the absolute position of the first query: an int or `(B,)`.
        """
        structural = None
        if use_causal_mask:
            structural = masking.causal_mask(query_length, key_length, offset)
        if self.window is not None:
            structural = masking.combine_masks(
                structural, masking.window_mask(query_length, key_length, self.window, offset)
            )
        if structural is not None and len(structural.shape) == 2:
            structural = ops.expand_dims(structural, 0)
        if value_mask is not None:
            value_mask = ops.expand_dims(value_mask, 1)
        return masking.combine_masks(structural, value_mask)

    def _attend(self, query, keys, values, key_mask, training):
        """`_common.attend` with this layer's score, normalizer and dropout."""
        return _common.attend(
            self.score_layer,
            query,
            keys,
            values,
            mask=key_mask,
            normalizer=self.normalizer_fn,
            dropout=self.dropout_layer if self.dropout else None,
            training=training,
        )

    def _attend_full(self, query, value, key, value_mask, causal, training, want_weights):
        key_mask = self.key_mask(ops.shape(query)[1], ops.shape(key)[1], value_mask, causal)
        return self._attend(query, self.score_layer.prepare_keys(key), value, key_mask, training)

    def _attend_local(self, query, value, key, value_mask, causal, training, want_weights):
        """Local attention in `O(Tq * window)` time and memory: each query gathers its
        band of `2 * window + 1` keys (`window + 1` when causal) instead of scoring all."""
        query_length, key_length = ops.shape(query)[1], ops.shape(key)[1]
        offsets = ops.arange(-self.window, 1 if causal else self.window + 1)
        positions = ops.expand_dims(ops.arange(query_length), 1) + offsets  # (Tq, W)
        valid = ops.logical_and(positions >= 0, positions < key_length)
        positions = ops.clip(positions, 0, key_length - 1)
        band = ops.expand_dims(valid, 0)
        if value_mask is not None:
            band = ops.logical_and(band, ops.take(ops.cast(value_mask, "bool"), positions, axis=1))
        keys = ops.take(self.score_layer.prepare_keys(key), positions, axis=1)  # (B,Tq,W,d)
        values = ops.take(value, positions, axis=1)
        prepared_query = self.score_layer.prepare_query(query)
        batch, width = ops.shape(query)[0], ops.shape(offsets)[0]
        flat_scores = self.score_layer.pairwise(
            ops.reshape(prepared_query, (-1, 1, ops.shape(prepared_query)[-1])),
            ops.reshape(keys, (-1, width, ops.shape(keys)[-1])),
        )
        scores = ops.reshape(flat_scores, (batch, query_length, width))
        scores = masking.clip_to_dtype(scores, scores.dtype)
        weights = masking.masked_softmax(scores, band, normalizer=self.normalizer_fn)
        applied = self.dropout_layer(weights, training=training) if self.dropout else weights
        context = ops.squeeze(
            ops.matmul(ops.expand_dims(ops.cast(applied, values.dtype), 2), values), 2
        )
        if not want_weights:
            return context, None
        # Scatter the band back to `(B, Tq, Tv)` for inspection only.
        one_hot = ops.one_hot(positions, key_length) * ops.expand_dims(
            ops.cast(valid, "float32"), -1
        )
        return context, ops.einsum("bqw,qwv->bqv", weights, one_hot)

    def call(
        self,
        inputs,
        mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
        inputs_mask=None,
    ):
        # Keras fills `inputs_mask` instead of `mask` when a cache is a second tensor argument.
        if mask is None:
            mask = inputs_mask
        if cache is not None:
            return self._call_cached(
                inputs,
                mask,
                cache,
                cache_update_index,
                use_causal_mask,
                return_attention_scores,
                training,
            )
        query, value, key = self._split(inputs)
        self._check_batch(query.shape, value.shape, key.shape)
        query_mask, value_mask = _common.split_call_masks(mask, ("query_mask", "value_mask"))
        checks.check_mask("query_mask", query_mask, tuple(query.shape[:2]))
        checks.check_mask("value_mask", value_mask, tuple(value.shape[:2]))
        masked_value = masking.zero_masked(value, value_mask)
        key = masked_value if key is value else masking.zero_masked(key, value_mask)
        value = masked_value
        attend = self._attend_local if self.window is not None else self._attend_full
        context, weights = attend(
            query, value, key, value_mask, use_causal_mask, training, return_attention_scores
        )
        if query_mask is not None:
            context = context * ops.cast(ops.expand_dims(query_mask, -1), context.dtype)
        if return_attention_scores:
            return context, weights
        return context

    # ----------------------------------------------------------- cached decoding

    def init_cache(self, value, key=None):
        """The decoding cache of a built layer: `{"keys": prepared keys, "values": value}`.

        When the keys are the values (`key` omitted and a score whose
        `prepare_keys` is the identity: `"dot"`, `"scaled_dot"`), the cache is
        `{"values": value}`, read as the keys too: half the memory, and half
        the copying per decoding step (a write, a beam-search reorder).

        Args:
            value: `(B, L, d_v)`: the memory to read (e.g. the encoder outputs),
                or zeros of the cache's full length to be filled step by step.
            key: `(B, L, d_k)`, defaults to `value`.
        """
        if not self.built:
            raise ValueError(
                "init_cache() needs a built SequenceAttention: call it once on "
                f"[query, value] first. Received: a layer with built={self.built}"
            )
        if key is None and not self.score_layer.transforms_keys:
            return {"values": value}
        key = value if key is None else key
        return {"keys": self.score_layer.prepare_keys(key), "values": value}

    def _call_cached(self, inputs, mask, cache, index, causal, return_attention_scores, training):
        shared = self._check_cache(cache)
        values = cache["values"]
        keys = values if shared else cache["keys"]
        if index is None:
            if causal:
                raise ValueError(
                    "use_causal_mask with a cache needs cache_update_index, the position "
                    "of the query. Received: cache_update_index=None"
                )
            query = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
            offset = 0
        else:
            query, value, key = self._split(inputs)
            if shared and len(inputs) == 3:
                raise ValueError(
                    "This cache holds the values alone (they are the keys): pass "
                    "[query, value] without a key, or build the cache with "
                    "init_cache(value, key). Received: inputs=[query, value, key]"
                )
            _check_index_fits(index, ops.shape(value)[1], ops.shape(values)[1])
            offset = index
            values = _write(values, value, index)
            keys = values if shared else _write(keys, self.score_layer.prepare_keys(key), index)
        checks.check_rank("query", query.shape, 3)
        self._check_batch(query.shape, values.shape, keys.shape)
        query_mask, value_mask = _common.split_masks(mask, 2)
        key_mask = self.key_mask(
            ops.shape(query)[1], ops.shape(keys)[1], value_mask, causal, offset
        )
        context, weights = self._attend(query, keys, values, key_mask, training)
        if query_mask is not None:
            context = context * ops.cast(ops.expand_dims(query_mask, -1), context.dtype)
        cache = {"values": values} if shared else {"keys": keys, "values": values}
        if return_attention_scores:
            return context, weights, cache
        return context, cache

    def _check_cache(self, cache):
        """Whether `cache` holds the values alone (shared as keys); raises if it is no cache."""
        layouts = [{"keys", "values"}]
        if not self.score_layer.transforms_keys:
            layouts.append({"values"})
        if not isinstance(cache, dict) or set(cache) not in layouts:
            expected = " or ".join(str(sorted(layout)) for layout in layouts)
            raise ValueError(
                f"cache must be the dict that init_cache() returns, with {expected}. "
                f"Received: cache={checks.describe(cache)}"
            )
        return "keys" not in cache

    def compute_mask(self, inputs, mask=None):
        return _common.split_masks(mask, 2)[0]

    def get_config(self):
        return {
            **super().get_config(),
            "score": self.score,
            "units": self.units,
            "window": self.window,
            "dropout": self.dropout,
            "normalizer": normalizers.serialize(self.normalizer),
        }


def _check_index_fits(index, steps, length):
    """Raises when a Python int `cache_update_index` puts the `steps` new positions past
    the cache's `length` (a tensor index is the caller's to keep in range)."""
    if not isinstance(index, int) or not isinstance(length, int):
        return
    if isinstance(steps, int) and not 0 <= index <= length - steps:
        raise ValueError(
            f"cache_update_index must place the {steps} new position(s) inside the cache of "
            f"{length} positions: an int in [0, {length - steps}]. "
            f"Received: cache_update_index={index}"
        )


def _write(cache, update, index):
    """`cache` `(B, L, d)` with `update` `(B, T, d)` written at positions `index + t`.

    `index` is an int or a `(B,)` tensor (a position per row), each write
    inside the cache. A decoding step (`T == 1`) is a scatter of its `B`
    rows: on TensorFlow it writes into the cache's buffer where nothing else
    holds it (a beam search's freshly reordered cache) instead of rewriting
    all `B * L * d` entries (on TensorFlow such a `where` took 16-23 % of a
    beam search's time and 4-21 % of greedy decoding's, docs/results/benchmarks.md).
    Longer updates are one `where` over the cache, each update gathered to the
    positions it lands on.
    """
    batch, length, steps = ops.shape(cache)[0], ops.shape(cache)[1], ops.shape(update)[1]
    index = ops.broadcast_to(ops.reshape(ops.cast(index, "int32"), (-1, 1)), (batch, 1))
    update = ops.cast(update, cache.dtype)
    if isinstance(steps, int) and steps == 1:
        rows = ops.expand_dims(ops.arange(batch, dtype="int32"), 1)
        return ops.scatter_update(cache, ops.concatenate([rows, index], axis=1), update[:, 0])
    offset = ops.arange(length, dtype="int32")[None, :] - index  # (B, L): position - index
    hit = ops.logical_and(ops.greater_equal(offset, 0), ops.less(offset, steps))
    source = ops.expand_dims(ops.clip(offset, 0, steps - 1), -1)
    source = ops.broadcast_to(source, (batch, length, ops.shape(update)[2]))
    written = ops.take_along_axis(update, source, axis=1)
    return ops.where(ops.expand_dims(hit, -1), written, cache)
