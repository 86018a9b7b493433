from keras import ops

from keras_attn_rnn import serializable
from keras_attn_rnn.samplers.sampler import Sampler, gumbel_noise


@serializable.register
class RandomSampler(Sampler):
    """Temperature sampling: a token drawn from `softmax(logits / temperature)`.

    Drawn with the Gumbel-max trick (`argmax(logits + Gumbel noise)`), so the
    same seed gives the same tokens inside the compiled loop.

    Args:
        temperature: below 1 sharpens the distribution, above 1 flattens
            it; `0` is greedy.

    Examples:
        >>> from keras_attn_rnn.generation import generate
        >>> from keras_attn_rnn.models import AttentiveLanguageModel
        >>> from keras_attn_rnn.samplers import RandomSampler
        >>> lm = AttentiveLanguageModel(vocabulary_size=20, units=8)
        >>> generate(lm, [[3, 4]], 5, sampler=RandomSampler(temperature=0.7), seed=1).tokens.shape
        (1, 5)
    """

    def get_next_token(self, logits, seed):
        return ops.argmax(logits + gumbel_noise(ops.shape(logits), seed), axis=-1)
