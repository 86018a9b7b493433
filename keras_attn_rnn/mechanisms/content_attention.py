from keras_attn_rnn import scores, serializable
from keras_attn_rnn.mechanisms.mechanism import Mechanism


@serializable.register
class ContentAttention(Mechanism):
    """Content-based attention: `a = normalizer(score(query, keys))`, no state.

    What `AttentionDecoder(score=...)` builds: `ContentAttention("additive",
    units)` is tfa's `BahdanauAttention`, `ContentAttention("general")` its
    `LuongAttention`, and with `normalizer="hardmax"` its
    `LuongAttention(probability_fn="hardmax")`.

    Args:
        score: a score name (`"dot"`, `"scaled_dot"`, `"general"`,
            `"additive"`, `"tanh_dot"`) or a `scores.Score` instance (an
            unbuilt one is copied under the name `score`).
        units: hidden size of `score="additive"` (default: the memory size).
        normalizer: `"softmax"`, `"hardmax"`, `"sparsemax"`, `"entmax15"` or
            a function `(scores, axis) -> weights`.

    Call arguments:
        - query: `(B, d_q)`, the decoder's cell output.
        - prepared_keys: `prepare_keys(memory)`.
        - memory: `(B, S, d_m)`.
        - memory_mask: `(B, S)` bool, or None.
        - state: `{}`.

    Returns:
        float32 alignments `(B, S)` (exact zeros on masked keys) and `{}`.

    Examples:
        >>> from keras_attn_rnn import AttentionDecoder
        >>> from keras_attn_rnn.mechanisms import ContentAttention
        >>> decoder = AttentionDecoder(
        ...     keras.layers.LSTMCell(8), attention=ContentAttention("general", normalizer="sparsemax"))
        >>> x, memory = keras.random.normal((2, 5, 4)), keras.random.normal((2, 7, 6))
        >>> outputs, alignments = decoder([x, memory], return_attention_scores=True)
        >>> keras.ops.shape(outputs), keras.ops.shape(alignments)
        ((2, 5, 6), (2, 5, 7))

    Reference:
        Bahdanau et al., 2015; Luong et al., 2015.
    """

    def __init__(
        self, score="additive", units=None, normalizer="softmax", **kwargs
    ):  # pragma: no mutate block
        scores.check_units(score, units, "query size")
        super().__init__(normalizer=normalizer, **kwargs)
        self.score = scores.serialize(score)  # config form; the layer is score_layer
        self.units = units
        self.score_layer = scores.role_named(score, units=units, dtype=self.dtype_policy)

    def build(self, query_shape, memory_shape):
        self.score_layer.build_for((None, 1, query_shape[-1]), tuple(memory_shape))

    def prepare_keys(self, memory):
        return self.score_layer.prepare_keys(memory)

    def call(self, query, prepared_keys, memory, memory_mask, state, training=None):
        return self.normalize(self.score_layer.score_step(query, prepared_keys), memory_mask), {}

    def get_config(self):
        return {**super().get_config(), "score": self.score, "units": self.units}
