"""Your own encoder-decoder or language model, driven by `generation.generate`.

`Seq2SeqGenerator(encoder, target_embedding, decoder, head)` and
`CausalLMGenerator(embedding, rnn, attention, head)` take the layers of a
model you built and trained (functional or subclassed) and give
`generate` the step API it drives: one RNN step plus one attention read per
token, the state carried, ragged prompts included. Their `generate(...)`
method is `generation.generate(self, ...)`.
"""

from keras_attn_rnn.generators.causal_lm_generator import CausalLMGenerator
from keras_attn_rnn.generators.seq2seq_generator import Seq2SeqGenerator

__all__ = ["CausalLMGenerator", "Seq2SeqGenerator"]
