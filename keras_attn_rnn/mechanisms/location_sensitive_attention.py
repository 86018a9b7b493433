from keras import ops

from keras_attn_rnn import checks, scores, serializable
from keras_attn_rnn.mechanisms.mechanism import Mechanism

LOCATION_FEATURES = ("previous", "cumulative", "both")


@serializable.register
class LocationSensitiveAttention(Mechanism):
    """Location-sensitive attention (Chorowski et al., 2015; Tacotron 2's attention).

    `e_i = v . tanh(W q + V k_i + U conv1d(f)_i [+ b])`, with `f` the
    location features: the previous alignments (Chorowski et al.), their
    running sum, or both as two channels (Tacotron 2, the default): the
    score sees where the decoder looked before, so alignments move on
    steadily instead of jumping. The initial alignments are zeros.

    Weights: `query_kernel (d_q, units)`, `key_kernel (d_m, units)`,
    `location_kernel (kernel_size, channels, filters)` (the convolution, no
    bias; `channels` is 2 for `"both"`, previous then cumulative, else 1),
    `location_projection (filters, units)` (`U`), `v (units,)`, and `b
    (units,)` with `use_bias`.

    Args:
        units: size of the hidden layer.
        filters: number of location filters.
        kernel_size: width of the location convolution, odd ('same' padding).
        cumulative: the older switch, kept for existing code and saved
            configs: `False` means `location_features="previous"`, `True`
            `"cumulative"`. Give it or `location_features`, not both.
        use_bias: add `b` inside the tanh.
        normalizer: `"softmax"` or another name of `normalizers.names()`.
        location_features: what the convolution reads: `"previous"` (the
            last alignments), `"cumulative"` (the sum of all previous ones)
            or `"both"` (the two as channels, as Tacotron 2). Default
            `"both"`, or what `cumulative` says when it is given.

    Returns (call):
        float32 alignments `(B, S)` and the state `{"alignments", "cumulative"}`.

    Examples:
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
        cumulative=None,
        use_bias=True,
        normalizer="softmax",
        location_features=None,
        **kwargs,
    ):  # pragma: no mutate block
        checks.check_positive_int("units", units, allow_none=False)
        checks.check_positive_int("filters", filters, allow_none=False)
        checks.check_odd_width("kernel_size", kernel_size)
        location_features = _location_features(location_features, cumulative)
        super().__init__(normalizer=normalizer, **kwargs)
        self.units = units
        self.filters = filters
        self.kernel_size = kernel_size
        self.location_features = location_features
        self.use_bias = use_bias

    def build(self, query_shape, memory_shape):
        units = self.units
        scores.add_projections(self, query_shape[-1], memory_shape[-1], units)
        self.location_kernel = self.add_weight(
            name="location_kernel",
            shape=(self.kernel_size, 2 if self.location_features == "both" else 1, self.filters),
            initializer="glorot_uniform",
        )
        self.location_projection = self.add_weight(
            name="location_projection", shape=(self.filters, units), initializer="glorot_uniform"
        )
        self.v = self.add_weight(name="v", shape=(units,), initializer="glorot_uniform")
        if self.use_bias:
            self.b = self.add_weight(name="b", shape=(units,), initializer="zeros")

    def prepare_keys(self, memory):
        bias = self._w(self.b) if self.use_bias else None
        return scores.additive_keys(memory, self._w(self.key_kernel), bias)

    def initial_state(self, keys, memory_mask):
        zeros = ops.zeros(ops.shape(keys)[:2], "float32")
        return {"alignments": zeros, "cumulative": zeros}

    def locate(self, state):
        """`U conv1d(f)` of the state's location features -> `(B, S, units)`."""
        channels = {
            "previous": [state["alignments"]],
            "cumulative": [state["cumulative"]],
            "both": [state["alignments"], state["cumulative"]],
        }[self.location_features]
        features = ops.cast(ops.stack(channels, axis=-1), self.compute_dtype)  # (B, S, channels)
        located = ops.conv(features, self._w(self.location_kernel), padding="same")
        # einsum, not matmul: TensorFlow's matmul of (B, S, F) by (F, U) is a tensordot whose
        # gradient XLA cannot compile in a loop of dynamic shapes
        return ops.einsum("bsf,fu->bsu", located, self._w(self.location_projection))

    def call(self, query, prepared_keys, memory, memory_mask, state, training=None):
        energies = scores.additive_step(
            query, self._w(self.query_kernel), prepared_keys, self._w(self.v), self.locate(state)
        )
        alignments = self.normalize(energies, memory_mask)
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
            "use_bias": self.use_bias,
            "location_features": self.location_features,
        }


def _location_features(location_features, cumulative):
    """`location_features` from the constructor's two switches (`cumulative` is the older one)."""
    if cumulative is not None:
        if not isinstance(cumulative, bool):
            raise ValueError(
                f"cumulative must be True or False. Received: cumulative={cumulative!r}"
            )
        if location_features is not None:
            raise ValueError(
                "Give location_features or the older cumulative, not both "
                "(cumulative=False is 'previous', cumulative=True 'cumulative'). "
                f"Received: location_features={location_features!r}, cumulative={cumulative!r}"
            )
        return "cumulative" if cumulative else "previous"
    if location_features is None:
        return "both"
    if location_features not in LOCATION_FEATURES:
        raise ValueError(
            "location_features must be one of "
            f"{', '.join(repr(f) for f in LOCATION_FEATURES)}. "
            f"Received: location_features={location_features!r}"
        )
    return location_features
