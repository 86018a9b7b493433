"""Attention-based RNN layers for Keras 3."""

from keras_attn_rnn import (
    copying,
    generation,
    generators,
    losses,
    masking,
    models,
    plotting,
    preprocessors,
    samplers,
    scores,
    tokenizers,
)
from keras_attn_rnn.layers import AttentionDecoder, AttentionPooling, SequenceAttention

__version__ = "0.1.0"

__all__ = [
    "AttentionDecoder",
    "AttentionPooling",
    "SequenceAttention",
    "copying",
    "generation",
    "generators",
    "losses",
    "masking",
    "models",
    "plotting",
    "preprocessors",
    "samplers",
    "scores",
    "tokenizers",
]
