from keras import ops

from keras_attn_rnn import checks, scores, serializable
from keras_attn_rnn.mechanisms.mechanism import Mechanism


@serializable.register
class LocalPredictiveAttention(Mechanism):
    """Luong's local-p attention: a predicted centre and a Gaussian window around it.

    Each step predicts where to look, `p_t = start + L * sigmoid(v_p .
    tanh(W_p q))` (`start` each row's first unmasked position, `L` its true
    memory length), attends with `score` to the positions within `window` of
    `p_t` only, and multiplies those weights by `exp(-(s - p_t)^2 / (2
    (window / 2)^2))`. Weights outside the window are exactly 0, and the
    weights sum to at most 1.

    The memory may be padded on either side: `start` and `L` are read from
    the mask, so a left-padded row attends like the right-padded one, shifted.
    With a mask that has holes, `p_t` ranges over the span from the first to
    the last unmasked position, and the masked positions inside it get
    weight 0. Without a mask, `start = 0` and `L` is the memory length.

    Weights: the score's, `position_kernel (d_q, position_units)` (`W_p`)
    and `position_v (position_units,)` (`v_p`).

    Args:
        score: a score name or a `scores.Score` instance (Luong used
            `"general"`).
        window: the half-width `D` of the window, a positive int.
        units: hidden size of `score="additive"`.
        position_units: size of the position predictor (default: the query
            size).
        normalizer: `"softmax"` or another name of `normalizers.names()`.

    Returns (call):
        float32 alignments `(B, S)` and `{}`.

    Examples:
        >>> from keras_attn_rnn import AttentionDecoder
        >>> from keras_attn_rnn.mechanisms import LocalPredictiveAttention
        >>> decoder = AttentionDecoder(
        ...     keras.layers.LSTMCell(8), attention=LocalPredictiveAttention("general", window=3))
        >>> x, memory = keras.random.normal((2, 5, 4)), keras.random.normal((2, 7, 6))
        >>> outputs, alignments = decoder([x, memory], return_attention_scores=True)
        >>> keras.ops.shape(outputs), keras.ops.shape(alignments)
        ((2, 5, 6), (2, 5, 7))

    Reference:
        Luong et al., 2015, "Effective Approaches to Attention-based Neural
        Machine Translation", section 3.2.
    """

    def __init__(
        self,
        score="general",
        window=10,
        units=None,
        position_units=None,
        normalizer="softmax",
        **kwargs,
    ):  # pragma: no mutate block
        scores.check_units(score, units, "query size")
        checks.check_positive_int("window", window, allow_none=False)
        checks.check_positive_int("position_units", position_units)
        super().__init__(normalizer=normalizer, **kwargs)
        self.score = scores.serialize(score)
        self.window = window
        self.units = units
        self.position_units = position_units
        self.score_layer = scores.role_named(score, units=units, dtype=self.dtype_policy)

    def build(self, query_shape, memory_shape):
        self.score_layer.build_for((None, 1, query_shape[-1]), tuple(memory_shape))
        size = self.position_units or query_shape[-1]
        self.position_kernel = self.add_weight(
            name="position_kernel", shape=(query_shape[-1], size), initializer="glorot_uniform"
        )
        self.position_v = self.add_weight(
            name="position_v", shape=(size,), initializer="glorot_uniform"
        )

    def prepare_keys(self, memory):
        return self.score_layer.prepare_keys(memory)

    def position(self, query, memory_mask, length):
        """The predicted centre `p_t` `(B,)` float32, in `[start, start + L]`."""
        projected = ops.matmul(query, self._w(self.position_kernel))
        gate = ops.sigmoid(
            ops.cast(scores.additive_energy(self._w(self.position_v), projected), "float32")
        )
        if memory_mask is None:
            return ops.cast(length, "float32") * gate
        start, lengths = unmasked_span(memory_mask)
        return start + lengths * gate

    def call(self, query, prepared_keys, memory, memory_mask, state, training=None):
        length = ops.shape(prepared_keys)[1]
        centre = ops.expand_dims(self.position(query, memory_mask, length), -1)  # (B, 1)
        distance = ops.cast(ops.arange(length), "float32")[None, :] - centre  # (B, S)
        inside = ops.less_equal(ops.abs(distance), float(self.window))
        raw = self.score_layer.score_step(query, prepared_keys)
        weights = self.normalize(raw, memory_mask, inside)
        sigma = self.window / 2.0
        return weights * ops.exp(-ops.square(distance) / (2.0 * sigma * sigma)), {}

    def get_config(self):
        return {
            **super().get_config(),
            "score": self.score,
            "window": self.window,
            "units": self.units,
            "position_units": self.position_units,
        }


def unmasked_span(memory_mask):
    """Each row's first unmasked position and the length of the span up to its last one.

    `memory_mask (B, S)` -> float32 `start (B,)` and `length (B,)`; a row
    with no unmasked position gets `(0, 0)`. For a contiguous mask (padding
    on either side) `length` is the number of unmasked positions.
    """
    valid = ops.cast(memory_mask, "int32")
    size = ops.shape(valid)[-1]
    start = ops.argmax(valid, axis=-1)  # the first maximum: the first unmasked position
    end = size - ops.argmax(ops.flip(valid, axis=-1), axis=-1)  # one past the last
    any_valid = ops.cast(ops.any(ops.cast(valid, "bool"), axis=-1), "float32")
    start = ops.cast(start, "float32") * any_valid
    return start, (ops.cast(end, "float32") - start) * any_valid
