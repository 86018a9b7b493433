"""Your own encoder-decoder or language model, driven by `generation.generate`.

`Seq2SeqGenerator(encoder, target_embedding, decoder, head)`,
`CausalLMGenerator(embedding, rnn, attention, head)` and
`KerasAttentionGenerator(encoder, target_embedding, decoder_rnn, attention, head)`
(a model of Keras's own layers: an RNN decoder and `keras.layers.Attention`)
take the layers of a model you built and trained (functional or subclassed) and give
`generate` the step API it drives: one RNN step plus one attention read per
token, the state carried, ragged prompts included. Their `generate(...)`
method is `generation.generate(self, ...)`, or with a `preprocessor`
strings in and out.
"""

from keras_attn_rnn.generators.causal_lm_generator import CausalLMGenerator
from keras_attn_rnn.generators.keras_attention_generator import KerasAttentionGenerator
from keras_attn_rnn.generators.seq2seq_generator import Seq2SeqGenerator

__all__ = ["CausalLMGenerator", "KerasAttentionGenerator", "Seq2SeqGenerator"]
