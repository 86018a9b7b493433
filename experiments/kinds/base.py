"""`TaskKind`: what a kind of task decides, in one object per kind.

A kind is the model a task trains and how it is judged: the model class
and its defaults, the config values it refuses, the loss and compiled
metrics, the metrics evaluated each epoch and at the end, the attention
heatmaps of the probes, sample generations, final artifacts, the text
card the logged models decode with, and the tokens an epoch processes.

Kinds produce data (numbers, rows, figures); training logs them. They never
import training or tracking.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import keras
import numpy as np

from experiments.data import metrics, modeling
from experiments.data.modeling import GREEDY
from experiments.data.vocab import PAD, SPECIALS
from experiments.errors import invalid_config
from keras_attn_rnn import samplers, tokenizers

if TYPE_CHECKING:  # the config, above the tasks, is named in annotations only
    from matplotlib.figure import Figure

    from experiments.config import ExperimentConfig, GenerateConfig
    from experiments.data.split import Split
    from experiments.data.task import Task


# Version of the text card's layout (`TaskKind.text_card`).
CARD_FORMAT = 2  # 2: tokenizers as Keras configs (1: the text_tokenizer module's)
# The label of the column a copying model's heatmaps add: its probability of generating.
P_GEN_LABEL = "p_gen"


@dataclass
class Artifacts:
    """What a kind adds at the end of a run: JSON documents, figures and text files (HTML), by
    artifact path, and metrics logged once at the last step (a baseline's, say)."""

    dicts: dict[str, dict] = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)


class TaskKind:
    """Base of the task kinds; a subclass sets the class attributes and overrides what differs.

    Attributes:
        name: the kind's registry name (`kinds.get(name)` makes one for a `Task`).
        model_type: the `keras_attn_rnn.models` class it trains.
        default_score: the attention score when `model.attention.score` is unset.
        default_bidirectional: the encoder's direction when `model.bidirectional` is unset.
        metric_names: what `evaluate` returns besides the attention statistics;
            logged as `val_<name>` each epoch and `test_<name>` at the end.
        fit_metrics: metrics compiled into the model: logged each epoch as
            `train_<name>` (running mean over the epoch's batches) and, by `fit`
            on the whole validation split, `val_<name>`.
        primary_metric: the test metric a sweep compares its points on.
    """

    name: str
    model_type: str
    default_score: str
    default_bidirectional: bool = False
    metric_names: tuple[str, ...] = ()
    fit_metrics: tuple[str, ...] = ()
    primary_metric: str

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # --- config and model -------------------------------------------------------

    #: whether the kind's model takes an attention mechanism (`model.attention.mechanism`:
    #: any of the library's registry); without, content attention only
    takes_mechanism = False

    def check(self, cfg: ExperimentConfig) -> None:
        """Raise `ConfigError` for config values this kind cannot train."""
        cfg.model.attention.check_for(self.name, self.takes_mechanism, self.attention_options)
        if cfg.model.copy and not self.copies:
            raise invalid_config(
                "model.copy",
                cfg.model.copy,
                f"false for a {self.name} task (copy attention mixes a decoder's "
                "distribution with its attention over the source: seq2seq only)",
            )
        if cfg.train.coverage_loss_weight and not self.has_coverage:
            raise invalid_config(
                "train.coverage_loss_weight",
                cfg.train.coverage_loss_weight,
                f"0 for a {self.name} task "
                "(coverage sums a decoder's alignments over its steps: seq2seq only)",
            )

    #: options of `model.attention` the kind's model takes besides the mechanism's own
    #: (checked by the model's constructor when `run.validate` builds it once)
    attention_options: tuple[str, ...] = ()

    #: the config keys (dotted) this kind's model never reads: a run of the kind does not log
    #: them as params, so a comparison in the UI never shows a value that did not apply
    unused_keys: tuple[str, ...] = (
        "model.decoder",
        "model.attention_layer_size",
        "model.copy",
        "model.max_oov",
        "model.attention.query",
        "model.attention.query_value",
    )

    def applies(self, key: str, cfg: ExperimentConfig) -> bool:
        """Whether the config key `key` (dotted: `model.decoder`) is one the model of `cfg`
        reads, so that a run logs it as a param (`unused_keys`: those it does not)."""
        return key not in self.unused_keys

    #: whether the model's attention has decoder steps a coverage loss can sum over
    has_coverage = False
    #: whether the model can copy source words (`model.copy`)
    copies = False

    def resolve(self, cfg: ExperimentConfig, task: Task) -> ExperimentConfig:
        """A copy of `cfg` with the kind's defaults filled in: the attention score, the
        encoder's direction and, when unset, the generation length."""
        cfg = cfg.model_copy(deep=True)
        cfg.model.attention.score = self.score(cfg)
        cfg.model.bidirectional = self.bidirectional(cfg)
        if cfg.generate.max_length is None:
            cfg.generate.max_length = self.decode_length(task, cfg.generate)
        return cfg

    def prepare(self, cfg: ExperimentConfig, task: Task) -> Task:
        """The task as the model of `cfg` (resolved) trains on it: the task itself by default.
        Raises `ConfigError` for a task the model cannot train on."""
        return task

    def score(self, cfg: ExperimentConfig) -> str:
        """The attention score in use: the configured one or the kind's default."""
        return cfg.model.attention.score or self.default_score

    def bidirectional(self, cfg: ExperimentConfig) -> bool:
        """The encoder's direction: the configured one or the kind's default."""
        if cfg.model.bidirectional is None:
            return self.default_bidirectional
        return cfg.model.bidirectional

    def build_model(self, cfg: ExperimentConfig, task: Task) -> keras.Model:
        """The task's model from `cfg.model` (uncompiled, unbuilt)."""
        raise NotImplementedError

    def attention(self, cfg: ExperimentConfig) -> dict:
        """The `attention=` argument of the model: score, units and normalizer."""
        a = cfg.model.attention
        return {"score": self.score(cfg), "units": a.units, "normalizer": a.normalizer}

    def loss(self, model: keras.Model) -> keras.losses.Loss:
        """The model's own loss: a ready model of this library chooses it
        (`default_loss()`: sparse cross-entropy on its logits, whose masks skip padded
        steps; `PointerGeneratorLoss` for copy attention); a model of Keras's own layers
        (the plain-Keras peer) gets sparse cross-entropy skipping `<pad>` targets."""
        own = getattr(model, "default_loss", None)
        if own is not None:
            return own()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=PAD)

    # --- metrics ------------------------------------------------------------------

    def epoch_metric_names(self, task: Task) -> set[str]:
        """The metrics this kind adds to each epoch's logs (see `evaluate` and `fit_metrics`)."""
        names = {f"val_{n}" for n in self.metric_names}
        names |= {f"{prefix}_{n}" for n in self.fit_metrics for prefix in ("train", "val")}
        names.add("val_attention_entropy")
        if task.val.alignment is not None:
            names.add("val_alignment_accuracy")
        return names

    def evaluate(self, model, task: Task, split: Split) -> dict[str, float]:
        """`metric_names` on `split`, plus `alignment_accuracy` (when known) and
        `attention_entropy`: batch by batch, keeping of each batch's logits what
        `logit_summary` keeps, so that a split's evaluation needs no more memory than a
        batch's (never the whole split's logits)."""
        attended = self.attended_rows(split)
        kept, entropy, alignment = [], [], []  # per batch: (sum, count) terms
        for rows, logits, weights in modeling.forward(model, split):
            kept.append(self.logit_summary(logits, split.y[rows]))
            valid = None if attended is None else attended[rows]
            entropy.append(metrics.entropy_terms(weights, valid))
            if split.alignment is not None:
                alignment.append(metrics.alignment_terms(weights, split.alignment[rows]))
        out = self.task_metrics(model, task, split, np.concatenate(kept))
        if split.alignment is not None:
            out["alignment_accuracy"] = metrics.mean_of(*map(sum, zip(*alignment)))
        out["attention_entropy"] = metrics.mean_of(*map(sum, zip(*entropy)))
        return out

    def logit_summary(self, logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """What `task_metrics` needs of a batch's logits, kept instead of them: the predicted
        ids by default."""
        return np.argmax(logits, -1).astype("int32")

    def task_metrics(self, model, task: Task, split: Split, kept: np.ndarray) -> dict:
        """The values of `metric_names` on `split`, given what `logit_summary` kept of the
        model's logits on it."""
        raise NotImplementedError

    #: what each length bucket logs (`test_<name>_len_A_B`) besides `metric_names`, where
    #: `length_metrics` gives it a finite value
    length_metric_names: tuple[str, ...] = ("alignment_accuracy",)
    #: what the length plot shows beside the primary metric (a bar each per bucket)
    length_plot_metrics: tuple[str, ...] = ()

    def length_metrics(self, model, task: Task, split: Split) -> dict[str, float]:
        """What a length bucket reports (`length_buckets.buckets`): `evaluate` by default."""
        return self.evaluate(model, task, split)

    def test_metrics(self, model, task: Task, split: Split, gen_cfg: GenerateConfig) -> dict:
        """What the end of a run reports on `split`: `evaluate`, plus what the configured
        sampler (`gen_cfg.built_sampler`) adds (seq2seq: exact match of beam search)."""
        return self.evaluate(model, task, split)

    def attended_rows(self, split: Split) -> np.ndarray | None:
        """Which attention rows count for the entropy (None: all): the non-padding targets."""
        return split.y != PAD

    # --- generation -----------------------------------------------------------------

    #: the token ids decoding starts and stops at (`start_id`, `eos_id`): none by default
    decode_ids: dict[str, int] = {}

    def decode_length(self, task: Task, gen_cfg: GenerateConfig) -> int:
        """How many tokens to generate: `generate.max_length`, else 100."""
        return gen_cfg.max_length or 100

    def decode(
        self,
        model,
        sampler,
        prompts,
        max_length: int,
        batch_size=None,
        min_length=None,
        source_ext=None,
        seed: int | None = 0,
    ) -> np.ndarray:
        """Generated token ids (B, max_length) for `prompts` with `sampler` (a built sampler:
        `GenerateConfig.built_sampler`, or `modeling.GREEDY`) and `seed`, `batch_size` at a
        time; with `min_length` (B,) no row ends before it holds that many tokens;
        `source_ext` (B, S): a copying model's sources in extended ids (see
        `modeling.decode`); decoding starts and stops at `decode_ids`."""
        return modeling.decode(
            model,
            sampler,
            prompts,
            max_length,
            batch_size,
            min_length,
            source_ext=source_ext,
            seed=seed,
            **self.decode_ids,
        )

    def sample_rows(self, model, task: Task, gen_cfg: GenerateConfig, count: int) -> list[dict]:
        """A table of `count` sample generations (none by default, or when `count` is 0)."""
        return []

    # --- plots and artifacts ------------------------------------------------------------

    def probe_heatmaps(self, model, task: Task, epoch: int | None = None) -> list[tuple[str, dict]]:
        """Each probe's attention as `(name, plot_attention kwargs)`: the model part of a heatmap.
        A copying model's probability of generating each target token is a last column,
        `p_gen`."""
        probes = task.probes
        logits, weights, p_gen = modeling.attention_outputs(model, probes.inputs)
        suffix = "" if epoch is None else f" (epoch {epoch})"
        heatmaps = []
        for i in range(len(probes)):
            words = probes.x if probes.x_ext is None else probes.x_ext  # unknown words by name
            source = task.vocab.labels(words[i], probes.words(i))
            rows, source, targets, title = self.heatmap(task, i, source, logits[i], weights[i])
            if p_gen is not None:  # a copying model: its p_gen beside the attention
                rows = np.concatenate([rows, p_gen[i, : len(rows), None]], axis=1)
                source = [*source, P_GEN_LABEL]
            kwargs = dict(
                weights=rows, source_tokens=source, target_tokens=targets, title=title + suffix
            )
            heatmaps.append((f"probe_{i}", kwargs))
        return heatmaps

    #: what a row of a probe's heatmap is: its y-axis label
    heatmap_rows = "query"

    def heatmap(self, task: Task, i: int, source: list[str], logits, weights) -> tuple:
        """(weights rows, source tokens, target tokens, title) of probe `i`."""
        raise NotImplementedError

    def final_artifacts(self, model, task: Task, split: Split) -> Artifacts:
        """What the end of a run adds besides metrics, heatmaps and samples (nothing by default)."""
        return Artifacts()

    # --- the logged model's card ---------------------------------------------------------

    def text_card(self, task: Task, cfg: ExperimentConfig) -> dict:
        """What the logged models need besides the trained model, as JSON (the "text card").

        The input vocabulary and how a raw text becomes its ids (`input`: the
        Keras config of `Task.tokenizer`, a `keras_attn_rnn.tokenizers.Tokenizer`
        the text model rebuilds), the special tokens, the kind, and two examples (raw
        texts and the token ids `(2, L)` the runner made of them: the first
        probes, decoded by the tokenizer); each kind adds what it decodes with
        (`card_fields`). `experiments/tracking/text_model.py` reads it.
        """
        probes = task.probes.take(slice(0, 2))
        return {
            "format": CARD_FORMAT,
            "kind": self.name,
            "task": task.name,
            "specials": list(SPECIALS),
            "input": tokenizers.serialize(task.tokenizer),
            # where the runner cut its inputs: the text model cuts a request there, and says so
            **({"max_input_tokens": task.max_input_tokens} if task.max_input_tokens else {}),
            **self.card_fields(task, cfg),
            "examples": {
                "text": [_raw_text(task, probes, row) for row in range(len(probes))],
                "tokens": probes.x.astype("int32").tolist(),
            },
        }

    def serving_output(self, model, cfg: ExperimentConfig, tokens: np.ndarray) -> np.ndarray:
        """What the logged Keras-flavor model must serve for `tokens` (B, L), as the runner
        computes it: greedy-decoded ids (B, generate.max_length) (logits for classification)."""
        return self.decode(model, GREEDY, tokens, cfg.generate.max_length)

    def card_fields(self, task: Task, cfg: ExperimentConfig) -> dict:
        """The kind's part of the text card: output vocabulary, start/end ids, generation
        defaults (seq2seq, LM), or class names (classification)."""
        raise NotImplementedError

    def tokens_per_epoch(self, split: Split) -> int:
        """The non-padding tokens one epoch over `split` feeds the model."""
        return split.count_tokens("x")


def generate_defaults(cfg: ExperimentConfig) -> dict:
    """The text card's generation defaults, typed for MLflow's params schema: `max_length`,
    `seed`, and every argument of every registered sampler, the run's value where its
    sampler takes it, else the sampler's default (the text model's params; a sampler
    registered with a new argument gets it here by itself), and each deprecated name of
    an argument (`beam_width`) with its value."""
    g = cfg.generate
    options = {}
    for name in samplers.names():
        for key, default in samplers.REGISTRY.defaults(name).items():
            if key != "num_beams_returned":  # the text model returns one sequence per input
                options.setdefault(key, default)
    options.update({key: value for key, value in g.sampler.items() if key != "name"})
    for name in samplers.names():  # a deprecated name (`beam_width`) stays a param too,
        for old, new in samplers.class_for(name).renamed_arguments.items():
            options[old] = options[new]  # so that older clients' requests keep working
    return {"max_length": int(g.max_length), "seed": int(g.seed or 0), **options}


def _raw_text(task: Task, split: Split, row: int) -> str:
    """A text that `task.tokenizer` turns into the ids of `split.x[row]` again
    (`Tokenizer.decode`), with its unknown words where the split knows them (`x_ext`)."""
    if split.x_ext is None:
        return task.tokenizer.decode(split.x[row])
    return task.tokenizer.decode_extended(split.x_ext[row], split.words(row))
