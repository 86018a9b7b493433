import keras
from keras import ops

from keras_attn_rnn import masking, scores
from keras_attn_rnn.layers import _common


@keras.saving.register_keras_serializable(package="keras_attn_rnn")
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
        normalizer: `"softmax"` or a function `(scores, axis) -> weights`.

    Call arguments:
        inputs: `[query (B, Tq, d_q), value (B, Tv, d_v)]` or
            `[query, value, key (B, Tv, d_k)]`; `key` defaults to `value`.
        mask: `[query_mask (B, Tq), value_mask (B, Tv)]`, booleans.
        training: whether dropout is active.
        return_attention_scores: also return the weights.
        use_causal_mask: query `i` only sees keys `j <= i`.

    Returns:
        context `(B, Tq, d_v)`, and the float32 weights `(B, Tq, Tv)` when
        `return_attention_scores=True`.

    Masked keys get weight exactly 0; a query whose every key is masked gets
    a zero context. Outputs at masked query positions are zero, and the
    query mask is passed on as the output mask.

    Example:

    >>> q = keras.random.normal((2, 4, 8))
    >>> v = keras.random.normal((2, 6, 8))
    >>> SequenceAttention(score="general")([q, v]).shape
    (2, 4, 8)

    Reference:
        Luong et al., 2015, "Effective Approaches to Attention-based Neural
        Machine Translation".
    """

    def __init__(
        self, score="dot", units=None, window=None, dropout=0.0, normalizer="softmax", **kwargs
    ):
        _common.check_positive_int("units", units)
        _common.check_positive_int("window", window)
        _common.check_dropout(dropout)
        scores.check_units(score, units, "query size")
        self.normalizer_fn = masking.get_normalizer(normalizer)
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
            or _common.is_shape(inputs)
            or len(inputs) not in (2, 3)
        ):
            raise ValueError(
                "SequenceAttention expects inputs=[query, value] or [query, value, key]. "
                f"Received: inputs={_common.describe(inputs)}"
            )
        query, value = inputs[0], inputs[1]
        key = inputs[2] if len(inputs) == 3 else value
        return query, value, key

    def build(self, input_shape):
        query_shape, value_shape, key_shape = self._split(input_shape)
        for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
            _common.check_rank(name, shape, 3)
        if (
            key_shape[1] is not None
            and value_shape[1] is not None
            and key_shape[1] != value_shape[1]
        ):
            raise ValueError(
                "key and value must have the same length. "
                f"Received: key_shape={tuple(key_shape)}, value_shape={tuple(value_shape)}"
            )
        self.score_layer.build_for(tuple(query_shape), tuple(key_shape))

    def key_mask(self, query_length, key_length, value_mask=None, use_causal_mask=False, offset=0):
        """The `(B or 1, Tq, Tv)` boolean mask of the keys each query may see."""
        structural = None
        if use_causal_mask:
            structural = masking.causal_mask(query_length, key_length, offset)
        if self.window is not None:
            structural = masking.combine_masks(
                structural, masking.window_mask(query_length, key_length, self.window, offset)
            )
        if structural is not None:
            structural = ops.expand_dims(structural, 0)
        if value_mask is not None:
            value_mask = ops.expand_dims(value_mask, 1)
        return masking.combine_masks(structural, value_mask)

    def _attend_full(self, query, value, key, value_mask, causal, training, want_weights):
        key_mask = self.key_mask(ops.shape(query)[1], ops.shape(key)[1], value_mask, causal)
        return _common.attend(
            self.score_layer,
            query,
            self.score_layer.prepare_keys(key),
            value,
            mask=key_mask,
            normalizer=self.normalizer_fn,
            dropout=self.dropout_layer if self.dropout else None,
            training=training,
        )

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
    ):
        query, value, key = self._split(inputs)
        query_mask, value_mask = _common.split_masks(mask, 2)
        _common.check_mask("query_mask", query_mask, tuple(query.shape[:2]))
        _common.check_mask("value_mask", value_mask, tuple(value.shape[:2]))
        attend = self._attend_local if self.window is not None else self._attend_full
        context, weights = attend(
            query, value, key, value_mask, use_causal_mask, training, return_attention_scores
        )
        if query_mask is not None:
            context = context * ops.cast(ops.expand_dims(query_mask, -1), context.dtype)
        if return_attention_scores:
            return context, weights
        return context

    def compute_mask(self, inputs, mask=None):
        return _common.split_masks(mask, 2)[0]

    def get_config(self):
        return {
            **super().get_config(),
            "score": self.score,
            "units": self.units,
            "window": self.window,
            "dropout": self.dropout,
            "normalizer": masking.serialize_normalizer(self.normalizer),
        }
