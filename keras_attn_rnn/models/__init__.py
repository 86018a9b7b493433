"""Ready models built from the library's layers."""

from keras_attn_rnn.models._utils import RNN_KINDS
from keras_attn_rnn.models.attentive_classifier import AttentiveClassifier
from keras_attn_rnn.models.attentive_language_model import AttentiveLanguageModel
from keras_attn_rnn.models.seq2seq import DECODERS, Seq2Seq

# `RNN_KINDS`: what every ready model's `rnn=` takes; `DECODERS`: what `Seq2Seq`'s `decoder=`
# takes (the runner's `model.rnn` and `model.decoder` read them).
__all__ = ["DECODERS", "RNN_KINDS", "AttentiveClassifier", "AttentiveLanguageModel", "Seq2Seq"]
