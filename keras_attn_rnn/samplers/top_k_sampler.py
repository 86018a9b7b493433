import numpy as np
from keras import ops

from keras_attn_rnn import serializable
from keras_attn_rnn.samplers.sampler import Sampler, gumbel_noise


@serializable.register
class TopKSampler(Sampler):
    """Top-k sampling: a token drawn from the `k` most likely ones.

    Args:
        k: how many tokens to sample from, in `[1, V]` (`V` the model's
            vocabulary size, checked by `generate`); 5 by default, as
            keras-hub's.
        temperature: divides the logits first; `0` is greedy.

    Examples:
        >>> from keras_attn_rnn.generation import generate
        >>> from keras_attn_rnn.models import AttentiveLanguageModel
        >>> from keras_attn_rnn.samplers import TopKSampler
        >>> lm = AttentiveLanguageModel(vocabulary_size=20, units=8)
        >>> generate(lm, [[3, 4]], 5, sampler=TopKSampler(k=5), seed=1).tokens.shape
        (1, 5)

    Reference:
        Fan et al., 2018, "Hierarchical Neural Story Generation".
    """

    def __init__(self, k=5, temperature=1.0):
        self.check_arguments({"k": k, "temperature": temperature})
        super().__init__(temperature)
        self.k = int(k)

    @classmethod
    def check_arguments(cls, arguments, vocabulary_size=None):
        super().check_arguments(arguments, vocabulary_size)
        k = arguments.get("k")
        high = vocabulary_size if vocabulary_size is not None else float("inf")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= high:
            bound = vocabulary_size if vocabulary_size is not None else "V"
            raise ValueError(
                f"top_k needs k, an integer in [1, {bound}] (the vocabulary size). "
                f"Received: k={k!r}"
            )

    def get_next_token(self, logits, seed):
        values, indices = ops.top_k(logits, self.k)
        choice = ops.argmax(values + gumbel_noise(ops.shape(values), seed), axis=-1)
        return ops.squeeze(ops.take_along_axis(indices, ops.expand_dims(choice, -1), axis=-1), -1)

    def get_config(self):
        return {**super().get_config(), "k": self.k}
