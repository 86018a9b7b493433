"""Attention-based RNN layers for Keras 3."""

from keras_attn_rnn import generation, generators, masking, models, plotting, samplers, scores
from keras_attn_rnn.layers import AttentionDecoder, AttentionPooling, SequenceAttention

__version__ = "0.1.0"

__all__ = [
    "AttentionDecoder",
    "AttentionPooling",
    "SequenceAttention",
    "generation",
    "generators",
    "masking",
    "models",
    "plotting",
    "samplers",
    "scores",
]
