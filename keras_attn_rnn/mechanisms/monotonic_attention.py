import keras
import numpy as np
from keras import ops

from keras_attn_rnn import _random, scores
from keras_attn_rnn.mechanisms.mechanism import Mechanism

MODES = ("parallel", "recursive", "hard")


@keras.saving.register_keras_serializable(package="keras_attn_rnn")
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
        mode: `"parallel"` (closed form with cumulative sums and tfa's
            clipped `safe_cumprod`), `"recursive"` (a scan over the memory:
            exact, slower) or `"hard"` (0/1 choices: one-hot alignments that
            never move backwards).
        sigmoid_noise: standard deviation of Gaussian noise added to the
            scores before the sigmoid in training (pushes the choices
            towards 0/1); never at inference.
        score_bias_init: initial value of `score_bias` (tfa suggests e.g. -4
            for long memories).
        seed: seed of the noise.

    Returns (call):
        float32 alignments `(B, S)` (summing to at most 1) and the state
        `{"alignments": ...}` (plus the noise seed when `sigmoid_noise > 0`).

    Example:

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
    ):
        scores.check_units(score, units, "query size")
        if mode not in MODES:
            raise ValueError(
                f"mode must be one of {', '.join(repr(m) for m in MODES)}. Received: mode={mode!r}"
            )
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
        if self.sigmoid_noise > 0:
            self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, query_shape, memory_shape):
        self.score_layer.build_for((None, 1, query_shape[-1]), tuple(memory_shape))
        self.score_bias = self.add_weight(
            name="score_bias",
            shape=(),
            initializer=keras.initializers.Constant(self.score_bias_init),
        )

    def prepare_keys(self, memory):
        return self.score_layer.prepare_keys(memory)

    def initial_state(self, keys, memory_mask):
        batch, length = ops.shape(keys)[0], ops.shape(keys)[1]
        state = {"alignments": ops.one_hot(ops.zeros((batch,), "int32"), length)}
        if self.sigmoid_noise > 0:
            seed = ops.cast(self.seed_generator.next(), "int32")
            state["noise_seed"] = ops.broadcast_to(seed, (batch, 2))
        return state

    def call(self, query, prepared_keys, memory, memory_mask, state, training=None):
        score = self.score_layer.pairwise(
            self.score_layer.prepare_query(ops.expand_dims(query, 1)), prepared_keys
        )
        score = ops.squeeze(ops.cast(score, "float32"), 1) + ops.cast(self.score_bias, "float32")
        next_state = {}
        if self.sigmoid_noise > 0:
            seed = state["noise_seed"]
            next_state["noise_seed"] = seed + ops.convert_to_tensor([0, 1], "int32")
            if training:
                noise = keras.random.normal(ops.shape(score), seed=_random.TensorSeed(seed[0]))
                score = score + self.sigmoid_noise * noise
        if self.mode == "hard":
            p_choose = ops.cast(score > 0, "float32")
        else:
            p_choose = ops.sigmoid(score)
        if memory_mask is not None:
            p_choose = ops.where(memory_mask, p_choose, 0.0)
        alignments = monotonic_alignments(p_choose, state["alignments"], self.mode)
        next_state["alignments"] = alignments
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


def _exclusive(values, cumulative):
    """The exclusive form of a cumulative op along the last axis: `[identity, c_0, .., c_{S-2}]`."""
    return ops.concatenate([ops.zeros_like(values[:, :1]), cumulative[:, :-1]], axis=-1)


def safe_cumprod_exclusive(x):
    """`exp(exclusive cumsum(log(clip(x, tiny, 1))))`: tfa's `safe_cumprod(x, exclusive=True)`."""
    logs = ops.log(ops.clip(x, np.finfo("float32").tiny, 1.0))
    return ops.exp(_exclusive(logs, ops.cumsum(logs, axis=-1)))


def monotonic_alignments(p_choose, previous, mode):
    """tfa's `monotonic_attention(p_choose_i, previous_attention, mode)` on `(B, S)` float32."""
    if mode == "parallel":
        cumprod = safe_cumprod_exclusive(1.0 - p_choose)
        return p_choose * cumprod * ops.cumsum(previous / ops.clip(cumprod, 1e-10, 1.0), axis=-1)
    if mode == "hard":
        p_choose = p_choose * ops.cumsum(previous, axis=-1)
        one_minus = 1.0 - p_choose
        cumprod = ops.concatenate(
            [ops.ones_like(one_minus[:, :1]), ops.cumprod(one_minus, axis=-1)[:, :-1]], axis=-1
        )
        return p_choose * cumprod
    # recursive: q_i = (1 - p_{i-1}) q_{i-1} + previous_i, a_i = p_i q_i
    shifted = ops.concatenate([ops.ones_like(p_choose[:, :1]), 1.0 - p_choose[:, :-1]], axis=-1)

    def step(carry, inputs):
        carry = inputs[0] * carry + inputs[1]
        return carry, carry

    _, q = ops.scan(
        step,
        ops.zeros_like(p_choose[:, 0]),
        (ops.transpose(shifted), ops.transpose(previous)),
    )
    return p_choose * ops.transpose(q)
