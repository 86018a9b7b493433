from keras_attn_rnn.layers.attention_decoder import AttentionDecoder
from keras_attn_rnn.layers.attention_pooling import AttentionPooling
from keras_attn_rnn.layers.sequence_attention import SequenceAttention

__all__ = ["AttentionDecoder", "AttentionPooling", "SequenceAttention"]
