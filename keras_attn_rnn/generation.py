"""Text generation for `Seq2Seq` and `AttentiveLanguageModel` that carries state.

`generate(model, prompts, max_length, strategy=...)` decodes with greedy
search, temperature sampling, top-k, top-p (nucleus) sampling or beam search.
Decoding never re-runs the prefix: the model's step API does one RNN step plus
one attention over a cache per token, and the loop is a `keras.ops.while_loop`
(compiled with `tf.function` on TensorFlow, `jax.jit` on JAX).

Any object with this step API can be decoded (tests use fake models):

- `output_vocab_size` (and optionally `prompt_vocab_size`) attributes, and
  `is_seq2seq = True` for a model whose prompts are sources (then `start_id`
  is required and prompts are not compacted);
- `logits, weights, cache = model.init_cache(prompts, max_length, start_id)`:
  float32 logits `(B, V)` of the first generated token, its attention weights
  `(B, S)` and a cache, a nest of tensors whose leading axis is the batch;
- `logits, weights, cache = model.next_logits(token, cache)` for a `(B,)`
  int32 token.

Beam search repeats the cache `beam_width` times along the batch axis and
reorders it as beams are selected.
"""

import dataclasses
import random
import weakref

import keras
import numpy as np
from keras import ops

STRATEGIES = ("greedy", "sample", "top_k", "top_p", "beam")

# Log-probability of impossible continuations: finite, far below any sum of
# real log-probabilities (even of logits scaled by 1e9), never NaN.
_IMPOSSIBLE = -1e30

_NUMBERS = (int, float, np.integer, np.floating)

# model -> {options: compiled decoding function}; see `_decoding_function`.
_FUNCTIONS = weakref.WeakKeyDictionary()


@dataclasses.dataclass
class GenerationResult:
    """What `generate` returns (NumPy arrays).

    Attributes:
        tokens: int32 `(B, max_length)` generated ids (prompts excluded); id 0
            (padding) is never generated, and after `eos_id` (which is kept)
            the rest is 0. With beam search and
            `num_beams_returned=n > 1`: `(B, n, max_length)`, best first.
        scores: float32 `(B,)` (or `(B, n)`): the sum of the model's
            log-probabilities (temperature 1) of the generated tokens up to
            and including `eos_id`; for beam search, divided by the length
            penalty.
        attention: float32 `(B, max_length, S)` (or `(B, n, max_length, S)`):
            the attention weights behind each generated token (over the
            source for `Seq2Seq`, over the cache of past positions for the
            language model); zero after `eos_id`.
    """

    tokens: np.ndarray
    scores: np.ndarray
    attention: np.ndarray


# Longest generation: caches of `(batch, prompt + max_length, units)` are preallocated.
MAX_LENGTH = 1_000_000


def generate(
    model,
    prompts,
    max_length,
    strategy="greedy",
    temperature=1.0,
    k=None,
    p=None,
    beam_width=4,
    length_penalty=0.0,
    eos_id=None,
    start_id=None,
    seed=None,
    num_beams_returned=1,
    jit_compile=False,
):
    """Generates `max_length` tokens per prompt.

    Args:
        model: a `Seq2Seq`, an `AttentiveLanguageModel`, or any object with
            the step API in this module's docstring.
        prompts: for `Seq2Seq`, the source ids `(B, S)` (0-padded) or a list
            of id lists; for the language model, a list of token-id lists of
            any (non-zero) lengths, or a `(B, P)` array padded with 0.
        max_length: number of tokens to generate.
        strategy: `"greedy"`, `"sample"` (temperature sampling), `"top_k"`,
            `"top_p"` or `"beam"`.
        temperature: divides the logits before sampling; `0` is greedy.
        k: number of tokens `"top_k"` samples from, in `[1, V]`.
        p: probability mass of the nucleus `"top_p"` samples from, in
            `(0, 1]`.
        beam_width: number of beams of `"beam"`.
        length_penalty: `alpha` of the GNMT length penalty
            `((5 + length) / 6) ** alpha` that beam scores are divided by;
            `0` ranks by the plain sum of log-probabilities.
        eos_id: end-of-sequence id: a sequence stops after emitting it, and
            decoding stops once every sequence has.
        start_id: the first decoder input of `Seq2Seq` (required there); for
            the language model, prepended to every prompt if given.
        seed: int seed of the sampling strategies; the same seed gives the
            same tokens.
        num_beams_returned: how many of the best beams `"beam"` returns.
        jit_compile: on TensorFlow, compile the decoding function with XLA
            (it is a `tf.function` either way); on JAX the function is
            always `jax.jit`-compiled. Compiled functions are cached per model
            and options: later calls with the same shapes skip tracing.

    Returns:
        A `GenerationResult` with `tokens`, `scores` and `attention`.

    Example:

    >>> lm = keras_attn_rnn.models.AttentiveLanguageModel(vocab_size=20, units=8)
    >>> generate(lm, [[3, 4], [5]], max_length=4).tokens.shape
    (2, 4)
    """
    prompt_vocab, output_vocab, is_seq2seq = _vocabularies(model)
    if strategy not in STRATEGIES:
        raise ValueError(
            "strategy must be one of 'greedy', 'sample', 'top_k', 'top_p', 'beam'. "
            f"Received: strategy={strategy!r}"
        )
    _check_int("max_length", max_length, 1)
    if max_length > MAX_LENGTH:
        raise ValueError(
            f"max_length must be <= {MAX_LENGTH} (the caches are preallocated). "
            f"Received: max_length={max_length!r}"
        )
    _check_number("temperature", temperature)
    if temperature < 0:
        raise ValueError(
            f"temperature must be >= 0 (0 is greedy). Received: temperature={temperature!r}"
        )
    if strategy == "top_k" and not _is_int_in(k, 1, output_vocab):
        raise ValueError(
            f"strategy='top_k' needs k, an integer in [1, {output_vocab}] "
            f"(the vocabulary size). Received: k={k!r}"
        )
    if strategy == "top_p" and (
        p is None or isinstance(p, bool) or not isinstance(p, _NUMBERS) or not 0 < p <= 1
    ):
        raise ValueError(f"strategy='top_p' needs p, a float in (0, 1]. Received: p={p!r}")
    if strategy == "beam":
        _check_int("beam_width", beam_width, 1)
        _check_int("num_beams_returned", num_beams_returned, 1)
        if num_beams_returned > beam_width:
            raise ValueError(
                f"num_beams_returned must be at most beam_width={beam_width}. "
                f"Received: num_beams_returned={num_beams_returned!r}"
            )
        _check_number("length_penalty", length_penalty)
    for name, value in (("eos_id", eos_id), ("start_id", start_id)):
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, (int, np.integer))
            or not 0 <= value < output_vocab
        ):
            raise ValueError(
                f"{name} must be a token id in [0, {output_vocab}). Received: {name}={value!r}"
            )
    if is_seq2seq and start_id is None:
        raise ValueError(
            "start_id is required for a sequence-to-sequence model: it is the first "
            "decoder input. Received: start_id=None"
        )
    prompts = _prepare_prompts(prompts, prompt_vocab, compact=not is_seq2seq)
    if seed is None:
        seed = random.randint(0, 2**31 - 2)
    _check_int("seed", seed, 0)

    options = dict(
        max_length=int(max_length),
        start_id=None if start_id is None else int(start_id),
        eos_id=None if eos_id is None else int(eos_id),
    )
    if strategy == "beam":
        options.update(
            beam_width=int(beam_width),
            length_penalty=float(length_penalty),
            num_beams_returned=int(num_beams_returned),
        )
    else:
        options.update(
            strategy=strategy,
            temperature=float(temperature),
            k=int(k) if strategy == "top_k" else None,
            p=float(p) if strategy == "top_p" else None,
        )
    if not getattr(model, "built", True):
        # Build eagerly: variables must exist before the decoding function is traced.
        model.init_cache(prompts[:1, :1], 1, start_id=start_id)
    run = _decoding_function(model, options, bool(jit_compile))
    tokens, scores, attention = run(
        ops.convert_to_tensor(prompts, "int32"), ops.convert_to_tensor(seed % (2**31 - 1), "int32")
    )
    return GenerationResult(
        tokens=np.asarray(ops.convert_to_numpy(tokens)).astype("int32"),
        scores=np.asarray(ops.convert_to_numpy(scores)).astype("float32"),
        attention=np.asarray(ops.convert_to_numpy(attention)).astype("float32"),
    )


def _decoding_function(model, options, jit_compile):
    """The (cached) function `(prompts, seed) -> (tokens, scores, attention)`.

    On TensorFlow it is a `tf.function` (XLA with `jit_compile`), on JAX a
    `jax.jit` function; it is kept per model and options so that later calls
    reuse the compiled loop (training in between is seen: TensorFlow captures
    the variables by reference, JAX gets their values as arguments). It holds
    the model only weakly.
    """
    key = (tuple(sorted(options.items())), jit_compile)
    try:
        functions = _FUNCTIONS.setdefault(model, {})
    except TypeError:  # neither hashable nor weakly referable: no cache
        functions = {}
    if key in functions:
        return functions[key]
    model_ref = weakref.ref(model) if _weakly_referable(model) else (lambda: model)
    options = dict(options)
    if "beam_width" in options:

        def run(prompts, seed):
            return _beam_search(model_ref(), prompts, **options)
    else:
        choose = _chooser(
            options.pop("strategy"), options.pop("temperature"), options.pop("k"), options.pop("p")
        )

        def run(prompts, seed):
            return _sampling_loop(model_ref(), prompts, choose, seed, **options)

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        run = tf.function(run, jit_compile=jit_compile, reduce_retracing=True, autograph=False)
    elif keras.backend.backend() == "jax":
        run = _jax_jit(run, model_ref)
    functions[key] = run
    return run


def _jax_jit(run, model_ref):
    """`run` compiled by `jax.jit`, the model's variables passed in as arguments.

    Passing the values (through a `keras.StatelessScope`) instead of closing
    over them keeps the compiled function valid after the weights change.
    """
    import jax

    def stateless(values, prompts, seed):
        variables = _variables(model_ref())
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return run(prompts, seed)

    compiled = jax.jit(stateless)

    def call(prompts, seed):
        return compiled([v.value for v in _variables(model_ref())], prompts, seed)

    return call


def _variables(model):
    return list(getattr(model, "variables", None) or [])


def _weakly_referable(value):
    try:
        weakref.ref(value)
    except TypeError:
        return False
    return True


def _is_int_in(value, low, high):
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, np.integer))
        and low <= value <= high
    )


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}. Received: {name}={value!r}")


def _check_number(name, value):
    if isinstance(value, bool) or not isinstance(value, _NUMBERS) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number. Received: {name}={value!r}")


def _vocabularies(model):
    """`(prompt_vocab, output_vocab, is_seq2seq)` of a model with the step API."""
    if not (hasattr(model, "init_cache") and hasattr(model, "next_logits")):
        raise ValueError(
            "model must have the step API `init_cache` / `next_logits` (a Seq2Seq, an "
            f"AttentiveLanguageModel or compatible). Received: model={model!r}"
        )
    output_vocab = int(model.output_vocab_size)
    prompt_vocab = int(getattr(model, "prompt_vocab_size", output_vocab))
    return prompt_vocab, output_vocab, bool(getattr(model, "is_seq2seq", False))


def _prepare_prompts(prompts, vocab_size, compact):
    """Prompts as an int32 `(B, P)` array; with `compact`, each row's ids moved left."""
    if (
        isinstance(prompts, (list, tuple))
        and prompts
        and all(isinstance(row, (list, tuple, np.ndarray)) for row in prompts)
    ):
        rows = [np.asarray(row).reshape(-1) for row in prompts]
        width = max(len(row) for row in rows)
        array = np.zeros((len(rows), max(width, 1)), dtype="int64")
        for i, row in enumerate(rows):
            array[i, : len(row)] = row
    else:
        array = np.asarray(ops.convert_to_numpy(prompts) if hasattr(prompts, "shape") else prompts)
    if array.ndim != 2 or array.shape[0] == 0 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(
            "prompts must be a non-empty batch of token-id sequences: a list of id lists "
            f"or an int array (B, P). Received: prompts={_describe(prompts)}"
        )
    if array.size and (array.min() < 0 or array.max() >= vocab_size):
        raise ValueError(
            f"prompts must hold token ids in [0, {vocab_size}) (the model's vocabulary). "
            f"Received: prompts with ids in [{array.min()}, {array.max()}]"
        )
    if compact:
        lengths = (array != 0).sum(axis=1)
        if np.any(lengths == 0):
            raise ValueError(
                "every prompt must hold at least one token (id 0 is padding). "
                f"Received: empty prompts at rows {np.flatnonzero(lengths == 0).tolist()}"
            )
        packed = np.zeros((len(array), int(lengths.max())), dtype="int64")
        for i, row in enumerate(array):
            ids = row[row != 0]
            packed[i, : len(ids)] = ids
        array = packed
    return array.astype("int32")


def _describe(prompts):
    shape = getattr(prompts, "shape", None)
    if shape is not None:
        return f"an array of shape {tuple(shape)} and dtype {getattr(prompts, 'dtype', '?')}"
    return repr(prompts)[:200]


class _StepSeed(keras.random.SeedGenerator):
    """A seed tensor as a `SeedGenerator`: every random op drawing from it gets `seed`.

    Keras's random ops take an int or a `SeedGenerator`; inside a compiled loop
    the seed must be a tensor derived from the user's seed and the step.
    """

    def __init__(self, seed):  # no state variable: nothing to update in the loop
        self._seed = seed

    def next(self, ordered=True):
        return self._seed


def _seed_dtype():
    try:
        from keras.src.backend import random_seed_dtype

        return random_seed_dtype()
    except ImportError:  # pragma: no cover
        return "uint32" if keras.backend.backend() == "jax" else "int32"


def _gumbel(shape, seed, step):
    seed = ops.cast(ops.stack([seed, step]), _seed_dtype())
    uniform = keras.random.uniform(shape, minval=1e-20, maxval=1.0, seed=_StepSeed(seed))
    return -ops.log(-ops.log(uniform))


def _chooser(strategy, temperature, k, p):
    """`choose(logits (B, V) float32, seed, step) -> (B,) int32`."""
    if strategy == "greedy" or temperature == 0:
        return lambda logits, seed, step: ops.cast(ops.argmax(logits, axis=-1), "int32")

    def choose(logits, seed, step):
        logits = logits / temperature
        if strategy == "sample":
            noisy = logits + _gumbel(ops.shape(logits), seed, step)
            return ops.cast(ops.argmax(noisy, axis=-1), "int32")
        if strategy == "top_k":
            values, indices = ops.top_k(logits, k)
        else:
            values, indices = ops.top_k(logits, ops.shape(logits)[-1])
            if p < 1:
                probs = ops.softmax(values, axis=-1)
                before = ops.cumsum(probs, axis=-1) - probs
                values = ops.where(ops.less(before, p), values, _IMPOSSIBLE)
        choice = ops.argmax(values + _gumbel(ops.shape(values), seed, step), axis=-1)
        token = ops.take_along_axis(indices, ops.expand_dims(choice, -1), axis=-1)
        return ops.cast(ops.squeeze(token, -1), "int32")

    return choose


def _sampling_loop(model, prompts, choose, seed, max_length, start_id, eos_id):
    logits, weights, cache = model.init_cache(prompts, max_length, start_id=start_id)
    batch = ops.shape(logits)[0]
    tokens = ops.zeros((batch, max_length), "int32")
    history = ops.zeros((batch, max_length, ops.shape(weights)[-1]), "float32")
    scores = ops.zeros((batch,), "float32")
    done = ops.zeros((batch,), "bool")
    step = ops.convert_to_tensor(0, "int32")

    def cond(step, logits, weights, cache, tokens, history, scores, done):
        return ops.logical_and(ops.less(step, max_length), ops.logical_not(ops.all(done)))

    def body(step, logits, weights, cache, tokens, history, scores, done):
        logits = _without_padding(logits)
        token = choose(logits, seed, step)
        log_probs = ops.log_softmax(logits, axis=-1)
        token_log_prob = ops.squeeze(
            ops.take_along_axis(log_probs, ops.expand_dims(token, -1), axis=-1), -1
        )
        token = ops.where(done, 0, token)
        scores = scores + ops.where(done, 0.0, token_log_prob)
        tokens = ops.slice_update(tokens, [0, step], ops.expand_dims(token, 1))
        kept = ops.where(ops.expand_dims(done, -1), 0.0, ops.cast(weights, "float32"))
        history = ops.slice_update(history, [0, step, 0], ops.expand_dims(kept, 1))
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
    return loop[4], loop[6], loop[5]


def _without_padding(logits):
    """float32 logits with id 0 (padding) made impossible: it is never generated."""
    logits = ops.cast(logits, "float32")
    return ops.where(ops.equal(ops.arange(ops.shape(logits)[-1]), 0), _IMPOSSIBLE, logits)


def _length_penalty(lengths, alpha):
    if alpha == 0:
        return ops.ones(ops.shape(lengths), "float32")
    return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, alpha)


def _backtrack(tokens, parents, history, beams):
    """Follows parent pointers from the last step back to the first (tfa's
    `gather_tree`). `tokens`, `parents`: `(T, B, W)`; `history`: `(T, B, W, S)`;
    `beams`: `(B, n)` chosen beams at the last step. Returns `(B, n, T)` tokens
    and `(B, n, T, S)` alignments."""
    steps = ops.shape(tokens)[0]

    def body(i, carry):
        beams, out_tokens, out_history = carry
        t = steps - 1 - i
        out_tokens = ops.slice_update(
            out_tokens, [t, 0, 0], ops.expand_dims(ops.take_along_axis(tokens[t], beams, 1), 0)
        )
        step_history = ops.take_along_axis(history[t], ops.expand_dims(beams, -1), 1)
        out_history = ops.slice_update(out_history, [t, 0, 0, 0], ops.expand_dims(step_history, 0))
        return ops.take_along_axis(parents[t], beams, 1), out_tokens, out_history

    shape = (steps, ops.shape(beams)[0], ops.shape(beams)[1])
    init = (
        beams,
        ops.zeros(shape, "int32"),
        ops.zeros((*shape, ops.shape(history)[-1]), "float32"),
    )
    _, out_tokens, out_history = ops.fori_loop(0, steps, body, init)
    return ops.transpose(out_tokens, (1, 2, 0)), ops.transpose(out_history, (1, 2, 0, 3))


def _beam_search(
    model, prompts, max_length, start_id, eos_id, beam_width, length_penalty, num_beams_returned
):
    width = beam_width
    logits, weights, cache = model.init_cache(prompts, max_length, start_id=start_id)
    batch, vocab = ops.shape(logits)[0], ops.shape(logits)[1]
    source = ops.shape(weights)[-1]

    def repeat(x):
        return ops.repeat(x, width, axis=0)

    logits, weights, cache = (
        repeat(logits),
        repeat(weights),
        keras.tree.map_structure(repeat, cache),
    )
    # Only beam 0 is alive at first, so the first step expands one hypothesis.
    log_probs = ops.tile(
        ops.expand_dims(ops.concatenate([ops.zeros((1,)), ops.full((width - 1,), _IMPOSSIBLE)]), 0),
        (batch, 1),
    )
    # Per step (step-major): each beam's token, parent beam and alignment. The
    # sequences are recovered by one backtrack at the end (tfa's gather_tree),
    # so no step reorders the whole history.
    tokens = ops.zeros((max_length, batch, width), "int32")
    parents = ops.broadcast_to(ops.arange(width, dtype="int32"), (max_length, batch, width))
    history = ops.zeros((max_length, batch, width, source), "float32")
    lengths = ops.zeros((batch, width), "int32")
    finished = ops.zeros((batch, width), "bool")
    # A finished beam continues only with padding, at no cost.
    pad_only = ops.where(ops.equal(ops.arange(vocab), 0), 0.0, _IMPOSSIBLE)
    offsets = ops.expand_dims(ops.arange(batch, dtype="int32") * width, 1)
    step = ops.convert_to_tensor(0, "int32")

    def cond(step, logits, weights, cache, log_probs, tokens, parents, history, lengths, finished):
        return ops.logical_and(ops.less(step, max_length), ops.logical_not(ops.all(finished)))

    def body(step, logits, weights, cache, log_probs, tokens, parents, history, lengths, finished):
        step_log_probs = ops.log_softmax(_without_padding(logits), axis=-1)
        step_log_probs = ops.reshape(step_log_probs, (batch, width, vocab))
        step_log_probs = ops.where(ops.expand_dims(finished, -1), pad_only, step_log_probs)
        candidates = ops.expand_dims(log_probs, -1) + step_log_probs
        candidate_lengths = lengths + ops.cast(ops.logical_not(finished), "int32")
        ranked = candidates / ops.expand_dims(
            _length_penalty(candidate_lengths, length_penalty), -1
        )
        _, best = ops.top_k(ops.reshape(ranked, (batch, width * vocab)), width)
        parent = best // vocab
        token = ops.cast(best % vocab, "int32")
        log_probs = ops.take_along_axis(ops.reshape(candidates, (batch, width * vocab)), best, 1)
        lengths = ops.take_along_axis(candidate_lengths, parent, axis=1)
        parent_finished = ops.take_along_axis(finished, parent, axis=1)
        finished = parent_finished
        if eos_id is not None:
            finished = ops.logical_or(finished, ops.equal(token, eos_id))

        flat_parent = ops.reshape(offsets + ops.cast(parent, "int32"), (-1,))
        tokens = ops.slice_update(tokens, [step, 0, 0], ops.expand_dims(token, 0))
        parents = ops.slice_update(
            parents, [step, 0, 0], ops.expand_dims(ops.cast(parent, "int32"), 0)
        )
        kept = ops.reshape(
            ops.take(ops.cast(weights, "float32"), flat_parent, axis=0), (batch, width, source)
        )
        kept = ops.where(ops.expand_dims(parent_finished, -1), 0.0, kept)
        history = ops.slice_update(history, [step, 0, 0, 0], ops.expand_dims(kept, 0))
        cache = keras.tree.map_structure(lambda x: ops.take(x, flat_parent, axis=0), cache)
        logits, weights, cache = model.next_logits(ops.reshape(token, (-1,)), cache)
        return (
            step + 1,
            logits,
            weights,
            cache,
            log_probs,
            tokens,
            parents,
            history,
            lengths,
            finished,
        )

    loop = ops.while_loop(
        cond,
        body,
        (step, logits, weights, cache, log_probs, tokens, parents, history, lengths, finished),
        maximum_iterations=max_length,
    )
    log_probs, tokens, parents, history, lengths = loop[4], loop[5], loop[6], loop[7], loop[8]
    final = log_probs / _length_penalty(lengths, length_penalty)
    scores, order = ops.top_k(final, num_beams_returned)
    tokens, history = _backtrack(tokens, parents, history, ops.cast(order, "int32"))
    if num_beams_returned == 1:
        return tokens[:, 0], scores[:, 0], history[:, 0]
    return tokens, scores, history
