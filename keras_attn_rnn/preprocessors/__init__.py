"""Preprocessors: strings -> the padded id arrays a ready model trains and generates on.

`Seq2SeqPreprocessor` (source and target strings -> `[source, target_in]`,
`target_out`), `CausalLMPreprocessor` (texts -> next-token inputs and targets) and
`ClassifierPreprocessor` (texts and class names -> ids and class ids), after
keras-hub's. Each holds its tokenizers, which save inside the model's `.keras` file
when the model is given the preprocessor (`Seq2Seq(..., preprocessor=...)`).
"""

from keras_attn_rnn.preprocessors.causal_lm_preprocessor import CausalLMPreprocessor
from keras_attn_rnn.preprocessors.classifier_preprocessor import ClassifierPreprocessor
from keras_attn_rnn.preprocessors.preprocessor import Preprocessor
from keras_attn_rnn.preprocessors.seq2seq_preprocessor import Seq2SeqPreprocessor

__all__ = [
    "CausalLMPreprocessor",
    "ClassifierPreprocessor",
    "Preprocessor",
    "Seq2SeqPreprocessor",
]
