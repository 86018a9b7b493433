from keras import ops

from keras_attn_rnn import checks, scores, serializable
from keras_attn_rnn.mechanisms.mechanism import Mechanism


@serializable.register
class CoverageAttention(Mechanism):
    """Additive attention with a coverage vector (See et al., 2017, pointer-generator).

    `e_i = v . tanh(W_s q + W_h k_i + w_c c_i [+ b])` with the coverage
    `c_t = sum_{tau < t} a_tau` (zeros at the first step): the score knows
    how much attention each position already received, which discourages
    attending to it again (and so repetition). The coverage loss
    `sum_t sum_i min(a_t,i, c_t,i)` is `keras_attn_rnn.losses.CoverageLoss`
    over the decoder's alignment history.

    Weights: `query_kernel (d_q, units)` (`W_s`), `key_kernel (d_m, units)`
    (`W_h`), `coverage_kernel (units,)` (`w_c`), `v (units,)`, and `b
    (units,)` with `use_bias`.

    Args:
        units: size of the hidden layer.
        use_bias: add `b` inside the tanh.
        normalizer: `"softmax"` or another name of `normalizers.names()`.

    Returns (call):
        float32 alignments `(B, S)` and the state `{"coverage"}` (the sum of
        the alignments so far, this step's included).

    Examples:
        >>> from keras_attn_rnn import AttentionDecoder
        >>> from keras_attn_rnn.mechanisms import CoverageAttention
        >>> decoder = AttentionDecoder(keras.layers.LSTMCell(8), attention=CoverageAttention(16))
        >>> x, memory = keras.random.normal((2, 5, 4)), keras.random.normal((2, 7, 6))
        >>> outputs, alignments = decoder([x, memory], return_attention_scores=True)
        >>> keras.ops.shape(outputs), keras.ops.shape(alignments)
        ((2, 5, 6), (2, 5, 7))

    Reference:
        See et al., 2017, "Get To The Point: Summarization with
        Pointer-Generator Networks"; Tu et al., 2016, "Modeling Coverage for
        Neural Machine Translation".
    """

    def __init__(
        self, units, use_bias=True, normalizer="softmax", **kwargs
    ):  # pragma: no mutate block
        checks.check_positive_int("units", units, allow_none=False)
        super().__init__(normalizer=normalizer, **kwargs)
        self.units = units
        self.use_bias = use_bias

    def build(self, query_shape, memory_shape):
        units = self.units
        scores.add_projections(self, query_shape[-1], memory_shape[-1], units)
        self.coverage_kernel = self.add_weight(
            name="coverage_kernel", shape=(units,), initializer="glorot_uniform"
        )
        self.v = self.add_weight(name="v", shape=(units,), initializer="glorot_uniform")
        if self.use_bias:
            self.b = self.add_weight(name="b", shape=(units,), initializer="zeros")

    def prepare_keys(self, memory):
        bias = self._w(self.b) if self.use_bias else None
        return scores.additive_keys(memory, self._w(self.key_kernel), bias)

    def initial_state(self, keys, memory_mask):
        return {"coverage": ops.zeros(ops.shape(keys)[:2], "float32")}

    def call(self, query, prepared_keys, memory, memory_mask, state, training=None):
        coverage = state["coverage"]
        covered = ops.expand_dims(ops.cast(coverage, self.compute_dtype), -1) * self._w(
            self.coverage_kernel
        )
        energies = scores.additive_step(
            query, self._w(self.query_kernel), prepared_keys, self._w(self.v), covered
        )
        alignments = self.normalize(energies, memory_mask)
        return alignments, {"coverage": coverage + alignments}

    def get_config(self):
        return {**super().get_config(), "units": self.units, "use_bias": self.use_bias}
