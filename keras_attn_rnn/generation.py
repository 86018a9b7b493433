"""Text generation for `Seq2Seq` and `AttentiveLanguageModel` that carries state.

`generate(model, prompts, max_length, sampler=...)` decodes with a sampler of
`keras_attn_rnn.samplers` (greedy, temperature sampling, top-k, top-p, beam
search, or your own). Decoding never re-runs the prefix: the model's step API
does one RNN step plus one attention over a cache per token, and the loop is
a `keras.ops.while_loop`, compiled for the backend (`tf.function` on
TensorFlow, `jax.jit` on JAX; on PyTorch eager, or with `jit_compile=True` a
`torch.compile`d decoding step).

Any object with the step API (`init_cache` / `next_logits`, described by
`keras_attn_rnn.stepping.StepModel`) can be decoded; tests use fake models.
"""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
from keras import ops

from keras_attn_rnn import _compilation, copying, samplers
from keras_attn_rnn.samplers.sampler import check_int
from keras_attn_rnn.tokenizers.tokenizer import is_text

# Longest generation: caches of `(batch, prompt + max_length, units)` are preallocated.
MAX_LENGTH = 1_000_000


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
        p_gen: for a `Seq2Seq(copy=True)`, float32 `(B, max_length)` (or
            `(B, n, max_length)`): the probability of generating rather than
            copying behind each token, of each returned beam; zero after
            `eos_id`. None for other models.
    """

    tokens: np.ndarray
    scores: np.ndarray
    attention: np.ndarray
    p_gen: np.ndarray | None = None


def generate(
    model,
    prompts,
    max_length,
    sampler="greedy",
    eos_id=None,
    start_id=None,
    seed=None,
    jit_compile=False,
    min_length=None,
    source_ext=None,
):
    """Generates `max_length` tokens per prompt.

    Args:
        model: a `Seq2Seq`, an `AttentiveLanguageModel`, a generator of
            `keras_attn_rnn.generators`, or any object with the step API in
            this module's docstring.
        prompts: for `Seq2Seq`, the source ids `(B, S)` (0-padded) or a list
            of id lists; for the language model, a list of token-id lists of
            any (non-zero) lengths, or a `(B, P)` array padded with 0.
        max_length: number of tokens to generate.
        sampler: the decoding strategy: a `keras_attn_rnn.samplers.Sampler`
            (`samplers.TopKSampler(k=5)`, `samplers.BeamSampler(4,
            length_penalty=0.6)`), its config (`samplers.serialize`), or the
            name of one built with its defaults (`"greedy"`, `"sample"`,
            `"beam"`; `samplers.get("top_k", k=5)` for one with arguments).
        eos_id: end-of-sequence id: a sequence stops after emitting it, and
            decoding stops once every sequence has.
        start_id: the first decoder input of `Seq2Seq` (required there); for
            the language model, prepended to every prompt if given.
        seed: int seed of the sampling strategies; the same seed gives the
            same tokens.
        jit_compile: on TensorFlow, compile the decoding function with XLA
            (it is a `tf.function` either way); on JAX the function is
            always `jax.jit`-compiled; on PyTorch the loop runs eagerly and
            `jit_compile=True` compiles the model's decoding step with
            `torch.compile` (worth it for long generations: ~1.6x faster per
            token on CPU, after tens of seconds of compiling on the first call).
            Compiled functions are cached per model and sampler config: later
            calls with the same shapes skip tracing.
        min_length: an int, or one per prompt (a `(B,)` int array): a sequence
            cannot end (emit `eos_id`) before it holds that many tokens, as if
            `eos_id` had no probability until then (the scores are of those
            renormalised distributions). Needs `eos_id`. With
            `min_length = max_length` no sequence ends early; with each row's
            true target length and then cut there, it decodes with the output
            length given (the "oracle length" evaluation of Newman et al.,
            2020, "The EOS Decision and Length Extrapolation").
        source_ext: for a `Seq2Seq(copy=True)`, the source in extended ids
            (`(B, S)`, ids in `[0, target_vocabulary_size + max_oov)`: each
            example's words outside the target vocabulary numbered from
            `target_vocabulary_size`;
            see `keras_attn_rnn.copying`); default: the prompts themselves.
            The model then decodes over the extended vocabulary: a generated
            id `>= target_vocabulary_size` is the source word with that extended id.

    Returns:
        A `GenerationResult` with `tokens`, `scores` and `attention` (and, for
            a copy model, `p_gen`).

    Examples:
        >>> from keras_attn_rnn import models, samplers
        >>> from keras_attn_rnn.generation import generate
        >>> lm = models.AttentiveLanguageModel(vocabulary_size=20, units=8)
        >>> generate(lm, [[3, 4], [5]], max_length=4).tokens.shape
        (2, 4)
        >>> generate(lm, [[3, 4]], 4, sampler=samplers.TopKSampler(k=5), seed=1).tokens.shape
        (1, 4)
    """
    prompt_vocab, output_vocab, is_seq2seq = _vocabularies(model)
    sampler = samplers.get(sampler, vocabulary_size=output_vocab)
    check_int("max_length", max_length, 1)
    if max_length > MAX_LENGTH:
        raise ValueError(
            f"max_length must be <= {MAX_LENGTH} (the caches are preallocated). "
            f"Received: max_length={max_length!r}"
        )
    for name, value in (("eos_id", eos_id), ("start_id", start_id)):
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, (int, np.integer))
            or not 0 <= value < output_vocab
        ):
            raise ValueError(
                f"{name} must be a token id in [0, {output_vocab}). Received: {name}={value!r}"
            )
    prompts = _prepare_prompts(prompts, prompt_vocab, compact=not is_seq2seq)
    if is_seq2seq and start_id is None:
        raise ValueError(
            "start_id is required for a sequence-to-sequence model: it is the first "
            "decoder input. Received: start_id=None"
        )
    copies = bool(getattr(model, "copy", False))
    source, extended = prompts, _source_ext(source_ext, prompts, model, copies)
    if copies and extended is None:
        copying.check_extended_ids(prompts, _extended_size(model), note=copying.SOURCE_AS_EXTENDED)
        extended = prompts  # one input shape for a copy model: one compiled function
    min_length = _min_lengths(min_length, len(prompts), eos_id)
    if seed is None:
        seed = random.randint(0, 2**31 - 2)
    check_int("seed", seed, 0)

    decoding = dict(
        max_length=int(max_length),
        start_id=None if start_id is None else int(start_id),
        eos_id=None if eos_id is None else int(eos_id),
    )
    if not getattr(model, "built", True):
        # Build eagerly: variables must exist before the decoding function is traced.
        model.init_cache(prompts[:1, :1], 1, start_id=start_id)

    def run(model, prompts, seed, *min_length):
        # `min_length` only when asked: a sampler's own `__call__` may not take it
        extra = {"min_length": min_length[0]} if min_length else {}
        return sampler(model, prompts, seed=seed, **decoding, **extra)

    key = (_sampler_key(sampler), tuple(sorted(decoding.items())), min_length is not None)
    function = _compilation.compiled(model, key, run, jit_compile)
    if extended is not None:
        prompts = np.stack([prompts, extended], axis=1)  # Seq2Seq.init_cache splits them
    tensors = [
        ops.convert_to_tensor(prompts, "int32"),
        ops.convert_to_tensor(seed % (2**31 - 1), "int32"),
    ]
    if min_length is not None:
        tensors.append(ops.convert_to_tensor(min_length, "int32"))
    tokens, scores, attention = function(*tensors)
    tokens = np.asarray(ops.convert_to_numpy(tokens)).astype("int32")
    return GenerationResult(
        tokens=tokens,
        scores=np.asarray(ops.convert_to_numpy(scores)).astype("float32"),
        attention=np.asarray(ops.convert_to_numpy(attention)).astype("float32"),
        p_gen=_p_gen(model, source, tokens, start_id) if copies else None,
    )


def _source_ext(source_ext, source, model, copies):
    """`source_ext` checked against the source `(B, S)` as an int32 array, or None."""
    if source_ext is None:
        return None
    if not copies:
        raise ValueError(
            "source_ext is the source in the extended ids of copy attention: it needs a "
            f"Seq2Seq with copy=True. Received: source_ext for model={type(model).__name__}"
        )
    array = np.asarray(
        ops.convert_to_numpy(source_ext) if hasattr(source_ext, "shape") else source_ext
    )
    if array.shape != source.shape or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(
            f"source_ext must be an int array of the source's shape {source.shape}. "
            f"Received: source_ext={_describe(source_ext)}"
        )
    copying.check_extended_ids(array, _extended_size(model))
    return array.astype("int32")


def _extended_size(model):
    return int(model.output_vocab_size) + int(model.num_oov)


def _p_gen(model, source, tokens, start_id):
    """Each returned sequence's `p_gen` per token, by one teacher-forced pass over it."""
    rows = tokens.reshape(-1, tokens.shape[-1])
    source = np.repeat(source, len(rows) // len(source), axis=0)  # a row per returned beam
    p_gen = model.copy_probabilities(source, rows, start_id)
    return np.asarray(ops.convert_to_numpy(p_gen), "float32").reshape(tokens.shape)


def _sampler_key(sampler):
    """Samplers with equal configs decode alike: one compiled function serves them."""
    return type(sampler), json.dumps(sampler.get_config(), sort_keys=True, default=str)


def _min_lengths(min_length, batch, eos_id):
    """`min_length` as an int32 `(batch,)` array, or None."""
    if min_length is None:
        return None
    if eos_id is None:
        raise ValueError(
            "min_length needs eos_id: it forbids eos_id before that many tokens. "
            f"Received: min_length={_describe(min_length)} and eos_id=None"
        )
    if isinstance(min_length, (int, np.integer)) and not isinstance(min_length, bool):
        check_int("min_length", min_length, 0)
        return np.full((batch,), min(int(min_length), MAX_LENGTH), "int32")
    array = np.asarray(min_length)
    if (
        array.shape != (batch,)
        or not np.issubdtype(array.dtype, np.integer)
        or (array.size and array.min() < 0)
    ):
        raise ValueError(
            f"min_length must be an integer >= 0 or one per prompt (an int array of shape "
            f"({batch},) with values >= 0). Received: min_length={_describe(min_length)}"
        )
    return np.minimum(array, MAX_LENGTH).astype("int32")


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


def generate_text(
    model, preprocessor, inputs, max_length=None, sampler="greedy", strip_prompt=False, **options
):
    """`generate` from strings to strings, through a preprocessor.

    `inputs` (a string, or a list of them: a `Seq2Seq`'s sources, a language model's
    prompts) become ids with `preprocessor.generate_preprocess`; `generate` decodes them
    with the preprocessor's start and end ids (`generation_options`) unless `options`
    says otherwise; `preprocessor.generate_postprocess` turns the tokens (the best beam's)
    back into text. A string in gives a string back, a list a list.

    Args:
        model: a model with the step API (a ready model, a generator).
        preprocessor: a `keras_attn_rnn.preprocessors` preprocessor of that model.
        inputs: a string or a list of strings (bytes are read as UTF-8).
        max_length: the most tokens generated; default the preprocessor's
            (`default_max_length`).
        sampler: as `generate` takes it.
        strip_prompt: a language model returns each prompt followed by its
            continuation; with True, the continuation alone (as keras-hub's
            `generate(strip_prompt=True)`). A `Seq2Seq` never returns its source.
        **options: the other arguments of `generate`.
    """
    if preprocessor is None:
        raise ValueError(
            f"{type(model).__name__}.generate takes strings only with a preprocessor: give "
            "the model (or generator) preprocessor=..., or pass token ids. "
            "Received: preprocessor=None"
        )
    if getattr(model, "copy", False):
        raise ValueError(
            "generating from strings does not encode copy attention's extended source yet: "
            "pass ids and source_ext (see keras_attn_rnn.copying). Received: a model with "
            "copy=True"
        )
    _check_bool("strip_prompt", strip_prompt)
    if max_length is not None:
        check_int("max_length", max_length, 1)
    single = isinstance(inputs, (str, bytes))
    ids = preprocessor.generate_preprocess(inputs)
    options = {**preprocessor.generation_options(), **options}
    max_length = preprocessor.default_max_length() if max_length is None else max_length
    result = generate(model, ids, max_length, sampler=sampler, **options)
    tokens = result.tokens[:, 0] if result.tokens.ndim == 3 else result.tokens  # best beam
    texts = preprocessor.generate_postprocess(tokens, prompts=None if strip_prompt else ids)
    return texts[0] if single else texts


def generate_any(
    model,
    preprocessor,
    inputs,
    max_length=None,
    *,
    stop_token_ids="auto",
    strip_prompt=False,
    default_max_length=None,
    **options,
):
    """What a model's (or generator's) `generate` does, keras-hub's arguments included:
    strings through `generate_text`, token ids through `generate`.

    Args:
        model: a model with the step API.
        preprocessor: its preprocessor, or None.
        inputs: a string or a list of strings (with a preprocessor; bytes are read
            as UTF-8), or token ids (a list of id lists, an int array `(B, P)`).
        max_length: the most tokens generated (an int >= 1); None: the
            preprocessor's default, else `default_max_length`.
        stop_token_ids: keras-hub's: `"auto"` (the default) stops at `eos_id` when
            given, else at the preprocessor's end id (no stop without either);
            `None` never stops early; one id (an int, or a list or tuple of one)
            stops there. Only one stop id is supported.
        strip_prompt: see `generate_text` (strings only; ids give only the
            generated tokens either way).
        default_max_length: the `max_length` of ids without a preprocessor, or
            None to require one.
        **options: `generate`'s other arguments (`sampler`, `eos_id`, `start_id`,
            `seed`, ...); with a preprocessor, `start_id` and `eos_id` default to its
            tokenizer's, for ids as for strings.
    """
    _check_inputs(inputs)
    _check_bool("strip_prompt", strip_prompt)
    if max_length is not None:
        check_int("max_length", max_length, 1)
    options = _stop_options(stop_token_ids, options)
    if is_text(inputs):
        return generate_text(
            model, preprocessor, inputs, max_length, strip_prompt=strip_prompt, **options
        )
    if preprocessor is not None:
        options = {**preprocessor.generation_options(), **options}
        max_length = preprocessor.default_max_length() if max_length is None else max_length
    if max_length is None:
        max_length = default_max_length
    if max_length is None:
        raise ValueError(
            "max_length is required when generating from ids. Received: max_length=None"
        )
    return generate(model, inputs, max_length, **options)


def _check_inputs(inputs):
    """Raises unless `inputs` looks like strings or token ids (ids are checked by
    `generate` itself)."""
    if hasattr(inputs, "element_spec"):
        raise ValueError(
            "inputs must be strings or token ids, not a tf.data.Dataset: generate from each "
            "of its batches (for batch in dataset.as_numpy_iterator()). "
            f"Received: inputs={_describe(inputs)}"
        )
    empty = isinstance(inputs, (list, tuple)) and not inputs
    if inputs is None or empty or isinstance(inputs, (dict, set)):
        raise ValueError(
            "inputs must be a string or a non-empty list of strings (with a preprocessor), "
            "or token ids: a list of id lists or an int array (B, P). "
            f"Received: inputs={_describe(inputs)}"
        )


def _stop_options(stop_token_ids, options):
    """`options` with keras-hub's `stop_token_ids` turned into `eos_id`."""
    if isinstance(stop_token_ids, str) and stop_token_ids == "auto":
        return options
    if stop_token_ids is None:
        ids = []
    elif isinstance(stop_token_ids, (list, tuple)):
        ids = list(stop_token_ids)
    else:
        ids = [stop_token_ids]
    if len(ids) > 1 or any(
        isinstance(i, bool) or not isinstance(i, (int, np.integer)) for i in ids
    ):
        raise ValueError(
            'stop_token_ids must be "auto", None, or one token id (an int, or a list or '
            "tuple of one: several stop ids are not supported). "
            f"Received: stop_token_ids={stop_token_ids!r}"
        )
    eos_id = int(ids[0]) if ids else None
    if options.get("eos_id") is not None and options["eos_id"] != eos_id:
        raise ValueError(
            "stop_token_ids and eos_id name the same thing: give one. "
            f"Received: stop_token_ids={stop_token_ids!r}, eos_id={options['eos_id']!r}"
        )
    return {**options, "eos_id": eos_id}


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False. Received: {name}={value!r}")


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
