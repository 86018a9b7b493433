from keras import ops

from keras_attn_rnn import serializable
from keras_attn_rnn.samplers.sampler import Sampler


@serializable.register
class GreedySampler(Sampler):
    """Greedy search: the most likely token at every step.

    Args:
        temperature: accepted for a uniform interface; it never changes the
            argmax.

    Examples:
        >>> from keras_attn_rnn.generation import generate
        >>> from keras_attn_rnn.models import AttentiveLanguageModel
        >>> from keras_attn_rnn.samplers import GreedySampler
        >>> lm = AttentiveLanguageModel(vocabulary_size=20, units=8)
        >>> generate(lm, [[3, 4]], max_length=5, sampler=GreedySampler()).tokens.shape
        (1, 5)
    """

    def get_next_token(self, logits, seed):
        return ops.argmax(logits, axis=-1)
