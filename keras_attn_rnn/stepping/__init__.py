"""The step API that `generation.generate` and the samplers decode, built once.

`StepModel` is the API: `init_cache` runs the prompts (or encodes the source)
once, `next_logits` is one token's step with the state carried in an explicit
cache. Two implementations serve every model that has it:

- `CausalAttentionStep`: a language model's step: the token's embedding, one
  step of each stacked RNN cell, one cached causal `SequenceAttention` read
  over the past hidden states, a head on `[h; context]`
  (`models.AttentiveLanguageModel`, `generators.CausalLMGenerator`);
- `DecoderStep`: an encoder-decoder's step: the target token's embedding, one
  decoder step (`AttentionDecoderStep`, an `AttentionDecoder`'s, or
  `Seq2Seq`'s Luong arrangement), a head (`models.Seq2Seq`,
  `generators.Seq2SeqGenerator`).
"""

from keras_attn_rnn.stepping.attention_decoder_step import AttentionDecoderStep
from keras_attn_rnn.stepping.causal_attention_step import CausalAttentionStep
from keras_attn_rnn.stepping.decoder_step import DecoderStep, DecoderStepOutputs
from keras_attn_rnn.stepping.step_model import StepModel

__all__ = [
    "AttentionDecoderStep",
    "CausalAttentionStep",
    "DecoderStep",
    "DecoderStepOutputs",
    "StepModel",
]
