"""Attention-based RNN layers for Keras 3."""

from keras_attn_rnn import masking, scores
from keras_attn_rnn.layers import AttentionDecoder, AttentionPooling, SequenceAttention

__version__ = "0.1.0"

__all__ = ["AttentionDecoder", "AttentionPooling", "SequenceAttention", "masking", "scores"]

from keras_attn_rnn import generation, models, plotting  # noqa: E402

__all__ += ["generation", "models", "plotting"]
