import keras
from keras import ops

from keras_attn_rnn import checks, masking, normalizers, scores, serializable
from keras_attn_rnn.mechanisms.mechanism import Mechanism, softplus_inverse

# The building blocks of the mean, in the order of `block_kernel`'s columns.
BLOCKS = ("previous_mean", "diagonal", "single_step", "mean_content", "bias")

# The slope of the leaky clamp of the mean to [0, 1] (both reference implementations').
LEAK = 0.01


@serializable.register
class LocationAttention(Mechanism):
    """Location attention mixed with content attention (Dubois et al., 2020).

    A Gaussian over the relative positions `r_j = j / (n - 1)` of the memory
    (`n` a row's true length, read from the mask; `r` runs from 0 at its
    first to 1 at its last unmasked position), whose mean is built from
    blocks that mean the same thing at every length, so that the attention
    pattern learnt on short sequences carries over to longer ones. Each step:

    - content attention `c = normalizer(score(q, k))`, and its mean relative
      position `c_bar = sum_j c_j r_j`;
    - block weights from an MLP of the query, `rho = W_2 tanh(W_1 q + b_1) +
      b_2` (5 outputs), bounded to the ranges of Dubois's plateau
      activations: `w = [sigmoid(rho_0), tanh(rho_1), rho_2,
      sigmoid(rho_3), sigmoid(rho_4)]`;
    - the mean `mu_t = clamp(w . b_t)` of the blocks `b_t = [mu_{t-1}, t /
      (n - 1), 1 / (n - 1), c_bar, 1]` (`t` the number of steps before this
      one; `mu_0 = 0`), with Ray Chowdhury and Caragea's (2023) leaky clamp
      to `[0, 1]`, `clamp(x) = max(0.01 x, min(x, 1 + 0.01 x))` (Dubois et
      al.'s own clamp leaks from 1, `1 + 0.01 (x - 1)` above 1: the two differ
      by at most 0.01, above `x = 1.01`);
    - the width in memory positions `sigma = softplus(s^) + min_width`, with
      `s^ = k_s . tanh(W_1 q + b_1) + b_s`, and in relative units `sigma / n`;
    - location attention `l_j = exp(-(r_j - mu_t)^2 / (2 (sigma / n)^2))`
      normalised over the unmasked positions (a softmax of the exponents,
      which never underflows to 0 / 0);
    - the alignments `a = g l + (1 - g) c`, with the gate `g = sigmoid(k_g .
      q + b_g)` from the query.

    `n - 1` is floored at 1, so a row of length 1 attends to its one
    position. Taken from the paper's code (Dubois's `LocationAttender`,
    Ray Chowdhury and Caragea's re-implementation): the blocks (less the mean
    position of the previous attention), positions `j / (n - 1)` with widths
    divided by `n`, a leaky clamp of the mean (Ray Chowdhury and Caragea's
    form), the minimum width 0.41
    positions and a convex gate between the two attentions. Simplified:
    the mean is not centred on 1/2 (Dubois's bias weight in `[-1/2, 1/2]`
    is one in `[0, 1]` here); the weighter is an MLP of the query, not a GRU; the block weights are
    bounded by sigmoid and tanh (and the step's weight left free) instead of
    rounded to integers by plateau activations, and are not gated from step
    to step; the mean is not rounded to a position; the width is not
    annealed from a large start; there are no L0 or clamping regularisers;
    and the gate is a sigmoid of the query (Ray Chowdhury and Caragea)
    rather than Dubois's confidence computed from the width. The initial
    biases make `w = [0.5, 0, 0, 0.5, 0.5]`, `sigma = initial_width` and `g
    = 0.5` (this library's choice).

    Masking: masked positions get exactly 0, and the alignments sum to 1
    over the unmasked ones. Positions are counted over the unmasked ones
    only, so a left-padded row attends like the right-padded one, shifted.
    Without a mask `n` is the memory length.

    Weights: the score's, `query_kernel (d_q, units)`, `query_bias
    (units,)`, `block_kernel (units, 5)`, `block_bias (5,)`, `width_kernel
    (units, 1)`, `width_bias (1,)`, `gate_kernel (d_q, 1)`, `gate_bias (1,)`.

    Args:
        units: size of the hidden layer of the MLP that weighs the blocks.
        score: the content score, a score name or a `scores.Score` instance
            (`"additive"` uses the memory size as its hidden size; give
            `scores.Additive(units)` for another).
        min_width: the smallest width, in memory positions; > 0.
        initial_width: the width at initialisation (when the MLP's output
            is its bias); > `min_width`.
        normalizer: the content attention's normalizer, `"softmax"` or
            another name of `normalizers.names()` (the location attention is
            a normalised Gaussian).

    Returns (call):
        float32 alignments `(B, S)` and the state `{"mean": (B, 1), "step":
        (B, 1)}` (float32).

    Examples:
        >>> from keras_attn_rnn import AttentionDecoder
        >>> from keras_attn_rnn.mechanisms import LocationAttention
        >>> decoder = AttentionDecoder(keras.layers.LSTMCell(8), attention=LocationAttention(16))
        >>> x, memory = keras.random.normal((2, 5, 4)), keras.random.normal((2, 7, 6))
        >>> outputs, alignments = decoder([x, memory], return_attention_scores=True)
        >>> keras.ops.shape(outputs), keras.ops.shape(alignments)
        ((2, 5, 6), (2, 5, 7))

    Reference:
        Dubois, Dagan, Hupkes and Bruni, 2020, "Location Attention for
        Extrapolation to Longer Sequences", ACL; Ray Chowdhury and Caragea,
        2023, "Monotonic Location Attention for Length Generalization", ICML.
    """

    def __init__(
        self,
        units,
        score="additive",
        min_width=0.41,
        initial_width=1.0,
        normalizer="softmax",
        **kwargs,
    ):  # pragma: no mutate block
        checks.check_positive_int("units", units, allow_none=False)
        scores.check(score)
        checks.check_above("min_width", min_width, 0.0)
        checks.check_above("initial_width", initial_width, float(min_width))
        super().__init__(normalizer=normalizer, **kwargs)
        self.units = units
        self.score = scores.serialize(score)
        self.min_width = float(min_width)
        self.initial_width = float(initial_width)
        self.score_layer = scores.role_named(score, dtype=self.dtype_policy)

    def build(self, query_shape, memory_shape):
        d_q = query_shape[-1]
        self.score_layer.build_for((None, 1, d_q), tuple(memory_shape))
        self.query_kernel = self.add_weight(
            name="query_kernel", shape=(d_q, self.units), initializer="glorot_uniform"
        )
        self.query_bias = self.add_weight(
            name="query_bias", shape=(self.units,), initializer="zeros"
        )
        self.block_kernel = self.add_weight(
            name="block_kernel", shape=(self.units, len(BLOCKS)), initializer="glorot_uniform"
        )
        self.block_bias = self.add_weight(
            name="block_bias", shape=(len(BLOCKS),), initializer="zeros"
        )
        self.width_kernel = self.add_weight(
            name="width_kernel", shape=(self.units, 1), initializer="glorot_uniform"
        )
        self.width_bias = self.add_weight(
            name="width_bias",
            shape=(1,),
            initializer=keras.initializers.Constant(
                softplus_inverse(self.initial_width - self.min_width)
            ),
        )
        self.gate_kernel = self.add_weight(
            name="gate_kernel", shape=(d_q, 1), initializer="glorot_uniform"
        )
        self.gate_bias = self.add_weight(name="gate_bias", shape=(1,), initializer="zeros")

    def prepare_keys(self, memory):
        return self.score_layer.prepare_keys(memory)

    def initial_state(self, keys, memory_mask):
        zeros = ops.zeros((ops.shape(keys)[0], 1), "float32")
        return {"mean": zeros, "step": zeros}

    def parameters(self, query):
        """float32 block weights `(B, 5)`, width in positions `(B, 1)` and gate `(B, 1)`."""
        hidden = ops.tanh(ops.matmul(query, self._w(self.query_kernel)) + self._w(self.query_bias))
        rho = ops.matmul(hidden, self._w(self.block_kernel)) + self._w(self.block_bias)
        rho = ops.cast(rho, "float32")
        weights = ops.concatenate(
            [
                ops.sigmoid(rho[:, 0:1]),  # the previous mean
                ops.tanh(rho[:, 1:2]),  # t / (n - 1), forwards or backwards
                rho[:, 2:3],  # 1 / (n - 1), a number of positions
                ops.sigmoid(rho[:, 3:4]),  # the mean position of content attention
                ops.sigmoid(rho[:, 4:5]),  # 1
            ],
            axis=-1,
        )
        width = ops.matmul(hidden, self._w(self.width_kernel)) + self._w(self.width_bias)
        width = ops.softplus(ops.cast(width, "float32")) + self.min_width
        gate = ops.matmul(query, self._w(self.gate_kernel)) + self._w(self.gate_bias)
        return weights, width, ops.sigmoid(ops.cast(gate, "float32"))

    def call(self, query, prepared_keys, memory, memory_mask, state, training=None):
        content = self.normalize(self.score_layer.score_step(query, prepared_keys), memory_mask)
        mask = memory_mask
        if mask is None:
            mask = ops.ones(ops.shape(prepared_keys)[:2], "bool")
        positions, length = relative_positions(mask)
        gaps = ops.maximum(length - 1.0, 1.0)  # (B, 1): n - 1, floored at 1
        blocks = ops.concatenate(
            [
                state["mean"],
                state["step"] / gaps,
                1.0 / gaps,
                ops.sum(content * positions, axis=-1, keepdims=True),
                ops.ones_like(gaps),
            ],
            axis=-1,
        )
        weights, width, gate = self.parameters(query)
        mean = leaky_clamp(ops.sum(weights * blocks, axis=-1, keepdims=True))
        sigma = width / ops.maximum(length, 1.0)  # relative units
        exponents = -ops.square(positions - mean) / (2.0 * ops.square(sigma))
        location = masking.masked_softmax(exponents, memory_mask, normalizer=normalizers.softmax)
        # both are exactly 0 on masked positions, and so is their mix
        alignments = gate * location + (1.0 - gate) * content
        return alignments, {"mean": mean, "step": state["step"] + 1.0}

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "score": self.score,
            "min_width": self.min_width,
            "initial_width": self.initial_width,
        }


def relative_positions(memory_mask):
    """float32 relative positions `r (B, S)` and true lengths `n (B, 1)` of a `(B, S)` mask:
    `r_j = j' / (n - 1)`, `j'` the index of `j` among the row's unmasked positions, `n - 1`
    floored at 1; masked positions get any value."""
    counts = ops.cumsum(ops.cast(memory_mask, "float32"), axis=-1)
    lengths = counts[:, -1:]
    return (counts - 1.0) / ops.maximum(lengths - 1.0, 1.0), lengths


def leaky_clamp(x, low=0.0, high=1.0, slope=LEAK):
    """`x` clamped to `[low, high]`, leaking with slope `slope`: `max(low + slope x, min(x,
    high + slope x))`, Ray Chowdhury and Caragea's (2023) form (Dubois et al.'s leaks from
    `high`: `high + slope (x - high)`)."""
    return ops.maximum(low + slope * x, ops.minimum(x, high + slope * x))
