"""Typed experiment configuration: YAML in, validated pydantic models out.

A config has five sections: `task` (the section of the task `task.name` names,
defined in that task's module: `experiments.tasks`), `model`, `train`,
`tracking` and `generate`. Every section forbids unknown keys. `--set a.b=value` overrides
are parsed as YAML (safe-loaded, within `bounded_input`'s bounds, as config
files are) and validated with the rest, so a bad value is rejected before
any run, file or folder is created.
"""

from __future__ import annotations

import inspect
import os
import warnings
from pathlib import Path
from typing import Any, Literal

import keras
import yaml
from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from experiments import task_aliases, tasks
from experiments.config_files import (  # noqa: F401 - the loading functions, re-exported
    MAX_CONFIG_BYTES,
    apply_overrides,
    parse_override,
    read_yaml,
)
from experiments.data.sections import Section, TaskSection
from experiments.errors import ConfigError, invalid_config, problem
from experiments.peers import keras_seq2seq
from keras_attn_rnn import checks, mechanisms, models, normalizers, samplers, scores

# --- model, train, tracking, generate (the task's section is its module's) -----


class AttentionConfig(Section):
    """`model.attention`: the score, normalizer and mechanism by their registered names,
    and any other key an option of the chosen mechanism (`filters: 32` for `location`) or of
    the task's model (`TaskKind.attention_options`), checked with the task's kind by the
    mechanism's or the model's own constructor: the library is the one list of options."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    score: str | None = Field(
        None,
        description="The attention score by its registered name (`keras_attn_rnn.scores`); "
        "unset: the task kind's default.",
    )
    units: int | None = Field(
        None,
        ge=1,
        description="Hidden size of the additive score and of a mechanism that takes `units`; "
        "unset: the RNN's (`model.units`).",
    )
    query: Literal["learned", "fixed"] = Field(
        "learned",
        description="Classification: the pooling query, learned or fixed (`query_value`).",
    )
    query_value: list[float] | None = Field(
        None, description="Classification: the fixed query's values (with `query: fixed`)."
    )
    mechanism: str = Field(
        "content",
        description="The mechanism by its registered name (`keras_attn_rnn.mechanisms`); "
        "other than `content`, seq2seq with the `bahdanau` decoder only.",
    )
    normalizer: str = Field(
        "softmax",
        description="What turns scores into weights, by its registered name "
        "(`keras_attn_rnn.normalizers`).",
    )

    @field_validator("score")
    @classmethod
    def _registered_score(cls, value: str | None) -> str | None:
        if value is not None:
            scores.REGISTRY.check_name(value, "score")
        return value

    @field_validator("mechanism")
    @classmethod
    def _registered_mechanism(cls, value: str) -> str:
        mechanisms.REGISTRY.check_name(value, "mechanism")
        return value

    @field_validator("normalizer")
    @classmethod
    def _registered_normalizer(cls, value: str) -> str:
        normalizers.REGISTRY.check_name(value, "normalizer")
        return value

    def check_for(self, kind: str, takes_mechanism: bool, model_options=()) -> None:
        """The one check of the mechanism and its options for a task of kind `kind`: every
        key besides the fields is an argument of the mechanism's constructor (or one of the
        model's `model_options`), and the constructor, given them, takes them (a units
        placeholder where one is required); a model that takes no mechanism takes content
        attention only. Raises `ConfigError`."""
        content = mechanisms.REGISTRY.name_of(mechanisms.ContentAttention)
        if not takes_mechanism and self.mechanism != content:
            raise invalid_config(
                "model.attention.mechanism",
                self.mechanism,
                f"{content!r} for a {kind} task (stateful mechanisms belong to the seq2seq "
                "decoder)",
            )
        options = {k: v for k, v in (self.model_extra or {}).items() if k not in model_options}
        own = [k for k in mechanisms.REGISTRY.arguments(self.mechanism) if k not in _FROM_KIND]
        for key, value in options.items():
            if key not in own:
                theirs = f" nor of a {kind} model ({', '.join(model_options)})"
                raise invalid_config(
                    f"model.attention.{key}",
                    value,
                    f"no such key: not an option of mechanism {self.mechanism!r} (its options: "
                    f"{', '.join(own) or 'none'})" + (theirs if model_options else ""),
                )
        if not options:
            return
        required = set(mechanisms.REGISTRY.arguments(self.mechanism))
        required -= set(mechanisms.REGISTRY.defaults(self.mechanism))
        trial = {"units": self.units or 1} if "units" in required else {}
        try:
            mechanisms.get(self.mechanism, **trial, **options)
        except (ValueError, TypeError) as err:
            named = [key for key in options if str(err).startswith(key)]
            key = named[0] if named else next(iter(options))
            raise invalid_config(f"model.attention.{key}", options[key], str(err)) from None


# The arguments every mechanism takes from the task's kind (`TaskKind.attention`), not options.
_FROM_KIND = ("score", "units", "normalizer")


# `model.copy` is the library's own name (`Seq2Seq(copy=True)`); it shadows pydantic's
# deprecated `BaseModel.copy`, which nothing here calls (`model_copy` is its successor).
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", 'Field name "copy"', UserWarning)

    class ModelConfig(Section):
        """`model`: the ready model of the task's kind (`keras_attn_rnn.models`) and its
        attention."""

        embedding_dim: int = Field(64, ge=1, description="Width of the token embeddings.")
        units: int = Field(
            64, ge=1, description="Units of the RNN (per direction in a bidirectional encoder)."
        )
        rnn: str = Field(
            "lstm", description="The RNN cell, one of the library's `models.RNN_KINDS`."
        )
        bidirectional: bool | None = Field(
            None, description="A bidirectional encoder; unset: the task kind's default."
        )
        num_layers: int = Field(
            1, ge=1, le=8, description="Stacked RNN layers (classification and language models)."
        )
        dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout rate.")
        decoder: str = Field(
            "bahdanau",
            description="Seq2seq: the decoder, one of the library's `models.DECODERS`, or "
            "`keras`: the plain-Keras peer (experiments/peers/keras_seq2seq.py), what a Keras "
            "user writes without this library.",
        )
        attention: AttentionConfig = Field(
            default_factory=AttentionConfig, description="The attention: see `model.attention`."
        )
        attention_layer_size: int | None = Field(
            None,
            ge=1,
            description="Seq2seq: width of the decoder's attention layer `tanh(W [s_t; c_t])` "
            "(unset: `model.units`).",
        )
        copy: bool = Field(
            False,
            description="Seq2seq: copy attention (the pointer-generator): the model also "
            "copies source words, those unknown to the vocabulary included.",
        )
        max_oov: int | None = Field(
            None,
            ge=0,
            description="With `copy`: the extended ids for unknown source words; unset: the "
            "task's most unknown words in one source.",
        )

        @field_validator("rnn")
        @classmethod
        def _library_rnn(cls, value: str) -> str:
            checks.check_choice("rnn", value, models.RNN_KINDS)
            return value

        @field_validator("decoder")
        @classmethod
        def _library_decoder(cls, value: str) -> str:
            checks.check_choice("decoder", value, (*models.DECODERS, keras_seq2seq.NAME))
            return value

        @model_validator(mode="after")
        def _max_oov_with_copy(self) -> ModelConfig:
            if self.max_oov is not None and not self.copy:
                raise ValueError(
                    "model.copy: true with model.max_oov (the size of copy attention's "
                    f"extended vocabulary), got max_oov={self.max_oov} with copy: false"
                )
            return self


class EarlyStoppingConfig(Section):
    """`train.early_stopping`: stop when a validation metric stops improving; the test
    metrics, heatmaps, samples and logged model are then the best epoch's."""

    monitor: str = Field("val_loss", description="The validation metric watched.")
    patience: int = Field(3, ge=0, description="Epochs without improvement before the stop.")
    mode: Literal["auto", "min", "max"] = Field(
        "auto", description="Whether the metric should fall or rise; auto: from its name."
    )
    min_delta: float = Field(0.0, ge=0.0, description="The least change that counts.")


class TrainConfig(Section):
    """`train`: how the model is trained."""

    epochs: int = Field(10, ge=1, description="Passes over the training split.")
    batch_size: int = Field(
        64, ge=1, description="The global batch, split evenly over the replicas."
    )
    batch_tokens: int | None = Field(
        None,
        ge=16,
        description="Instead of `batch_size` rows, batches of as many rows of similar length "
        "as fit this many source + target tokens, padding included (fairseq's --max-tokens); "
        "for tasks that read a file of pairs (their training rows are batched by length).",
    )
    batch_pool: int | None = Field(
        None,
        ge=1,
        description="Sort rows by length within pools of this many batches of shuffled rows "
        "(Marian's maxi-batches, OpenNMT's pool), so a batch's rows change from epoch to "
        "epoch, at the cost of more padding; unset: sorted once over the whole split "
        "(fairseq). With `batch_size` rows only, not `batch_tokens`.",
    )
    learning_rate: float = Field(1e-3, gt=0.0, description="The optimizer's learning rate.")
    lr_schedule: Literal["constant", "cosine"] = Field(
        "constant", description="cosine: decays the learning rate to 0 over the run."
    )
    optimizer: str = Field(
        "adam",
        description="Any Keras optimizer by a name `keras.optimizers.get` takes "
        "(`adam`, `adamw`, `lion`, ...).",
    )
    clipnorm: float | None = Field(
        1.0, gt=0.0, description="Gradients clipped to this norm; null: not clipped."
    )
    seed: int = Field(0, description="Seed of the weights' initialisation and of training.")
    mixed_precision: bool | Literal["float16", "bfloat16"] = Field(
        False,
        description="true or float16: Keras' `mixed_float16` policy; bfloat16: `mixed_bfloat16`.",
    )
    jit_compile: bool = Field(False, description="TensorFlow: compile the steps with XLA.")
    run_eagerly: bool = Field(False, description="Run the steps eagerly (to debug).")
    distribute: Literal["none", "mirrored", "multi_worker", "data_parallel"] = Field(
        "none",
        description="mirrored, multi_worker: TensorFlow's strategies; data_parallel: JAX's "
        "(Keras' `DataParallel`).",
    )
    early_stopping: EarlyStoppingConfig | None = Field(
        None, description="Early stopping: see `train.early_stopping`; null: off."
    )
    eval_examples: int = Field(
        512, ge=1, description="Rows of the validation subset the per-epoch metrics score."
    )
    alignment_loss_weight: float = Field(
        0.0,
        ge=0.0,
        description="Weight of the supervised attention loss (tasks with ground-truth "
        "alignments: a task whose splits hold them).",
    )
    coverage_loss_weight: float = Field(
        0.0, ge=0.0, description="Weight of the coverage loss (seq2seq)."
    )
    checkpoint_dir: str | None = Field(
        None, description="Where run checkpoints go; unset: beside a local store."
    )
    keep_checkpoints: bool = Field(
        False,
        description="false: a run that finishes deletes its checkpoint folder (a killed or "
        "failed run keeps it for `resume`); true: it is kept (`prune` deletes finished runs' "
        "folders later).",
    )
    verbose: Literal[0, 1, 2] = Field(2, description="Keras' `fit` verbosity.")

    @model_validator(mode="after")
    def _pool_of_rows(self) -> TrainConfig:
        if self.batch_pool is not None and self.batch_tokens is not None:
            raise ValueError(
                "train.batch_pool pools batches of train.batch_size rows; it does not apply "
                "to batches of train.batch_tokens tokens: set one of them. Received: "
                f"batch_pool={self.batch_pool}, batch_tokens={self.batch_tokens}"
            )
        return self

    @field_validator("optimizer")
    @classmethod
    def _keras_optimizer(cls, value: str) -> str:
        optimizer_class(value)
        return value

    def build_optimizer(self, **arguments) -> keras.optimizers.Optimizer:
        """Keras' optimizer `optimizer` with `arguments` (`learning_rate`, `clipnorm`)."""
        return optimizer_class(self.optimizer)(**arguments)


def optimizer_class(name: str) -> type[keras.optimizers.Optimizer]:
    """The class of Keras' optimizer `name`, named as `keras.optimizers.get` takes a name (a
    class of `keras.optimizers` by its name or that name lower-cased: `adam`, `AdamW`,
    `lion`), one built from keyword arguments alone. Found, not built: an optimizer's
    variables would start the backend's runtime, which a multi-worker strategy must come
    before."""
    classes = {}
    for class_name, member in vars(keras.optimizers).items():
        if (
            isinstance(member, type)
            and issubclass(member, keras.optimizers.Optimizer)
            and member is not keras.optimizers.Optimizer
            and all(p.default is not p.empty for p in _named_parameters(member))
        ):
            classes[class_name] = classes[class_name.lower()] = member
    if name not in classes:
        names = ", ".join(repr(key) for key in sorted(classes) if key.islower())
        raise ValueError(f"one of Keras' optimizers, {names}")
    return classes[name]


def _named_parameters(cls: type) -> list[inspect.Parameter]:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p for p in inspect.signature(cls).parameters.values() if p.kind in kinds]


class TrackingConfig(Section):
    """`tracking`: what the run logs to MLflow."""

    experiment: str = Field("keras-attn-rnn", min_length=1, description="The MLflow experiment.")
    run_name: str | None = Field(None, description="The run's name; unset: MLflow's.")
    heatmap_every: int = Field(
        1, ge=1, description="Epochs between two steps of the attention images."
    )
    system_metrics: bool = Field(
        True,
        description="Log CPU, memory, disk and network (and GPU with the `gpu` extra) as "
        "`system/*` metrics.",
    )
    system_metrics_interval: float = Field(
        10.0, ge=0.1, description="Seconds between two samples of the system metrics."
    )
    num_samples: int = Field(8, ge=0, le=256, description="Sample generations logged each epoch.")
    log_model: bool = Field(True, description="Log the trained model (`model`, `text_model`).")
    register_model: str | None = Field(
        None,
        min_length=1,
        description="A Model Registry name: the run's model becomes a new version of it "
        "(`tune` registers its best trial itself).",
    )
    tags: dict[str, str] = Field(default_factory=dict, description="Tags added to the run.")

    @model_validator(mode="after")
    def _register_what_is_logged(self) -> TrackingConfig:
        if self.register_model is not None and not self.log_model:
            raise ValueError(
                f"tracking.register_model: {self.register_model!r} registers the run's model, "
                "which tracking.log_model: false does not log"
            )
        return self


# The `generate` keys of configs written before `sampler`, with their defaults then.
_OLDER_GENERATE_KEYS = {
    "temperature": 1.0,
    "k": None,
    "p": None,
    "beam_width": 4,
    "length_penalty": 0.0,
}


class GenerateConfig(Section):
    """`generate`: one sampler of `keras_attn_rnn.samplers`, by its registered name and its
    own constructor arguments (`sampler: beam` or `sampler: {name: top_k, k: 5}`), built
    once when the section is validated (its constructor checks them: the registry is the
    one list of samplers and options) and kept as `built_sampler`, the object every
    decoding of the run uses."""

    sampler: dict = Field(
        default_factory=lambda: {"name": "greedy"},
        description="A sampler name (`beam`) or `{name: ..., <its arguments>}`.",
    )
    max_length: int | None = Field(
        None, ge=1, description="Tokens generated; unset: the task's target length (100 for LMs)."
    )
    prompts: list[str] = Field(
        default_factory=list,
        description="Language models: the prompts of the sample generations; empty: the task's.",
    )
    seed: int | None = Field(0, description="Seed of the sampling.")

    # the `Sampler` built from `sampler`, and the `sampler` it was built from
    _built: tuple[dict, samplers.Sampler] | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _older_keys(cls, data: Any) -> Any:
        """A config written before `sampler` (`strategy: top_k`, `k: 5`: resolved configs
        logged with older runs, which `resume` reads) means the same sampler."""
        if not isinstance(data, dict):
            return data
        older = [key for key in ("strategy", *_OLDER_GENERATE_KEYS) if key in data]
        if not older:
            return data
        data = dict(data)
        name = data.pop("strategy", "greedy")
        if "sampler" in data:
            raise ValueError(f"generate.sampler or the older generate.{older[0]}, not both")
        accepted = samplers.arguments(name) if samplers.is_name(name) else ()
        arguments = {}
        renamed = samplers.class_for(name).renamed_arguments if samplers.is_name(name) else {}
        for key, default in _OLDER_GENERATE_KEYS.items():
            value = data.pop(key, default)
            if renamed.get(key, key) in accepted and value is not None:
                arguments[renamed.get(key, key)] = value
            elif value != default:
                raise ValueError(
                    f"generate.{key} would be ignored: generate.strategy {name!r} takes "
                    f"{list(accepted)}"
                )
        data["sampler"] = {"name": name, **arguments}
        return data

    @field_validator("sampler", mode="before")
    @classmethod
    def _one_sampler(cls, value: Any) -> dict:
        if isinstance(value, str):
            value = {"name": value}
        if not isinstance(value, dict) or "name" not in value:
            raise ValueError(
                "a sampler name, or a mapping with `name` and the sampler's arguments "
                "(e.g. {name: top_k, k: 5})"
            )
        return {"name": value["name"], **{k: v for k, v in value.items() if k != "name"}}

    @model_validator(mode="after")
    def _build_sampler(self) -> GenerateConfig:
        """Build the sampler (again only when `sampler` changed: validating an assignment to
        another key keeps it); its constructor's error is `generate.sampler`'s."""
        try:
            self.built_sampler  # noqa: B018 - builds it
        except ValueError as err:
            details = InitErrorDetails(
                type=PydanticCustomError("value_error", "{error}", {"error": str(err)}),
                loc=("sampler",),
                input=self.sampler,
            )
            raise ValidationError.from_exception_data(type(self).__name__, [details]) from None
        return self

    @property
    def sampler_name(self) -> str:
        return self.sampler["name"]

    @property
    def built_sampler(self) -> samplers.Sampler:
        """The `keras_attn_rnn.samplers.Sampler` of `sampler`: the one built when the section
        was validated (built again only for a `sampler` replaced without validation, by
        `model_copy(update=...)`)."""
        if self._built is None or self._built[0] != self.sampler:
            arguments = {key: value for key, value in self.sampler.items() if key != "name"}
            sampler = samplers.get(self.sampler_name, **arguments)
            self._built = (dict(self.sampler), sampler)
        return self._built[1]


class ExperimentConfig(Section):
    """A whole config: the task's section and the four others."""

    task: SerializeAsAny[TaskSection] = Field(description="The task: its `name` and keys.")
    model: ModelConfig = Field(default_factory=ModelConfig, description="See `model`.")
    train: TrainConfig = Field(default_factory=TrainConfig, description="See `train`.")
    tracking: TrackingConfig = Field(default_factory=TrackingConfig, description="See `tracking`.")
    generate: GenerateConfig = Field(default_factory=GenerateConfig, description="See `generate`.")

    @field_validator("task", mode="before")
    @classmethod
    def _registered_task(cls, value: Any) -> Any:
        """The section of the task `task.name` names, from the task registry
        (`experiments.tasks`: its modules and those of `ATTN_RNN_TASK_PACKAGES`)."""
        if not isinstance(value, dict):
            return value  # a section already, or refused as no mapping
        name = value.get("name", _MISSING)
        if task_aliases.canonical(name, notice=False) != name:  # an old name: the new one's
            name = task_aliases.canonical(name)
            value = {**value, "name": name}
        names = tasks.names()
        if not isinstance(name, str) or name not in names:
            raise PydanticCustomError(
                "task_name",
                "unknown task",
                {"tag": name, "expected_tags": ", ".join(map(repr, names))},
            )
        return tasks.section(name).model_validate(value)


# --- loading ----------------------------------------------------------------


def validate(data: dict) -> ExperimentConfig:
    """Validate a config mapping, raising ConfigError with key path, value and expectation."""
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_errors(err, data)) from None


def load_config(path: str | os.PathLike, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read, override and validate one experiment config.

    A relative `task.path` in the file is relative to the file's folder; one
    given with `--set` is relative to the working directory.
    """
    data = read_yaml(path)
    task = data.get("task")
    if isinstance(task, dict) and isinstance(task.get("path"), str):
        candidate = Path(path).parent / task["path"]
        if not Path(task["path"]).is_absolute() and candidate.exists():
            task["path"] = str(candidate)
    return validate(apply_overrides(data, overrides or []))


class _Missing:
    def __repr__(self) -> str:
        return "(missing)"


_MISSING = _Missing()


def format_errors(err: ValidationError, data: dict) -> str:
    """One line per problem: `key.path: got VALUE; expected WHAT`."""
    lines = ["invalid config:"]
    for item in err.errors():
        key = ".".join(str(p) for p in item["loc"]) or "<root>"
        if item["type"] == "extra_forbidden":
            expected = "no such key (unknown keys are not allowed)"
        elif item["type"] == "missing":
            expected = "this key is required"
        else:
            expected = _expected(item)
        got = _MISSING if item["type"] == "missing" else item.get("input")
        if item["type"] == "task_name":
            key, got = "task.name", item["ctx"]["tag"]
            expected = "one of " + item["ctx"]["expected_tags"]
        lines.append(problem(key, got, expected))
    return "\n".join(lines)


# pydantic's error types, worded as the rest of the config errors are ("expected an integer",
# not "expected Input should be a valid integer").
_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "dict_type": "a mapping",
    "model_type": "a mapping of keys",
    "model_attributes_type": "a mapping of keys",
    "list_type": "a list",
}
_BOUND_SIGNS = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<="}
_BOUND_SIGNS["less_than"] = "<"


def _expected(item: dict) -> str:
    ctx = item.get("ctx") or {}
    if item["type"] in _EXPECTED:
        return _EXPECTED[item["type"]]
    if item["type"] in _BOUND_SIGNS:
        return f"a value {_BOUND_SIGNS[item['type']]} {next(iter(ctx.values()))}"
    if item["type"] == "literal_error":
        return "one of " + ctx.get("expected", "").replace(" or ", ", ")
    if item["type"] == "string_too_short":
        return f"a string of at least {ctx.get('min_length')} characters"
    return item["msg"].removeprefix("Value error, ").removeprefix("Input should be ")


def to_dict(cfg: ExperimentConfig) -> dict:
    """The resolved config as plain YAML-safe data."""
    return cfg.model_dump(mode="json")


def to_yaml(cfg: ExperimentConfig) -> str:
    """The resolved config as YAML text."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    """Flatten nested mappings to dotted keys (`model.attention.score`)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat
