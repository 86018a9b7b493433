from keras_attn_rnn.layers.attention_pooling import AttentionPooling
from keras_attn_rnn.layers.sequence_attention import SequenceAttention

__all__ = ["AttentionPooling", "SequenceAttention"]
