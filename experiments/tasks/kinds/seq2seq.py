"""`seq2seq`: source sequence -> target sequence, from `Seq2Seq` (Bahdanau or Luong)."""

from __future__ import annotations

from experiments.errors import invalid_config
from experiments.tasks import metrics, modeling
from experiments.tasks.kinds.base import GREEDY, TaskKind, generate_defaults
from experiments.tasks.kinds.registry import register
from experiments.tasks.vocab import END, PAD, START
from keras_attn_rnn import mechanisms, models

# Sources decoded at once when a split is scored.
EVAL_BATCH = 512


class Seq2Seq(TaskKind):
    """Encoder RNN -> attention decoder, trained with teacher forcing."""

    name = "seq2seq"
    model_type = "Seq2Seq"
    default_score = "additive"
    metric_names = ("token_accuracy", "exact_match_greedy")
    primary_metric = "test_exact_match_greedy"

    @property
    def attention_mechanisms(self):
        """Every registered mechanism (read when a config is checked: a new one is usable)."""
        return mechanisms.names()

    has_coverage = True

    def check(self, cfg):
        super().check(cfg)
        if cfg.model.num_layers != 1:
            raise invalid_config(
                "model.num_layers",
                cfg.model.num_layers,
                "1 for a seq2seq task (its encoder and decoder have one RNN layer each)",
            )

    def attention(self, cfg):
        """Score, units, normalizer, and the mechanism with its options (`model.attention`'s
        other keys)."""
        a = cfg.model.attention
        return {**super().attention(cfg), "mechanism": a.mechanism, **a.model_extra}

    def build_model(self, cfg, task):
        m = cfg.model
        return models.Seq2Seq(
            source_vocab=len(task.vocab),
            target_vocab=len(task.output_vocab),
            bidirectional=self.bidirectional(cfg),
            decoder=m.decoder,
            attention=self.attention(cfg),
            attention_layer_size=m.attention_layer_size,
            embedding_dim=m.embedding_dim,
            units=m.units,
            rnn=m.rnn,
            dropout=m.dropout,
        )

    def task_metrics(self, model, task, split, logits):
        """Teacher-forced token accuracy, and exact match of greedy decoding."""
        return {
            "token_accuracy": metrics.token_accuracy(split.y, logits),
            "exact_match_greedy": self.exact_match(model, GREEDY, split),
        }

    #: per length bucket also the oracle-length exact match (see `exact_match_oracle`)
    length_metric_names = ("exact_match_oracle", "alignment_accuracy")
    length_plot_metrics = ("exact_match_oracle",)

    def length_metrics(self, model, task, split):
        """`evaluate` and `exact_match_oracle`."""
        out = self.evaluate(model, task, split)
        return {**out, "exact_match_oracle": self.exact_match_oracle(model, split)}

    def test_metrics(self, model, task, split, gen_cfg):
        """`evaluate` and `exact_match_oracle`, and with `generate.sampler: beam` also
        `exact_match_beam` (the sampling strategies are random: their exact match is not a
        test figure)."""
        out = self.length_metrics(model, task, split)
        if gen_cfg.sampler_name == "beam":
            out["exact_match_beam"] = self.exact_match(model, gen_cfg, split)
        return out

    def exact_match(self, model, gen_cfg, split) -> float:
        """Exact match of `split` decoded with `gen_cfg`, up to the split's target length."""
        decoded = self.decode(model, gen_cfg, split.x, split.y.shape[1], batch_size=EVAL_BATCH)
        return metrics.exact_match(split.y, decoded)

    def exact_match_oracle(self, model, split) -> float:
        """Exact match of greedy decoding with the output length given: `</s>` is impossible
        before each row's target length, and the output ends there (the "oracle length" of
        Newman et al., 2020, "The EOS Decision and Length Extrapolation"). Beside
        `exact_match_greedy` it tells a model that gets the tokens right but stops at the
        wrong place from one that gets the tokens wrong."""
        lengths = metrics.target_lengths(split.y)
        decoded = self.decode(
            model,
            GREEDY,
            split.x,
            max(1, int(lengths.max(initial=0))),
            batch_size=EVAL_BATCH,
            min_length=lengths,
        )
        return metrics.exact_match(split.y, metrics.cut_to_lengths(decoded, lengths))

    def decode_length(self, task, gen_cfg):
        """`generate.max_length`, else the task's target length."""
        return gen_cfg.max_length or task.val.y.shape[1]

    def decode(self, model, gen_cfg, prompts, max_length, batch_size=None, min_length=None):
        """Decoding starts at `<s>` and stops at `</s>` (not before `min_length` tokens)."""
        return modeling.decode(
            model, gen_cfg, prompts, max_length, batch_size, min_length, eos_id=END, start_id=START
        )

    def sample_rows(self, model, task, gen_cfg, count):
        """Source, target, prediction and whether they match, for the first `count` test rows."""
        if count == 0:
            return []
        split = task.test.take(slice(0, count))
        decoded = self.decode(model, gen_cfg, split.x, self.decode_length(task, gen_cfg))
        rows = []
        for i in range(len(split)):
            target = task.output_vocab.decode(split.y[i])
            prediction = task.output_vocab.decode(decoded[i])
            rows.append(
                {
                    "source": task.vocab.decode(split.x[i]),
                    "target": target,
                    "prediction": prediction,
                    "correct": target == prediction,
                }
            )
        return rows

    def heatmap(self, task, i, source, logits, weights):
        targets = task.output_vocab.labels(task.probes.y[i])
        text = (
            f"{task.vocab.decode(task.probes.x[i])} -> {task.output_vocab.decode(task.probes.y[i])}"
        )
        return weights[: len(targets), : len(source)], source, targets, f"probe {i}: {_short(text)}"

    def card_fields(self, task, cfg):
        """The target vocabulary; decoding starts at `<s>`, stops at `</s>`."""
        return {
            "output": task.output_vocab.to_dict(),
            "start_id": START,
            "end_id": END,
            "generate": generate_defaults(cfg),
            "attends_generated": False,  # each step attends over the source
        }

    def tokens_per_epoch(self, split):
        """Source and target tokens."""
        return super().tokens_per_epoch(split) + int((split.y != PAD).sum())


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


register(Seq2Seq())
