import keras
import numpy as np
from keras import ops

from keras_attn_rnn import _random, checks, scores, serializable
from keras_attn_rnn.mechanisms.mechanism import Mechanism

MODES = ("parallel", "recursive", "hard")


@serializable.register
class MonotonicAttention(Mechanism):
    """Monotonic attention (Raffel et al., 2017), exactly as TensorFlow Addons computes it.

    Each step, every memory position `i` is "chosen" with probability
    `p_i = sigmoid(score(query, k_i) + score_bias)` (mode `"hard"`: `p_i =
    1[score + score_bias > 0]`), scanning left to right from where the last
    step stopped; the alignments are the expected stopping distribution:
    `a_i = p_i * sum_{j<=i} a_prev_j * prod_{j<=k<i} (1 - p_k)`. The
    initial alignments are one-hot at position 0. Masked positions are never
    chosen.

    `MonotonicAttention(scores.Additive(units))` is tfa's
    `BahdanauMonotonicAttention`, `MonotonicAttention(scores.General())` its
    `LuongMonotonicAttention`; the score keeps its role names and this layer
    adds one scalar weight, `score_bias`.

    Args:
        score: a score name or a `scores.Score` instance.
        units: hidden size of `score="additive"`.
        mode: `"parallel"` (a parallel prefix scan over the memory: exact on
            memories of any length, where tfa's closed form with a clipped
            `safe_cumprod` loses the mass), `"recursive"` (a sequential scan:
            the same values, slower) or `"hard"` (0/1 choices: one-hot
            alignments that never move backwards).
        sigmoid_noise: standard deviation of Gaussian noise added to the
            scores before the sigmoid in training (pushes the choices
            towards 0/1); never at inference. Each batch draws a new seed
            from the layer's `seed`, and each step of it fresh noise for every
            row and position.
        score_bias_init: initial value of `score_bias` (tfa suggests e.g. -4
            for long memories).
        seed: seed of the noise.

    Returns (call):
        float32 alignments `(B, S)` (summing to at most 1) and the state
        `{"alignments": ...}` (plus, when `sigmoid_noise > 0`, the batch's
        noise seed and each row's step count).

    Examples:
        >>> from keras_attn_rnn import AttentionDecoder, scores
        >>> from keras_attn_rnn.mechanisms import MonotonicAttention
        >>> decoder = AttentionDecoder(
        ...     keras.layers.LSTMCell(8), attention=MonotonicAttention(scores.Additive(8)))
        >>> x, memory = keras.random.normal((2, 5, 4)), keras.random.normal((2, 7, 6))
        >>> outputs, alignments = decoder([x, memory], return_attention_scores=True)
        >>> keras.ops.shape(outputs), keras.ops.shape(alignments)
        ((2, 5, 6), (2, 5, 7))

    Reference:
        Raffel et al., 2017, "Online and Linear-Time Attention by Enforcing
        Monotonic Alignments".
    """

    def __init__(
        self,
        score="additive",
        units=None,
        mode="parallel",
        sigmoid_noise=0.0,
        score_bias_init=0.0,
        seed=None,
        **kwargs,
    ):  # pragma: no mutate block
        scores.check_units(score, units, "query size")
        checks.check_choice("mode", mode, MODES)
        for name, value in (("sigmoid_noise", sigmoid_noise), ("score_bias_init", score_bias_init)):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not np.isfinite(value)
            ):
                raise ValueError(f"{name} must be a finite number. Received: {name}={value!r}")
        if sigmoid_noise < 0:
            raise ValueError(
                f"sigmoid_noise must be >= 0 (a standard deviation). "
                f"Received: sigmoid_noise={sigmoid_noise!r}"
            )
        super().__init__(**kwargs)
        self.score = scores.serialize(score)
        self.units = units
        self.mode = mode
        self.sigmoid_noise = float(sigmoid_noise)
        self.score_bias_init = float(score_bias_init)
        self.seed = seed
        self.score_layer = scores.role_named(score, units=units, dtype=self.dtype_policy)

    def build(self, query_shape, memory_shape):
        self.score_layer.build_for((None, 1, query_shape[-1]), tuple(memory_shape))
        self.score_bias = self.add_weight(
            name="score_bias",
            shape=(),
            initializer=keras.initializers.Constant(self.score_bias_init),
        )
        if self.sigmoid_noise > 0:
            # made here, not in __init__: constructing the layer runs no backend op (a
            # runner validates its options before a multi-worker strategy exists)
            self.seed_generator = keras.random.SeedGenerator(self.seed)

    def prepare_keys(self, memory):
        return self.score_layer.prepare_keys(memory)

    def initial_state(self, keys, memory_mask):
        batch, length = ops.shape(keys)[0], ops.shape(keys)[1]
        state = {"alignments": ops.one_hot(ops.zeros((batch,), "int32"), length)}
        if self.sigmoid_noise > 0:
            seed = ops.cast(self.seed_generator.next(), "int32")
            state["noise_seed"] = ops.broadcast_to(seed, (batch, 2))
            state["noise_step"] = ops.zeros((batch,), "int32")
        return state

    def call(self, query, prepared_keys, memory, memory_mask, state, training=None):
        score = ops.cast(self.score_layer.score_step(query, prepared_keys), "float32")
        score = score + ops.cast(self.score_bias, "float32")
        if self.sigmoid_noise > 0 and training:
            noise = keras.random.normal(
                ops.shape(score), seed=_random.TensorSeed(_step_seed(state))
            )
            score = score + self.sigmoid_noise * noise
        if self.mode == "hard":
            p_choose = ops.cast(score > 0, "float32")
        else:
            p_choose = ops.sigmoid(score)
        if memory_mask is not None:
            p_choose = ops.where(memory_mask, p_choose, 0.0)
        alignments = monotonic_alignments(p_choose, state["alignments"], self.mode)
        # the keys in initial_state's order: PyTorch's loop carries the state as a flat list
        next_state = {"alignments": alignments}
        if self.sigmoid_noise > 0:
            next_state["noise_seed"] = state["noise_seed"]
            next_state["noise_step"] = state["noise_step"] + 1
        return alignments, next_state

    def get_config(self):
        return {
            **super().get_config(),
            "score": self.score,
            "units": self.units,
            "mode": self.mode,
            "sigmoid_noise": self.sigmoid_noise,
            "score_bias_init": self.score_bias_init,
            "seed": self.seed,
        }


# An odd multiplier is a bijection of int32 (wrapping): no two steps share a seed.
_STEP_STRIDE = 1_000_003


def _step_seed(state):
    """The seed of this step's noise: the batch's seed (the same in every row) moved by the
    step. Rows whose target ended keep their state, so the step is the largest row count."""
    step = ops.max(state["noise_step"])
    return state["noise_seed"][0] + ops.stack([step * _STEP_STRIDE, ops.zeros_like(step)])


_MAX_ROUNDS = 31  # rounds of the prefix scan: memories up to 2**31 positions


def _shift(x, offset, fill):
    """`x (B, S)` moved `offset` positions right along axis 1, `fill` coming in."""
    return ops.concatenate([ops.full_like(x[:, :offset], fill), x[:, :-offset]], axis=1)


def _shift_by_tensor(x, offset, fill):
    """`_shift` by a tensor `offset`, keeping the shape static (XLA compiles it in a loop)."""
    moved = ops.roll(x, offset, axis=1)
    return ops.where(ops.arange(ops.shape(x)[1]) < offset, ops.cast(fill, x.dtype), moved)


def _linear_scan(a, b):
    """`q_i = a_i q_{i-1} + b_i` with `q_{-1} = 0` along axis 1, in `ceil(log2 S)` rounds.

    Round `r` composes each position's map `q -> a q + b` with the one `2**r`
    positions before it (Hillis and Steele): products and sums of the inputs
    only, no division, so nothing underflows that the recurrence keeps.
    """

    def compose(offset, a, b, shift=_shift):
        return offset * 2, a * shift(a, offset, 1.0), a * shift(b, offset, 0.0) + b

    length = a.shape[1]
    if isinstance(length, int):  # a static length: the rounds unrolled (JAX, PyTorch, most graphs)
        offset = 1
        while offset < length:
            offset, a, b = compose(offset, a, b)
        return b
    if length is None:  # a TensorFlow graph of unknown length: as many rounds as it needs
        _, _, b = ops.while_loop(
            lambda offset, a, b: offset < ops.shape(a)[1],
            lambda offset, a, b: compose(offset, a, b, shift=_shift_by_tensor),
            (ops.convert_to_tensor(1), a, b),
            maximum_iterations=_MAX_ROUNDS,  # a bound XLA needs for the gradient's buffers
        )
        return b
    return _sequential_scan(a, b)  # a symbolic length (JAX shape inference): the same values


def _sequential_scan(a, b):
    """`_linear_scan`, one position at a time."""

    def step(carry, inputs):
        carry = inputs[..., 0] * carry + inputs[..., 1]
        return carry, carry

    # One stacked input, not (a, b): Keras' TensorFlow scan fails on several inputs of an
    # unknown length (it checks their static lengths, None, against each other).
    pairs = ops.transpose(ops.stack([a, b], axis=-1), (1, 0, 2))
    _, q = ops.scan(step, ops.zeros_like(a[:, 0]), pairs)
    return ops.transpose(q)


def monotonic_alignments(p_choose, previous, mode):
    """tfa's `monotonic_attention(p_choose_i, previous_attention, mode)` on `(B, S)` float32.

    Both soft modes compute `a_i = p_i q_i` with `q_i = (1 - p_{i-1}) q_{i-1} +
    previous_i`. `"parallel"` solves that linear recurrence with a parallel
    prefix scan (log-depth, exact); tfa's closed form `p cumprod(1 - p) cumsum(previous /
    clip(cumprod(1 - p), 1e-10, 1))` loses all the mass once the cumulative
    product falls below 1e-10 (some 33 positions at `p = 0.5`, at once after a
    `p` of 1.0), and equals this one wherever it does not.
    """
    # q_i = shifted_i * q_{i-1} + previous_i, q_{-1} = 0
    shifted = ops.concatenate([ops.ones_like(p_choose[:, :1]), 1.0 - p_choose[:, :-1]], axis=-1)
    if mode == "parallel":
        return p_choose * _linear_scan(shifted, previous)
    if mode == "hard":
        p_choose = p_choose * ops.cumsum(previous, axis=-1)
        one_minus = 1.0 - p_choose
        cumprod = ops.concatenate(
            [ops.ones_like(one_minus[:, :1]), ops.cumprod(one_minus, axis=-1)[:, :-1]], axis=-1
        )
        return p_choose * cumprod
    if p_choose.shape[1] is None:
        # recursive, in a TensorFlow graph of unknown length: the same recurrence by the
        # prefix scan (equal within float rounding); a scan over an unknown length has no
        # bound XLA can compile inside the decoder's loop
        return p_choose * _linear_scan(shifted, previous)
    return p_choose * _sequential_scan(shifted, previous)  # recursive
