import keras
from keras import ops

from keras_attn_rnn.layers import _common
from keras_attn_rnn.mechanisms.mechanism import Mechanism


@keras.saving.register_keras_serializable(package="keras_attn_rnn")
class LocationSensitiveAttention(Mechanism):
    """Location-sensitive attention (Chorowski et al., 2015; Tacotron 2's attention).

    `e_i = v . tanh(W q + V k_i + U conv1d(f)_i [+ b])`, with `f` the
    previous alignments, or (with `cumulative=True`) their running sum: the
    score sees where the decoder looked before, so alignments move on
    steadily instead of jumping. The initial `f` is zeros.

    Weights: `query_kernel (d_q, units)`, `key_kernel (d_m, units)`,
    `location_kernel (kernel_size, 1, filters)` (the convolution, no bias),
    `location_projection (filters, units)` (`U`), `v (units,)`, and `b
    (units,)` with `use_bias`.

    Args:
        units: size of the hidden layer.
        filters: number of location filters.
        kernel_size: width of the location convolution, odd ('same' padding).
        cumulative: convolve the sum of all previous alignments (Tacotron 2)
            instead of the last ones (Chorowski et al.).
        use_bias: add `b` inside the tanh.
        normalizer: `"softmax"` or another name of `normalizers.names()`.

    Returns (call):
        float32 alignments `(B, S)` and the state `{"alignments", "cumulative"}`.

    Example:

    >>> from keras_attn_rnn import AttentionDecoder
    >>> from keras_attn_rnn.mechanisms import LocationSensitiveAttention
    >>> decoder = AttentionDecoder(
    ...     keras.layers.LSTMCell(8), attention=LocationSensitiveAttention(16, kernel_size=7))
    >>> x, memory = keras.random.normal((2, 5, 4)), keras.random.normal((2, 7, 6))
    >>> outputs, alignments = decoder([x, memory], return_attention_scores=True)
    >>> keras.ops.shape(outputs), keras.ops.shape(alignments)
    ((2, 5, 6), (2, 5, 7))

    Reference:
        Chorowski et al., 2015, "Attention-Based Models for Speech
        Recognition"; Shen et al., 2018, "Natural TTS Synthesis by
        Conditioning WaveNet on Mel Spectrogram Predictions".
    """

    def __init__(
        self,
        units,
        filters=32,
        kernel_size=31,
        cumulative=True,
        use_bias=True,
        normalizer="softmax",
        **kwargs,
    ):
        _common.check_positive_int("units", units, allow_none=False)
        _common.check_positive_int("filters", filters, allow_none=False)
        _common.check_positive_int("kernel_size", kernel_size, allow_none=False)
        if kernel_size % 2 == 0:
            raise ValueError(
                "kernel_size must be odd (the convolution is centred on each position). "
                f"Received: kernel_size={kernel_size!r}"
            )
        super().__init__(normalizer=normalizer, **kwargs)
        self.units = units
        self.filters = filters
        self.kernel_size = kernel_size
        self.cumulative = cumulative
        self.use_bias = use_bias

    def build(self, query_shape, memory_shape):
        units = self.units
        self.query_kernel = self.add_weight(
            name="query_kernel", shape=(query_shape[-1], units), initializer="glorot_uniform"
        )
        self.key_kernel = self.add_weight(
            name="key_kernel", shape=(memory_shape[-1], units), initializer="glorot_uniform"
        )
        self.location_kernel = self.add_weight(
            name="location_kernel",
            shape=(self.kernel_size, 1, self.filters),
            initializer="glorot_uniform",
        )
        self.location_projection = self.add_weight(
            name="location_projection", shape=(self.filters, units), initializer="glorot_uniform"
        )
        self.v = self.add_weight(name="v", shape=(units,), initializer="glorot_uniform")
        if self.use_bias:
            self.b = self.add_weight(name="b", shape=(units,), initializer="zeros")

    def _w(self, variable):
        return ops.cast(variable, self.compute_dtype)

    def prepare_keys(self, memory):
        keys = ops.matmul(memory, self._w(self.key_kernel))
        return keys + self._w(self.b) if self.use_bias else keys

    def initial_state(self, keys, memory_mask):
        zeros = ops.zeros(ops.shape(keys)[:2], "float32")
        return {"alignments": zeros, "cumulative": zeros}

    def location_features(self, features):
        """`U conv1d(f)`: `(B, S)` float32 -> `(B, S, units)`."""
        features = ops.expand_dims(ops.cast(features, self.compute_dtype), -1)
        located = ops.conv(features, self._w(self.location_kernel), padding="same")
        return ops.matmul(located, self._w(self.location_projection))

    def call(self, query, prepared_keys, memory, memory_mask, state, training=None):
        features = state["cumulative"] if self.cumulative else state["alignments"]
        processed_query = ops.expand_dims(ops.matmul(query, self._w(self.query_kernel)), 1)
        hidden = ops.tanh(processed_query + prepared_keys + self.location_features(features))
        scores = ops.squeeze(ops.matmul(hidden, ops.expand_dims(self._w(self.v), -1)), -1)
        alignments = self.normalize(scores, memory_mask)
        return alignments, {
            "alignments": alignments,
            "cumulative": state["cumulative"] + alignments,
        }

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "filters": self.filters,
            "kernel_size": self.kernel_size,
            "cumulative": self.cumulative,
            "use_bias": self.use_bias,
        }
