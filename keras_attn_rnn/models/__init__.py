"""Ready models built from the library's layers."""

from keras_attn_rnn.models.attentive_classifier import AttentiveClassifier
from keras_attn_rnn.models.attentive_language_model import AttentiveLanguageModel
from keras_attn_rnn.models.seq2seq import Seq2Seq

__all__ = ["AttentiveClassifier", "AttentiveLanguageModel", "Seq2Seq"]
