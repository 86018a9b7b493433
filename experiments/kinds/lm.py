"""`lm`: next-token prediction, from `AttentiveLanguageModel` (causal self-attention)."""

from __future__ import annotations

from experiments.data import metrics
from experiments.kinds import register
from experiments.kinds.base import TaskKind, generate_defaults
from keras_attn_rnn import models

HEATMAP_TOKENS = 32  # a probe's causal heatmap shows its first tokens only


@register
class LanguageModel(TaskKind):
    """RNN -> causal SequenceAttention over its own past states -> next-token logits."""

    name = "lm"
    model_type = "AttentiveLanguageModel"
    default_score = "dot"
    metric_names = ("perplexity", "bits_per_char")
    primary_metric = "test_bits_per_char"
    attention_options = ("window",)  # SequenceAttention's local window
    heatmap_rows = "token predicting the next (query)"  # the y-axis of its heatmaps
    # a causal model: one direction, no decoder, no copying, no pooling query
    unused_keys = (*TaskKind.unused_keys, "model.bidirectional")

    def build_model(self, cfg, task):
        m = cfg.model
        return models.AttentiveLanguageModel(
            vocabulary_size=len(task.vocab),
            num_layers=m.num_layers,
            attention={**self.attention(cfg), **m.attention.model_extra},  # window
            embedding_dim=m.embedding_dim,
            units=m.units,
            rnn=m.rnn,
            dropout=m.dropout,
        )

    def logit_summary(self, logits, targets):
        """The targets' log-probabilities, for perplexity."""
        return metrics.target_log_probs(targets, logits)

    def task_metrics(self, model, task, split, log_probs):
        return metrics.language_model_metrics(split.y, log_probs)

    def sample_rows(self, model, task, gen_cfg, count):
        """Continuations of `generate.prompts` (else the task's prompts), at most `count`."""
        if count == 0:
            return []
        prompts = (gen_cfg.prompts or task.prompts)[:count]
        ids = [task.tokenizer.encode(p) for p in prompts]  # as the served text model does
        length = self.decode_length(task, gen_cfg)
        decoded = self.decode(model, gen_cfg.built_sampler, ids, length, seed=gen_cfg.seed)
        return [
            {"prompt": p, "continuation": task.vocab.decode(row)}
            for p, row in zip(prompts, decoded)
        ]

    def card_fields(self, task, cfg):
        """The same vocabulary out; no start or end id (as `sample_rows` decodes)."""
        return {
            "output": task.vocab.card(),
            "start_id": None,
            "end_id": None,
            "generate": generate_defaults(cfg),
            # each step attends over the cache: the prompt, then what was generated
            "attends_generated": True,
        }

    def heatmap(self, task, i, source, logits, weights):
        n = min(HEATMAP_TOKENS, len(source))
        tokens = source[:n]
        return weights[:n, :n], tokens, tokens, f"probe {i}: causal self-attention"
