"""The `Sampler` base class: a decoding strategy that runs the generation loop."""

import warnings

import keras
import numpy as np
from keras import ops

from keras_attn_rnn import _compilation, _random, serializable

# Log-probability of impossible continuations: finite, far below any sum of
# real log-probabilities (even of logits scaled by 1e9), never NaN.
IMPOSSIBLE = -1e30

_NUMBERS = (int, float, np.integer, np.floating)


def check_number(name, value):
    """Raises unless `value` is a finite real number."""
    if isinstance(value, bool) or not isinstance(value, _NUMBERS) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number. Received: {name}={value!r}")


def check_int(name, value, minimum):
    """Raises unless `value` is an integer `>= minimum`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}. Received: {name}={value!r}")


def _check_temperature(temperature):
    check_number("temperature", temperature)
    if temperature < 0:
        raise ValueError(
            f"temperature must be >= 0 (0 is greedy). Received: temperature={temperature!r}"
        )


@serializable.register
class Sampler:
    """Base class of the decoding strategies of `keras_attn_rnn.generation.generate`.

    A sampler runs the generation loop over a model's step API (see
    `keras_attn_rnn.generation`): each step it turns the model's next-token
    logits into one token per row, feeds it back, and records the token, its
    log-probability and the attention weights behind it. The loop is a
    `keras.ops.while_loop`, compiled by `generate` for the backend.

    To add a strategy, subclass `Sampler` and override
    `get_next_token(logits, seed)`; `get_config` must return the constructor
    arguments (for `samplers.serialize`). Override `__call__` only for a
    strategy that is not one token per row per step (as `BeamSampler` does).

    Args:
        temperature: the logits are divided by it before `get_next_token`;
            `0` takes the most likely token (greedy).

    Call arguments:
        - model: an object with the step API (`init_cache`, `next_logits`).
        - prompts: int32 `(B, P)` prompt (or source) ids.
        - max_length: number of tokens to generate (a Python int).
        - start_id: the first decoder input (`Seq2Seq`), or None.
        - eos_id: end-of-sequence id, or None.
        - seed: int32 scalar tensor, the seed of this generation.
        - min_length: int32 `(B,)` tensor, or None: row `b` cannot generate
              `eos_id` before it holds `min_length[b]` tokens (`generate` passes
              it only when asked, so a subclass's own `__call__` without it still
              works); apply it to the logits with `without_early_eos`.

    Returns:
        tokens: int32 `(B, max_length)` (see `GenerationResult`).
        scores: float32 `(B,)`.
        attention: float32 `(B, max_length, S)`.

    Examples:
        >>> from keras_attn_rnn.generation import generate
        >>> from keras_attn_rnn.models import AttentiveLanguageModel
        >>> from keras_attn_rnn.samplers import Sampler, gumbel_noise
        >>> class MarginSampler(Sampler):
        ...     # Samples among the tokens whose logit is within `margin` of the best.
        ...     def __init__(self, margin=2.0, **kwargs):
        ...         super().__init__(**kwargs)
        ...         self.margin = margin
        ...     def get_next_token(self, logits, seed):
        ...         best = keras.ops.max(logits, axis=-1, keepdims=True)
        ...         kept = keras.ops.where(logits >= best - self.margin, logits, -1e30)
        ...         noise = gumbel_noise(keras.ops.shape(kept), seed)
        ...         return keras.ops.argmax(kept + noise, axis=-1)
        ...     def get_config(self):
        ...         return {**super().get_config(), "margin": self.margin}
        >>> lm = AttentiveLanguageModel(vocabulary_size=20, units=8)
        >>> generate(lm, [[3, 4]], max_length=5, sampler=MarginSampler(margin=1.0)).tokens.shape
        (1, 5)
    """

    def __init__(self, temperature=1.0):
        _check_temperature(temperature)
        self.temperature = float(temperature)

    # {older argument name: its name now}: still accepted, with a `DeprecationWarning`.
    renamed_arguments = {}

    @classmethod
    def current_arguments(cls, arguments):
        """`arguments` (a dict of constructor arguments) with each deprecated name of
        `renamed_arguments` replaced by its new one (with a `DeprecationWarning`); raises
        when both are given."""
        arguments = dict(arguments)
        for old, new in cls.renamed_arguments.items():
            if old not in arguments:
                continue
            if new in arguments:
                raise ValueError(
                    f"{new} or the deprecated {old}, not both. "
                    f"Received: {new}={arguments[new]!r}, {old}={arguments[old]!r}"
                )
            warnings.warn(
                f"{cls.__name__}: {old} is deprecated: use {new} (keras-hub's name)",
                DeprecationWarning,
                stacklevel=4,
            )
            arguments[new] = arguments.pop(old)
        return arguments

    @classmethod
    def check_arguments(cls, arguments, vocabulary_size=None):
        """Raises a `ValueError` naming a bad constructor argument in `arguments` (a dict).

        `vocabulary_size`, when known, bounds arguments counted in tokens.
        """
        _check_temperature(arguments.get("temperature", 1.0))

    def check_vocabulary(self, vocabulary_size):
        """Raises if this sampler cannot decode a vocabulary of `vocabulary_size` tokens."""
        self.check_arguments(self.get_config(), vocabulary_size)

    def get_next_token(self, logits, seed):
        """The hook a strategy overrides: one token per row.

        Args:
            logits: float32 `(B, V)`, already divided by `temperature`; the
                padding id 0 is impossible (`-1e30`).
            seed: the seed of this step, for `keras.random` ops
                (`keras.random.categorical(logits, 1, seed=seed)`) or
                `gumbel_noise(shape, seed)`; the same generation seed gives
                the same draws.

        Returns:
            `(B,)` integer token ids.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must override get_next_token(logits, seed). "
            f"Received: a {type(self).__name__} without it"
        )

    def next_token(self, logits, seed, step):
        """`get_next_token` on tempered logits (argmax at temperature 0), as int32."""
        if self.temperature == 0:
            return ops.cast(ops.argmax(logits, axis=-1), "int32")
        step_seed = _random.TensorSeed(ops.stack([ops.cast(seed, "int32"), step]))
        token = self.get_next_token(logits / self.temperature, step_seed)
        return ops.cast(token, "int32")

    def __call__(
        self, model, prompts, max_length, start_id=None, eos_id=None, seed=0, min_length=None
    ):
        logits, weights, cache = model.init_cache(prompts, max_length, start_id=start_id)
        batch = ops.shape(logits)[0]
        tokens = _compilation.new_record(max_length, (batch,), "int32")
        history = _compilation.new_record(max_length, (batch, ops.shape(weights)[-1]), "float32")
        scores = ops.zeros((batch,), "float32")
        done = ops.zeros((batch,), "bool")
        step = ops.convert_to_tensor(0, "int32")

        def cond(step, logits, weights, cache, tokens, history, scores, done):
            return ops.logical_and(ops.less(step, max_length), ops.logical_not(ops.all(done)))

        def body(step, logits, weights, cache, tokens, history, scores, done):
            logits = without_padding(logits)
            if min_length is not None and eos_id is not None:
                logits = without_early_eos(logits, step, min_length, eos_id)
            token = self.next_token(logits, seed, step)
            log_probs = ops.log_softmax(logits, axis=-1)
            token_log_prob = ops.squeeze(
                ops.take_along_axis(log_probs, ops.expand_dims(token, -1), axis=-1), -1
            )
            token = ops.where(done, 0, token)
            scores = scores + ops.where(done, 0.0, token_log_prob)
            tokens = _compilation.write_record(tokens, step, token)
            kept = ops.where(ops.expand_dims(done, -1), 0.0, ops.cast(weights, "float32"))
            history = _compilation.write_record(history, step, kept)
            if eos_id is not None:
                done = ops.logical_or(done, ops.equal(token, eos_id))
            logits, weights, cache = model.next_logits(token, cache)
            return step + 1, logits, weights, cache, tokens, history, scores, done

        loop = ops.while_loop(
            cond,
            body,
            (step, logits, weights, cache, tokens, history, scores, done),
            maximum_iterations=max_length,
        )
        tokens = ops.transpose(_compilation.stack_record(loop[4]))
        history = ops.transpose(_compilation.stack_record(loop[5]), (1, 0, 2))
        return tokens, loop[6], history

    def get_config(self):
        return {"temperature": self.temperature}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def without_padding(logits):
    """float32 logits with id 0 (padding) made impossible: it is never generated."""
    logits = ops.cast(logits, "float32")
    return ops.where(ops.equal(ops.arange(ops.shape(logits)[-1]), 0), IMPOSSIBLE, logits)


def without_early_eos(logits, step, min_length, eos_id):
    """float32 logits `(B, V)` with `eos_id` impossible in the rows that hold fewer than
    `min_length` `(B,)` tokens at `step` (the number of tokens generated so far)."""
    early = ops.expand_dims(ops.less(step, min_length), -1)
    is_eos = ops.equal(ops.arange(ops.shape(logits)[-1]), eos_id)
    return ops.where(ops.logical_and(early, is_eos), IMPOSSIBLE, logits)


def gumbel_noise(shape, seed):
    """Gumbel(0, 1) noise: `argmax(logits + noise)` samples from `softmax(logits)`."""
    uniform = keras.random.uniform(shape, minval=1e-20, maxval=1.0, seed=seed)
    return -ops.log(-ops.log(uniform))
