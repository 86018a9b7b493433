import keras
import numpy as np
from keras import ops

from keras_attn_rnn import checks, masking, normalizers, scores, serializable
from keras_attn_rnn.layers import _common

QUERY_SOURCES = ("learned", "fixed", "external")


@serializable.register
class AttentionPooling(keras.layers.Layer):
    """Attention pooling: a weighted sum of RNN states under one query.

    With the default `score="tanh_dot"` this is
    `s_t = tanh(W h_t + b)`, `a = softmax_t(s_t . e)`, `y = sum_t a_t h_t`.
    Any score of `keras_attn_rnn.scores` can replace it.

    Args:
        score: a score name (`"dot"`, `"scaled_dot"`, `"general"`,
            `"additive"`, `"tanh_dot"`) or a `scores.Score` instance.
        units: size of the learned query `e` (default: the state size); for
            `score="additive"`, also its hidden size.
        query: where `e` comes from: `"learned"` (a trainable weight named
            `query`), `"fixed"` (the constant `query_value`, never trained) or
            `"external"` (given at call time, e.g. a decoder state).
        query_value: the constant query for `query="fixed"`, a 1-D sequence.
        dropout: dropout rate on the attention weights.
        normalizer: `"softmax"`, `"hardmax"`, `"sparsemax"`, `"entmax15"` or a
            function `(scores, axis) -> weights`.

    Call arguments:
        - inputs: `sequence` `(B, T, D)`, or `[sequence, query]` with query
              `(B, d_q)` when `query="external"`.
        - mask: boolean `(B, T)` mask of the sequence (or `[mask, None]`).
        - training: whether dropout is active.
        - return_attention_scores: also return the weights.

    Returns:
        pooled: `(B, D)`.
        weights: float32 `(B, T)`, only when `return_attention_scores=True`.

    Masked positions get weight exactly 0; a sequence with every position
    masked pools to zeros. Keras masks (from `Embedding(mask_zero=True)`)
    flow in; the pooled output carries no mask.

    Examples:
        >>> from keras_attn_rnn import AttentionPooling
        >>> x = keras.random.normal((2, 7, 16))
        >>> keras.ops.shape(AttentionPooling()(x))
        (2, 16)

    Reference:
        Yang et al., 2016, "Hierarchical Attention Networks for Document
        Classification".
    """

    def __init__(
        self,
        score="tanh_dot",
        units=None,
        query="learned",
        query_value=None,
        dropout=0.0,
        normalizer="softmax",
        **kwargs,
    ):
        scores.check(score)
        checks.check_positive_int("units", units)
        if query not in QUERY_SOURCES:
            raise ValueError(
                f"query must be one of 'learned', 'fixed', 'external'. Received: query={query!r}"
            )
        if query == "fixed":
            query_value = self._check_query_value(query_value, units)
        elif query_value is not None:
            raise ValueError(
                f"query_value is only used with query='fixed'. Received: query={query!r}, "
                f"query_value={query_value!r}"
            )
        checks.check_dropout(dropout)
        self.normalizer_fn = normalizers.get(normalizer)
        super().__init__(**kwargs)
        self.score = scores.serialize(score)  # config form; the layer is score_layer
        self.units = units
        self.query = query
        self.query_value = query_value
        self.dropout = dropout
        self.normalizer = normalizer
        self.score_layer = scores.get(score, units=units, dtype=self.dtype_policy, name="score")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.supports_masking = True

    @staticmethod
    def _check_query_value(query_value, units):
        if query_value is None:
            raise ValueError(
                "query='fixed' needs query_value, a 1-D sequence of floats. "
                "Received: query_value=None"
            )
        value = np.asarray(query_value, dtype="float64")
        if value.ndim != 1 or value.size == 0 or not np.all(np.isfinite(value)):
            raise ValueError(
                "query_value must be a non-empty 1-D sequence of finite floats. "
                f"Received: query_value={query_value!r}"
            )
        if units is not None and value.size != units:
            raise ValueError(
                f"query_value must have `units`={units} entries. "
                f"Received: query_value with {value.size} entries"
            )
        return [float(v) for v in value]

    def _split(self, inputs):
        external = self.query == "external"
        is_pair = isinstance(inputs, (list, tuple)) and not checks.is_shape(inputs)
        if external and not (is_pair and len(inputs) == 2):
            raise ValueError(
                "query='external' expects inputs=[sequence, query]. "
                f"Received: inputs={checks.describe(inputs)}"
            )
        if not external and is_pair:
            raise ValueError(
                f"query={self.query!r} expects a single sequence input; pass the query only "
                f"with query='external'. Received: inputs={checks.describe(inputs)}"
            )
        return (inputs[0], inputs[1]) if external else (inputs, None)

    def build(self, input_shape):
        sequence_shape, query_shape = self._split(input_shape)
        checks.check_rank("sequence", sequence_shape, 3)
        dim = sequence_shape[-1]
        if self.query == "external":
            checks.check_rank("query", query_shape, 2)
            query_dim = query_shape[-1]
        elif self.query == "fixed":
            query_dim = len(self.query_value)
        else:
            query_dim = self.units or dim
        self.score_layer.build_for((None, 1, query_dim), tuple(sequence_shape))
        if self.query == "learned":
            self.query_vector = self.add_weight(
                name="query", shape=(query_dim,), initializer="glorot_uniform"
            )
        elif self.query == "fixed":
            self.query_vector = self.add_weight(
                name="query",
                shape=(query_dim,),
                initializer=keras.initializers.Constant(self.query_value),
                trainable=False,
            )

    def call(self, inputs, mask=None, training=None, return_attention_scores=False):
        sequence, query = self._split(inputs)
        sequence_mask = _common.split_masks(mask, 2)[0]
        checks.check_mask("mask", sequence_mask, tuple(sequence.shape[:2]))
        sequence = masking.zero_masked(sequence, sequence_mask)
        if query is None:
            query = ops.reshape(ops.cast(self.query_vector, self.compute_dtype), (1, 1, -1))
        else:
            query = ops.expand_dims(query, 1)
        keys = self.score_layer.prepare_keys(sequence)
        key_mask = None if sequence_mask is None else ops.expand_dims(sequence_mask, 1)
        context, weights = _common.attend(
            self.score_layer,
            query,
            keys,
            sequence,
            mask=key_mask,
            normalizer=self.normalizer_fn,
            dropout=self.dropout_layer if self.dropout else None,
            training=training,
        )
        context = ops.squeeze(context, 1)
        if return_attention_scores:
            return context, ops.squeeze(weights, 1)
        return context

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        return {
            **super().get_config(),
            "score": self.score,
            "units": self.units,
            "query": self.query,
            "query_value": self.query_value,
            "dropout": self.dropout,
            "normalizer": normalizers.serialize(self.normalizer),
        }
