import math

from keras import ops

from keras_attn_rnn import checks, serializable
from keras_attn_rnn.mechanisms.mechanism import Mechanism, softplus_inverse

VERSIONS = ("v2", "v2b")
DIRECTIONS = ("forward", "backward")

# Added to every width (in memory positions): keeps 1 / sigma finite when softplus
# underflows; a component this narrow puts its mass on one position anyway.
WIDTH_FLOOR = 0.01


@serializable.register
class GMMAttention(Mechanism):
    """Gaussian mixture (GMM) attention (Graves, 2013; Battenberg et al., 2020's GMMv2b).

    A location-relative mechanism: the memory's content is never scored. Each
    step, a small MLP of the query, `[w^, D^, s^] = W_2 tanh(W_1 q + b_1) +
    b_2` (`3K` outputs, in that order), gives `K` Gaussian components: weights
    `w = softmax(w^)` over the components, a step `D = softplus(D^)`, means
    `mu_t = mu_{t-1} + D` (`mu_0 = 0`, carried in the state: the means never
    move backwards) and widths `sigma = softplus(s^) + 0.01` (the floor keeps
    `1 / sigma` finite). Over the memory positions `j = 0 .. S-1`:

    - `version="v2"`: Graves' (2013) unnormalised Gaussians, `a_j = sum_k w_k
      exp(-(j - mu_k)^2 / (2 sigma_k^2))`, with v2's softplus steps and
      widths; the sum over `j` is not 1 (about `sqrt(2 pi) sigma` for one
      wide component inside the memory). Battenberg et al.'s GMMv2 divides
      each Gaussian by `Z = sqrt(2 pi sigma_k^2)`; this version omits that
      factor (so its alignments are `Z` times theirs);
    - `version="v2b"` (default): each Gaussian's mass over `[j - 1/2, j +
      1/2]`, `a_j = sum_k w_k (Phi((j + 1/2 - mu_k) / sigma_k) - Phi((j - 1/2
      - mu_k) / sigma_k))` with `Phi` the normal CDF (by `erf`): the
      alignments sum to at most 1, and close to 1 when the means are well
      inside the memory.

    Initial biases (Battenberg et al.'s "b": they help the alignment move on
    from the first steps): `b_2` starts at `softplus^-1(initial_step)` for
    `D^`, `softplus^-1(initial_width - 0.01)` for `s^` and zeros for `w^`, so
    an untrained layer steps about `initial_step` positions a step (default
    1) with widths about `initial_width` (default 1). These defaults are this
    library's choice; both versions use the biases (the names `"v2"` and
    `"v2b"` tell the Gaussians apart here, not the biases).

    Direction (this library's addition, for tasks that read the source back to
    front, such as reversal): `direction="forward"` (default, the papers')
    starts the means at position 0 and moves them forward; `"backward"` starts
    them at each row's last unmasked position and moves them back, `mu_t =
    mu_{t-1} - D`: monotonic the other way.

    Masking: masked positions get exactly 0 and the rest is not renormalised.
    Positions are counted from index 0 of the memory, so a memory should be
    padded on the right.

    Weights: `query_kernel (d_q, units)`, `query_bias (units,)`,
    `mixture_kernel (units, 3K)`, `mixture_bias (3K,)`.

    Args:
        units: size of the MLP's hidden layer.
        num_mixtures: the number `K` of Gaussian components.
        version: `"v2b"` (normalised Gaussians) or `"v2"` (unnormalised).
        initial_step: the step `D` of every component at initialisation
            (when the MLP's output is its bias), in memory positions; > 0.
        initial_width: the width `sigma` at initialisation; > 0.01.
        direction: `"forward"` (from position 0, means that never move back)
            or `"backward"` (from the last unmasked position, means that never
            move forward).

    Returns (call):
        float32 alignments `(B, S)` and the state `{"means": (B, K)}`.

    Examples:
        >>> from keras_attn_rnn import AttentionDecoder
        >>> from keras_attn_rnn.mechanisms import GMMAttention
        >>> decoder = AttentionDecoder(keras.layers.LSTMCell(8), attention=GMMAttention(16))
        >>> x, memory = keras.random.normal((2, 5, 4)), keras.random.normal((2, 7, 6))
        >>> outputs, alignments = decoder([x, memory], return_attention_scores=True)
        >>> keras.ops.shape(outputs), keras.ops.shape(alignments)
        ((2, 5, 6), (2, 5, 7))

    Reference:
        Graves, 2013, "Generating Sequences With Recurrent Neural Networks",
        section 5; Battenberg et al., 2020, "Location-Relative Attention
        Mechanisms For Robust Long-Form Speech Synthesis".
    """

    def __init__(
        self,
        units,
        num_mixtures=5,
        version="v2b",
        initial_step=1.0,
        initial_width=1.0,
        direction="forward",
        **kwargs,
    ):  # pragma: no mutate block
        checks.check_positive_int("units", units, allow_none=False)
        checks.check_positive_int("num_mixtures", num_mixtures, allow_none=False)
        checks.check_choice("version", version, VERSIONS)
        checks.check_choice("direction", direction, DIRECTIONS)
        checks.check_above("initial_step", initial_step, 0.0)
        checks.check_above("initial_width", initial_width, WIDTH_FLOOR)
        normalizer = kwargs.get("normalizer", "softmax")
        if normalizer != "softmax":
            raise ValueError(
                "GMMAttention takes no normalizer (its alignments are a Gaussian mixture). "
                f"Received: normalizer={normalizer!r}"
            )
        super().__init__(**kwargs)
        self.units = units
        self.num_mixtures = num_mixtures
        self.version = version
        self.initial_step = float(initial_step)
        self.initial_width = float(initial_width)
        self.direction = direction

    def build(self, query_shape, memory_shape):
        k = self.num_mixtures
        self.query_kernel = self.add_weight(
            name="query_kernel", shape=(query_shape[-1], self.units), initializer="glorot_uniform"
        )
        self.query_bias = self.add_weight(
            name="query_bias", shape=(self.units,), initializer="zeros"
        )
        self.mixture_kernel = self.add_weight(
            name="mixture_kernel", shape=(self.units, 3 * k), initializer="glorot_uniform"
        )
        starts = [0.0] * k
        starts += [softplus_inverse(self.initial_step)] * k
        starts += [softplus_inverse(self.initial_width - WIDTH_FLOOR)] * k

        def mixture_bias_init(shape, dtype=None):
            return ops.convert_to_tensor(starts, dtype=dtype)

        self.mixture_bias = self.add_weight(
            name="mixture_bias", shape=(3 * k,), initializer=mixture_bias_init
        )

    def initial_state(self, keys, memory_mask):
        batch, length = ops.shape(keys)[0], ops.shape(keys)[1]
        start = ops.zeros((batch, 1), "float32")
        if self.direction == "backward":  # the last unmasked position of each row
            positions = ops.broadcast_to(
                ops.arange(length, dtype="float32")[None, :], (batch, length)
            )
            if memory_mask is not None:
                positions = ops.where(memory_mask, positions, 0.0)
            start = ops.max(positions, axis=1, keepdims=True)
        return {"means": ops.broadcast_to(start, (batch, self.num_mixtures))}

    def mixture(self, query, means):
        """float32 `(weights, means, widths)`, each `(B, K)`, of this step."""
        hidden = ops.tanh(ops.matmul(query, self._w(self.query_kernel)) + self._w(self.query_bias))
        raw = ops.matmul(hidden, self._w(self.mixture_kernel)) + self._w(self.mixture_bias)
        raw = ops.cast(raw, "float32")
        k = self.num_mixtures
        weights = ops.softmax(raw[:, :k], axis=-1)
        step = ops.softplus(raw[:, k : 2 * k])
        means = means - step if self.direction == "backward" else means + step
        widths = ops.softplus(raw[:, 2 * k :]) + WIDTH_FLOOR
        return weights, means, widths

    def call(self, query, prepared_keys, memory, memory_mask, state, training=None):
        weights, means, widths = self.mixture(query, state["means"])
        length = ops.shape(prepared_keys)[1]
        mu, sigma = means[:, :, None], widths[:, :, None]  # (B, K, 1)
        if self.version == "v2":
            positions = ops.cast(ops.arange(length), "float32")[None, None, :]
            densities = ops.exp(-ops.square(positions - mu) / (2.0 * ops.square(sigma)))
        else:
            edges = ops.cast(ops.arange(length + 1), "float32")[None, None, :] - 0.5
            cdf = 0.5 * (1.0 + ops.erf((edges - mu) / (sigma * math.sqrt(2.0))))  # (B, K, S+1)
            densities = ops.maximum(cdf[:, :, 1:] - cdf[:, :, :-1], 0.0)
        alignments = ops.sum(weights[:, :, None] * densities, axis=1)  # (B, S)
        if memory_mask is not None:
            alignments = ops.where(memory_mask, alignments, 0.0)
        return alignments, {"means": means}

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "num_mixtures": self.num_mixtures,
            "version": self.version,
            "initial_step": self.initial_step,
            "initial_width": self.initial_width,
            "direction": self.direction,
        }
