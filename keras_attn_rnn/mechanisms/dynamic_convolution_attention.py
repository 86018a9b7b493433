import math

from keras import ops

from keras_attn_rnn import checks, scores, serializable
from keras_attn_rnn.mechanisms.mechanism import Mechanism

# The prior's floor before its log (Battenberg et al.'s `max(p, 1e-6)`): a position the
# prior cannot reach still gets a finite energy, about 14 below a reachable one.
PRIOR_FLOOR = 1e-6


@serializable.register
class DynamicConvolutionAttention(Mechanism):
    """Dynamic convolution attention (DCA; Battenberg et al., 2020).

    A location-relative mechanism: the memory's content is never scored, only
    the previous alignments `a` (`(B, S)`, carried in the state) are read,
    through three convolutions over the memory positions:

    - static filters `f = F * a`: `static_filters` learned filters of width
      `static_kernel_size`, the same for every row;
    - dynamic filters `g = G(q) * a`: `dynamic_filters` filters of width
      `dynamic_kernel_size` predicted from the query by an MLP, `G(q) = W_2
      tanh(W_1 q + b_1)` (no bias after `W_2`), its `dynamic_filters *
      dynamic_kernel_size` outputs read filter by filter (filter `i`, tap `k`
      at index `i * dynamic_kernel_size + k`); each row convolves with its own;
    - a fixed causal prior `p_j = sum_k P_k a_{j-k}`, with `P` the
      beta-binomial pmf over `k = 0 .. prior_length - 1` (`n = prior_length -
      1`, `prior_alpha`, `prior_beta`): it only moves mass forward.

    The energies are `e_j = v . tanh(U f_j + T g_j + b) + log(max(p_j, 1e-6))`
    and the alignments their softmax over the memory positions. The static
    and dynamic convolutions are cross-correlations (as `keras.ops.conv`)
    centred on each position with zero padding ('same'; the kernel sizes are
    odd); they and the dynamic filters' MLP have no bias, the one bias `b` is
    inside the tanh (as Battenberg et al.'s equation). The MLP's hidden layer
    and the tanh's both have `units`. The initial alignments put all mass on
    position 0. The tanh term runs in the compute dtype; the prior, its log
    and the softmax in float32.

    Masking: masked positions get exactly 0 (and so pass nothing on through
    the convolutions); the rest is renormalised. Positions are counted from
    index 0 of the memory, so a memory should be padded on the right.

    Weights: `query_kernel (d_q, units)` and `query_bias (units,)` (`W_1`,
    `b_1`), `filter_kernel (units, dynamic_filters * dynamic_kernel_size)`
    (`W_2`), `static_kernel (static_kernel_size, static_filters)` (`F`),
    `static_projection (static_filters, units)` (`U`), `dynamic_projection
    (dynamic_filters, units)` (`T`), `b (units,)` and `v (units,)`.

    Args:
        units: size of the tanh's hidden layer and of the filters' MLP.
        static_filters: number of static filters.
        static_kernel_size: width of the static filters, odd.
        dynamic_filters: number of dynamic filters.
        dynamic_kernel_size: width of the dynamic filters, odd.
        prior_length: length of the prior filter (the largest step it
            allows is `prior_length - 1` positions).
        prior_alpha: the beta-binomial prior's `alpha`; > 0.
        prior_beta: the beta-binomial prior's `beta`; > 0.

    Returns (call):
        float32 alignments `(B, S)` and the state `{"alignments": (B, S)}`.

    Examples:
        >>> from keras_attn_rnn import AttentionDecoder
        >>> from keras_attn_rnn.mechanisms import DynamicConvolutionAttention
        >>> decoder = AttentionDecoder(
        ...     keras.layers.LSTMCell(8), attention=DynamicConvolutionAttention(16))
        >>> x, memory = keras.random.normal((2, 5, 4)), keras.random.normal((2, 7, 6))
        >>> outputs, alignments = decoder([x, memory], return_attention_scores=True)
        >>> keras.ops.shape(outputs), keras.ops.shape(alignments)
        ((2, 5, 6), (2, 5, 7))

    Reference:
        Battenberg et al., 2020, "Location-Relative Attention Mechanisms For
        Robust Long-Form Speech Synthesis", section 2.2.
    """

    def __init__(
        self,
        units,
        static_filters=8,
        static_kernel_size=21,
        dynamic_filters=8,
        dynamic_kernel_size=21,
        prior_length=11,
        prior_alpha=0.1,
        prior_beta=0.9,
        **kwargs,
    ):  # pragma: no mutate block
        checks.check_positive_int("units", units, allow_none=False)
        checks.check_positive_int("static_filters", static_filters, allow_none=False)
        checks.check_odd_width("static_kernel_size", static_kernel_size)
        checks.check_positive_int("dynamic_filters", dynamic_filters, allow_none=False)
        checks.check_odd_width("dynamic_kernel_size", dynamic_kernel_size)
        checks.check_positive_int("prior_length", prior_length, allow_none=False)
        checks.check_above("prior_alpha", prior_alpha, 0)
        checks.check_above("prior_beta", prior_beta, 0)
        normalizer = kwargs.get("normalizer", "softmax")
        if normalizer != "softmax":
            raise ValueError(
                "DynamicConvolutionAttention takes no normalizer (its log prior is a factor "
                f"of a softmax). Received: normalizer={normalizer!r}"
            )
        super().__init__(**kwargs)
        self.units = units
        self.static_filters = static_filters
        self.static_kernel_size = static_kernel_size
        self.dynamic_filters = dynamic_filters
        self.dynamic_kernel_size = dynamic_kernel_size
        self.prior_length = prior_length
        self.prior_alpha = float(prior_alpha)
        self.prior_beta = float(prior_beta)
        self.prior = beta_binomial_pmf(prior_length, self.prior_alpha, self.prior_beta)

    def build(self, query_shape, memory_shape):
        units = self.units

        def weight(name, shape, initializer="glorot_uniform"):
            return self.add_weight(name=name, shape=shape, initializer=initializer)

        self.query_kernel = weight("query_kernel", (query_shape[-1], units))
        self.query_bias = weight("query_bias", (units,), "zeros")
        self.filter_kernel = weight(
            "filter_kernel", (units, self.dynamic_filters * self.dynamic_kernel_size)
        )
        self.static_kernel = weight("static_kernel", (self.static_kernel_size, self.static_filters))
        self.static_projection = weight("static_projection", (self.static_filters, units))
        self.dynamic_projection = weight("dynamic_projection", (self.dynamic_filters, units))
        self.b = weight("b", (units,), "zeros")
        self.v = weight("v", (units,))

    def initial_state(self, keys, memory_mask):
        batch, length = ops.shape(keys)[0], ops.shape(keys)[1]
        return {"alignments": ops.one_hot(ops.zeros((batch,), "int32"), length)}

    def filters_for(self, query):
        """The query's filters `G(q)`, `(B, dynamic_filters, dynamic_kernel_size)`."""
        hidden = ops.tanh(ops.matmul(query, self._w(self.query_kernel)) + self._w(self.query_bias))
        filters = ops.matmul(hidden, self._w(self.filter_kernel))
        return ops.reshape(filters, (-1, self.dynamic_filters, self.dynamic_kernel_size))

    def log_prior(self, alignments):
        """float32 `log(max(P * a, 1e-6))` `(B, S)`: the prior's causal convolution."""
        windows = sliding_windows(alignments, self.prior_length - 1, 0)  # (B, S, L)
        taps = ops.convert_to_tensor(self.prior[::-1], "float32")  # window tap m reads a_{j-L+1+m}
        return ops.log(ops.maximum(ops.sum(windows * taps, axis=-1), PRIOR_FLOOR))

    def call(self, query, prepared_keys, memory, memory_mask, state, training=None):
        previous = state["alignments"]
        features = ops.cast(previous, self.compute_dtype)
        static_half, dynamic_half = self.static_kernel_size // 2, self.dynamic_kernel_size // 2
        static_windows = sliding_windows(features, static_half, static_half)
        dynamic_windows = (  # one gather when the widths agree (the paper's 21 and 21)
            static_windows
            if dynamic_half == static_half
            else sliding_windows(features, dynamic_half, dynamic_half)
        )
        static = ops.einsum("bsk,kf->bsf", static_windows, self._w(self.static_kernel))
        dynamic = ops.einsum("bsk,bfk->bsf", dynamic_windows, self.filters_for(query))
        # einsum, not matmul: see LocationSensitiveAttention.locate
        energies = scores.additive_energy(
            self._w(self.v),
            ops.einsum("bsf,fu->bsu", static, self._w(self.static_projection)),
            ops.einsum("bsf,fu->bsu", dynamic, self._w(self.dynamic_projection)),
            self._w(self.b),
        )
        energies = ops.cast(energies, "float32") + self.log_prior(previous)
        alignments = self.normalize(energies, memory_mask)
        return alignments, {"alignments": alignments}

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "static_filters": self.static_filters,
            "static_kernel_size": self.static_kernel_size,
            "dynamic_filters": self.dynamic_filters,
            "dynamic_kernel_size": self.dynamic_kernel_size,
            "prior_length": self.prior_length,
            "prior_alpha": self.prior_alpha,
            "prior_beta": self.prior_beta,
        }


def beta_binomial_pmf(length, alpha, beta):
    """The beta-binomial pmf `P(k)`, `k = 0 .. length - 1` (`n = length - 1`), a tuple:
    `C(n, k) B(k + alpha, n - k + beta) / B(alpha, beta)`."""
    n = length - 1

    def log_beta(x, y):
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    return tuple(
        math.comb(n, k) * math.exp(log_beta(k + alpha, n - k + beta) - log_beta(alpha, beta))
        for k in range(length)
    )


def sliding_windows(values, left, right):
    """`windows[b, j, m] = values[b, j - left + m]` (0 outside), `(B, S, left + right + 1)`:
    `values (B, S)` zero-padded by `left` and `right` positions, one gather of shifted
    copies (a convolution is then an einsum with its taps)."""
    padded = ops.pad(values, [(0, 0), (left, right)])
    length = ops.shape(values)[1]
    index = ops.arange(length)[:, None] + ops.arange(left + right + 1)[None, :]
    return ops.take(padded, index, axis=1)
