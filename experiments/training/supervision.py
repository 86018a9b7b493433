"""Attention losses in training: `train.alignment_loss_weight` and `train.coverage_loss_weight`.

`SupervisedAttention` wraps the task's model for `fit` only: it takes
`(model inputs, ground-truth positions)`, returns the model's logits (a
copying model's probabilities: the task's loss and metrics are unchanged) and adds the weighted
`keras_attn_rnn.losses.alignment_loss` / `coverage_loss` of the model's own
attention to the training loss with `add_loss`. Evaluation, samples, heatmaps
and the logged model use the wrapped model (`task_model`).
"""

from __future__ import annotations

import keras
from keras import ops

from experiments.training.batches import split_inputs
from keras_attn_rnn import losses


class SupervisedAttention(keras.Model):
    """`model` trained with attention losses (see the module docstring).

    Args:
        model: a ready model whose call takes `return_attention_scores=True`.
        alignment_weight: weight of the alignment cross-entropy (0: off).
        coverage_weight: weight of the coverage loss (0: off).
    """

    def __init__(self, model, alignment_weight=0.0, coverage_weight=0.0, **kwargs):
        super().__init__(name=f"supervised_{model.name}", **kwargs)
        self.model = model
        self.alignment_weight = float(alignment_weight)
        self.coverage_weight = float(coverage_weight)

    @property
    def needs_positions(self) -> bool:
        return self.alignment_weight > 0

    def call(self, inputs, training=None):
        model_inputs, positions = inputs if self.needs_positions else (inputs, None)
        if isinstance(model_inputs, tuple):
            model_inputs = list(model_inputs)
        # a copying model returns its p_gen too, and probabilities for logits
        logits, alignments = self.model(
            model_inputs, training=training, return_attention_scores=True
        )[:2]
        if self.alignment_weight:
            loss = ops.mean(losses.alignment_loss(positions, alignments))
            self.add_loss(self.alignment_weight * loss)
        if self.coverage_weight:
            self.add_loss(self.coverage_weight * ops.mean(losses.coverage_loss(alignments)))
        return logits


def wrap(model, cfg):
    """The model `fit` trains: `model` itself, or wrapped when an attention loss is on."""
    if cfg.train.alignment_loss_weight or cfg.train.coverage_loss_weight:
        return SupervisedAttention(
            model, cfg.train.alignment_loss_weight, cfg.train.coverage_loss_weight
        )
    return model


def task_model(model):
    """The task's own model inside what `fit` trains."""
    return model.model if isinstance(model, SupervisedAttention) else model


def fit_inputs(model, split):
    """What the trained model is called on for `split`: its inputs, with the ground-truth
    positions when the alignment loss needs them."""
    return inputs_function(model)(split)


def inputs_function(model):
    """`fit_inputs(model, ·)` as a function of the split alone. It holds no reference to
    the model: a feed that outlives its `fit` (TensorFlow's generator registry keeps it)
    must not keep the model, its weights and traced steps alive after the run (a sweep's
    points, a study's trials)."""
    if isinstance(model, SupervisedAttention) and model.needs_positions:
        return _inputs_and_positions
    return split_inputs


def _inputs_and_positions(split):
    return split_inputs(split), split.alignment
