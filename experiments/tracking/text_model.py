"""The text model of a run: raw strings in; generated text, or a label, with the attention out.

This file is an MLflow "model from code" (logged by
`experiments.tracking.model_logging`): MLflow stores the file itself and runs it
when the model is loaded, so nothing is pickled. It imports only MLflow,
Keras, NumPy, pandas and `keras_attn_rnn`, which travels
with the model as its `code_paths`; the runner is not needed to load or
serve it (it never imports `experiments`). Its artifacts are the trained
model (`model`: a `.keras` file, loaded with `safe_mode=True`) and the run's
text card (`card`: JSON, made by `TaskKind.text_card`): the vocabularies,
how text becomes ids (the Keras config of the run's `keras_attn_rnn.tokenizers`
tokenizer: the one the library, the runner and this model share),
the kind, the class names, the start/end ids and the generation defaults.

Input: strings, as a list, a pandas Series or a one-column DataFrame (what
`{"inputs": [...]}` becomes through `mlflow models serve`). Output, one
record per string:

- seq2seq and language models: `text` (the generation, up to the end id),
  `tokens` (its tokens), `attention` (one row per generated token over
  `attended_tokens`: the source tokens, or for a language model the prompt
  and the tokens generated before), `score` (the summed log-probability);
  a copy-attention model (the card's `copy`) reads each string in extended
  ids too (`Tokenizer.encode_extended`: its words unknown to the vocabulary
  get ids past it), so it can write those words, and its records also hold
  `p_gen` (per generated token, the probability it was generated rather
  than copied from the source);
- classification: `label`, `probabilities` (class name -> probability),
  `tokens` (the input's tokens) and `attention` (the pooling weight of each);
- every record: `unknown_inputs`, how many units of the input the vocabulary did not
  know (each read as `<unk>`), and `truncated` for a model trained on inputs cut at a
  length.

Generation takes `params` (declared in the model signature): `sampler` (a
name of `keras_attn_rnn.samplers.names()`, greedy by default),
`max_length`, `seed`, and every argument of the registered samplers
(`temperature`, `k`, `p`, `num_beams`, `length_penalty`, ...; the older
`beam_width` is read as `num_beams`); their
defaults are the run's `generate.sampler` and the samplers' own defaults,
and the chosen sampler takes the ones it has. Bad input or
params raise `MlflowException(INVALID_PARAMETER_VALUE)`, which the scoring
server answers with HTTP 400 and the message. MLflow's scoring server puts the
whole request in front of that message (`Failed to predict data '<request>'`);
the refusal (`Refused`) keeps the first `REQUEST_ECHO` characters of it, so a
20,000-character input is not sent back in a 20 KB answer.

What one request may cost is bounded before the model runs: at most
`MAX_INPUTS` strings of at most `MAX_INPUT_CHARS` characters each (checked
before any is tokenized), and at most `MAX_ATTENTION` attention weights
computed (inputs x beams x generated tokens x attended tokens), which also
bounds the answer; past any of them the request is refused as bad input.
"""

from __future__ import annotations

import json
import logging
import reprlib
from pathlib import Path

import keras
import mlflow
import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

from keras_attn_rnn import generation, samplers
from keras_attn_rnn.generators import KerasAttentionGenerator
from keras_attn_rnn.tokenizers import SPECIALS, UNK, Extended, VocabularyTokenizer

# Longest generation a request may ask for (the decoding caches are preallocated).
MAX_LENGTH = 1000
# What one request may send: strings, and characters in each (unbounded, one string of a
# million characters cost 57 s, 3.7 GB and a 312 MB answer).
MAX_INPUTS = 256
MAX_INPUT_CHARS = 10_000
# Attention weights one request may make the model compute (inputs x beams x generated
# tokens x attended tokens): this bounds its time, its memory and its answer (~20 MB).
MAX_ATTENTION = 1_000_000


class _NoRetracing(logging.Filter):
    """Drops TensorFlow's `triggered tf.function retracing` warning: a served model meets
    batches of every shape, and each counts as a retrace; nothing a client can act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "triggered tf.function retracing" not in record.getMessage()


def quiet_retracing() -> None:
    """Put `_NoRetracing` on TensorFlow's logger (once)."""
    logger = logging.getLogger("tensorflow")
    if not any(isinstance(f, _NoRetracing) for f in logger.filters):
        logger.addFilter(_NoRetracing())


def unknown_count(ids) -> int:
    """How many of the input `ids` are `<unk>`: units (characters, words) of the input that
    the run's vocabulary does not hold, each read as `<unk>` (a copy-attention model still
    copies them)."""
    return sum(1 for i in ids if int(i) == UNK)


# What MLflow's scoring server (mlflow/pyfunc/scoring_server, 3.x) writes around the message
# of an MlflowException that `predict` raises: `f"{ECHO_HEAD}{data}{ECHO_TAIL}{message}"`,
# `data` the whole parsed request.
ECHO_HEAD, ECHO_TAIL = "Failed to predict data '", "'. \nError: "
REQUEST_ECHO = 200  # characters of the request an answer repeats


class Refused(MlflowException):
    """A refused request: HTTP 400 with its message, the request the scoring server repeats in
    front of it (`ECHO_HEAD`) cut to `REQUEST_ECHO` characters."""

    @property
    def message(self) -> str:
        return self._message

    @message.setter
    def message(self, value) -> None:
        self._message = bounded_echo(str(value))


def bounded_echo(message: str) -> str:
    """`message` with the request the scoring server put in front of it cut to `REQUEST_ECHO`
    characters (and its length said); any other message as it is."""
    if not message.startswith(ECHO_HEAD) or ECHO_TAIL not in message:
        return message
    data, _, error = message.removeprefix(ECHO_HEAD).rpartition(ECHO_TAIL)
    if len(data) <= REQUEST_ECHO:
        return message
    cut = f"{data[:REQUEST_ECHO]}... ({len(data)} characters in all)"
    return f"{ECHO_HEAD}{cut}{ECHO_TAIL}{error}"


def invalid(message: str) -> MlflowException:
    """An error the scoring server answers with HTTP 400 and `message`."""
    return Refused(message, error_code=INVALID_PARAMETER_VALUE)


class TextCodec:
    """Raw text <-> token ids, as the runner encodes its task: the card's tokenizers.

    `input` is the run's `Task.tokenizer`, rebuilt from its Keras config (the
    card's `input`; a card of format 1, written before the library had
    tokenizers, holds the runner's `text_tokenizer` config, which loads as the
    same `VocabularyTokenizer`); `output` decodes what is generated: the
    card's `output` tokenizer (the input one for a language model). Generation stops at the card's `end_id` (none for a language
    model); decoded text stops at `</s>` and drops the special tokens.
    """

    def __init__(self, card: dict):
        specials = list(card.get("specials", SPECIALS))
        if specials != list(SPECIALS):
            raise ValueError(
                f"the card's special tokens must be {list(SPECIALS)}. Received: {specials}"
            )
        self.input = card_tokenizer(card["input"])
        self.output = card_tokenizer(card.get("output") or card["input"])
        self.max_input_tokens = card.get("max_input_tokens")
        self.end_id = card.get("end_id")

    def encode(self, text: str) -> list[int]:
        """The input ids the model is fed for `text` (`Tokenizer.encode`, cut as `cut`)."""
        return self.cut(self.input.encode(text))[0]

    def cut(self, ids: list[int]) -> tuple[list[int], bool]:
        """`ids` cut at the card's `max_input_tokens` (where the runner cut its inputs in
        training), and whether they were."""
        limit = self.max_input_tokens
        if limit is None or len(ids) <= limit:
            return ids, False
        return ids[:limit], True

    def encode_extended(self, text: str, max_oov: int) -> tuple[Extended, bool]:
        """`text` for a copy-attention model: its ids, extended ids and unknown words
        (`Tokenizer.encode_extended`; past `max_oov` of them, unknown words stay `<unk>`),
        cut as `cut`, and whether it was."""
        encoded = self.input.encode_extended(text, max_oov)
        ids, truncated = self.cut(encoded.ids)
        return Extended(ids, encoded.extended[: len(ids)], encoded.oov), truncated

    def input_labels(self, ids, oov=()) -> list[str]:
        return [self.input.label(i, oov) for i in ids]

    def output_labels(self, ids, oov=()) -> list[str]:
        return [self.output.label(i, oov) for i in ids]

    def generated_steps(self, ids) -> int:
        """How many generated ids come before the end id (or the padding after it)."""
        for step, token in enumerate(ids):
            if int(token) == 0 or (self.end_id is not None and int(token) == self.end_id):
                return step
        return len(ids)

    def decode(self, ids, oov=None) -> str:
        """Text of output ids up to `</s>`, without special tokens (the runner's
        `Vocab.decode`); extended ids are the words of `oov` (`Tokenizer.decode_extended`)."""
        return self.output.decode(ids) if oov is None else self.output.decode_extended(ids, oov)


def card_tokenizer(entry: dict):
    """The tokenizer a card's `input` or `output` describes: a Keras config (format 2), or a
    format-1 card's `text_tokenizer` config (`tokens` and its rules) or vocabulary (`tokens`,
    `joiner`), which are a `VocabularyTokenizer`'s arguments."""
    if "class_name" in entry:
        return keras.saving.deserialize_keras_object(entry, safe_mode=True)
    legacy = dict(entry)
    tokens = legacy.pop("tokens")
    # a config, not a call: rules written under their old names load without a warning
    return VocabularyTokenizer.from_config({**legacy, "vocabulary": tokens})


def output_vocabulary_size(card: dict) -> int:
    """How many ids the card's model generates from (its output tokenizer's vocabulary)."""
    return card_tokenizer(card.get("output") or card["input"]).vocabulary_size


def texts_of(model_input) -> list[str]:
    """The strings of a list, a pandas Series or a one-column DataFrame; raises `invalid`."""
    if isinstance(model_input, pd.DataFrame):
        if model_input.shape[1] != 1:
            raise invalid(
                "inputs must be one column of text. Received: a DataFrame with columns "
                f"{list(model_input.columns)[:10]}"
            )
        values = model_input.iloc[:, 0].tolist()
    elif isinstance(model_input, pd.Series) or (
        isinstance(model_input, np.ndarray) and model_input.ndim == 1
    ):
        values = model_input.tolist()
    elif isinstance(model_input, (list, tuple)):
        values = list(model_input)
    elif isinstance(model_input, str) or (
        isinstance(model_input, np.ndarray) and model_input.ndim == 0
    ):  # `{"inputs": "text"}` reaches the model as a 0-d array
        raise invalid(
            "inputs must be a list of strings, even for one text: send "
            '{"inputs": ["..."]}. Received: a single string, '
            f"{reprlib.repr(str(model_input))}"
        )
    else:
        kind = type(model_input).__name__
        if isinstance(model_input, np.ndarray):
            kind = f"an array of shape {model_input.shape}"
        raise invalid(
            "inputs must be a list of strings, a pandas Series or a one-column DataFrame. "
            f"Received: {kind}"
        )
    if not values:
        raise invalid("inputs must hold at least one string. Received: no inputs")
    if len(values) > MAX_INPUTS:
        raise invalid(
            f"inputs must hold at most {MAX_INPUTS} strings (send more requests). "
            f"Received: {len(values)} strings"
        )
    for position, value in enumerate(values):
        if not isinstance(value, str) or not value:
            raise invalid(
                "inputs must be non-empty strings. "
                f"Received: {reprlib.repr(value)} at position {position}"
            )
        if len(value) > MAX_INPUT_CHARS:
            raise invalid(
                f"inputs must be strings of at most {MAX_INPUT_CHARS} characters. "
                f"Received: {len(value)} characters at position {position}"
            )
    return values


def check_attention(inputs: int, beams: int, steps: int, attended: int) -> None:
    """Refuse (`invalid`) a request that would make the model compute more than
    `MAX_ATTENTION` attention weights: `inputs` x `beams` x `steps` (generated tokens,
    1 for a classifier) x `attended` (the longest input's tokens, plus the generated
    ones for a language model)."""
    weights = inputs * beams * steps * attended
    if weights > MAX_ATTENTION:
        raise invalid(
            f"a request may ask for at most {MAX_ATTENTION} attention weights (inputs x beams "
            "x max_length x attended tokens): send fewer or shorter texts, or ask for a "
            f"smaller max_length or num_beams. Received: {inputs} inputs x {beams} beams x "
            f"{steps} tokens x {attended} attended tokens = {weights}"
        )


def classifies(card: dict) -> bool:
    """Whether a card's model is a classifier (its task kind wrote class names) or generates
    tokens (the kind wrote `generate` defaults): the kind answers, through its card."""
    return "classes" in card


def copies(card: dict) -> bool:
    """Whether a card's model has copy attention (its kind wrote `copy`: the extended
    vocabulary's size, `max_oov`): it is fed each source in extended ids too."""
    return "copy" in card


def read_card(path) -> dict:
    """The text card at `path`; a damaged one (cut short, not JSON, not UTF-8, not an object)
    raises a short `ValueError` naming the file."""
    data = Path(path).read_bytes()
    try:
        card = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        problem = f"{type(err).__name__}: {str(err)[:120]}"
    else:
        if isinstance(card, dict):
            return card
        problem = f"a JSON {type(card).__name__}, not an object"
    raise ValueError(
        f"card.json must be the model's text card, a JSON object: this model's card.json is "
        f"damaged (cut short or corrupted: {problem}); log the run's model again. "
        f"Received: {len(data)} bytes at {path}"
    )


class TextModel(mlflow.pyfunc.PythonModel):
    """The pyfunc text model of a run (see the module docstring)."""

    def load_context(self, context):
        quiet_retracing()
        self.card = read_card(context.artifacts["card"])
        self.codec = TextCodec(self.card)
        self.model = keras.saving.load_model(context.artifacts["model"], safe_mode=True)

    @property
    def steps(self):
        """What generation drives: the model, or for a model of Keras's own layers (the
        runner's plain-Keras peer) the library's generator for it, from its layers by name."""
        if not self.card.get("peer") or hasattr(self.model, "init_cache"):
            return self.model
        if self.__dict__.get("_peer_steps") is None:
            self._peer_steps = KerasAttentionGenerator.from_model(self.model)
        return self._peer_steps

    # `model_input` is a list, a Series, an array or a DataFrame; the hint is pandas' because
    # with it MLflow neither warns about hints nor coerces the input: `texts_of` checks it.
    def predict(self, context, model_input: pd.DataFrame, params: dict | None = None):
        texts = texts_of(model_input)
        if copies(self.card):
            max_oov = int(self.card["copy"]["max_oov"])
            encoded, truncated = zip(*(self.codec.encode_extended(t, max_oov) for t in texts))
            records = self.generate([e.ids for e in encoded], self.options(params), encoded)
        else:
            ids, truncated = zip(*(self.codec.cut(self.codec.input.encode(t)) for t in texts))
            ids = list(ids)
            if classifies(self.card):
                records = self.classify(ids)
            else:
                records = self.generate(ids, self.options(params))
        if "max_input_tokens" in self.card:  # says whether the model saw all of each input
            for record, cut in zip(records, truncated):
                record["truncated"] = cut
        fed = [e.ids for e in encoded] if copies(self.card) else ids
        for record, row in zip(records, fed):  # the input units the vocabulary did not know
            record["unknown_inputs"] = unknown_count(row)
        return records

    def options(self, params: dict | None) -> dict:
        """The generation options: the card's defaults updated with `params`."""
        options = current_names({"sampler": "greedy", **self.card["generate"]})
        options.update({key: value for key, value in requested(params, options).items()})
        length = options["max_length"]
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
            raise invalid(f"max_length must be an integer. Received: max_length={length!r}")
        if not 1 <= length <= MAX_LENGTH:
            raise invalid(
                f"max_length must be in [1, {MAX_LENGTH}]. Received: max_length={length!r}"
            )
        return options

    def generate(self, ids: list[list[int]], options: dict, extended=None) -> list[dict]:
        """Records of what the model generates for the sources `ids`; `extended`: their
        `Tokenizer.encode_extended`, fed to a copy-attention model (`source_ext`)."""
        copy_inputs = {}
        if extended is not None:  # one padded width for the ids and the extended ids
            ids = _padded([e.ids for e in extended])
            copy_inputs["source_ext"] = _padded([e.extended for e in extended])
        try:
            sampler = card_sampler(options)
            steps = int(options["max_length"])
            longest = max(len(row) for row in ids)
            attended = longest + steps if self.card["attends_generated"] else longest
            check_attention(len(ids), getattr(sampler, "num_beams", 1), steps, attended)
            result = generation.generate(
                self.steps,
                ids,
                steps,
                sampler=sampler,
                eos_id=self.card.get("end_id"),
                start_id=self.card.get("start_id"),
                seed=options["seed"],
                **copy_inputs,
            )
        except ValueError as err:  # the library's argument checks name the argument
            raise invalid(str(err)) from None
        records = []
        for row, source in enumerate(ids):
            tokens = result.tokens[row]
            steps = self.codec.generated_steps(tokens)
            oov = None if extended is None else extended[row].oov
            generated = self.codec.output_labels(tokens[:steps], oov or ())
            if extended is None:
                attended = self.codec.input_labels(source)
            else:  # the source's own words, those unknown to the vocabulary included
                attended = self.codec.input_labels(extended[row].extended, oov)
            if self.card["attends_generated"]:  # the prompt, then what was generated before
                attended = attended + generated[:-1]
            record = {
                "text": self.codec.decode(tokens, oov),
                "tokens": generated,
                "attention": result.attention[row, :steps, : len(attended)].tolist(),
                "attended_tokens": attended,
                "score": float(result.scores[row]),
            }
            if extended is not None:
                record["p_gen"] = np.asarray(result.p_gen)[row, :steps].tolist()
            records.append(record)
        return records

    def classify(self, ids: list[list[int]]) -> list[dict]:
        width = max(len(row) for row in ids)
        check_attention(len(ids), 1, 1, width)
        tokens = np.zeros((len(ids), width), dtype="int32")
        for row, source in enumerate(ids):
            tokens[row, : len(source)] = source
        logits, weights = self.model(tokens, training=False, return_attention_scores=True)
        logits = np.asarray(keras.ops.convert_to_numpy(logits), dtype="float64")
        weights = np.asarray(keras.ops.convert_to_numpy(weights), dtype="float64")
        probabilities = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probabilities /= probabilities.sum(axis=-1, keepdims=True)
        classes = self.card["classes"]
        return [
            {
                "label": classes[int(np.argmax(probabilities[row]))],
                "probabilities": dict(zip(classes, probabilities[row].tolist())),
                "tokens": self.codec.input_labels(source),
                "attention": weights[row, : len(source)].tolist(),
            }
            for row, source in enumerate(ids)
        ]


def _padded(rows: list[list[int]]) -> np.ndarray:
    """int32 `(B, longest row)`, 0-padded on the right."""
    out = np.zeros((len(rows), max(1, max(len(row) for row in rows))), dtype="int32")
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


mlflow.models.set_model(TextModel())


def card_sampler(options: dict, vocabulary_size: int | None = None) -> samplers.Sampler:
    """The sampler a text card's generation options name (`options["sampler"]`), built from
    the options it takes: the boundary where a card (JSON, in the serving process) becomes
    a `keras_attn_rnn.samplers.Sampler`, as `GenerateConfig.built_sampler` is the run's.
    The card holds every option (MLflow's params schema fills them all in); the sampler's
    constructor checks the ones it takes (`vocabulary_size`: those counted in tokens)."""
    name = options["sampler"]
    options = current_names(options)
    taken = {key: options[key] for key in samplers.arguments(name) if key in options}
    return samplers.get(name, vocabulary_size, **taken)


def requested(params: dict | None, defaults: dict) -> dict:
    """The options a request's `params` set (those of `defaults`, the card's), with a
    deprecated name (`beam_width`) read as its new one: MLflow fills every declared param
    in with its default, so the name whose value differs from the card's is the one the
    client set (both set differently: an error)."""
    given = dict(params or {})
    for name in samplers.names():
        for old, new in samplers.class_for(name).renamed_arguments.items():
            if old not in given:
                continue
            value = given.pop(old)
            default = defaults.get(new)
            if new in given and value not in (given[new], default) and given[new] != default:
                raise invalid(
                    f"{new} or the deprecated {old}, not both. "
                    f"Received: {new}={given[new]!r}, {old}={value!r}"
                )
            if value != default:
                given[new] = value
    return {key: value for key, value in given.items() if key in defaults}


def current_names(options: dict) -> dict:
    """`options` with the samplers' deprecated argument names (`beam_width`, in cards and
    requests from before keras-hub's `num_beams`) under their new names; a new name given
    too wins."""
    options = dict(options)
    for name in samplers.names():
        for old, new in samplers.class_for(name).renamed_arguments.items():
            if old in options:
                options.setdefault(new, options.pop(old))
    return options
