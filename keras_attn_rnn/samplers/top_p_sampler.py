import numpy as np
from keras import ops

from keras_attn_rnn import serializable
from keras_attn_rnn.samplers.sampler import IMPOSSIBLE, Sampler, gumbel_noise


@serializable.register
class TopPSampler(Sampler):
    """Nucleus (top-p) sampling: a token drawn from the smallest set of most likely
    tokens whose probabilities sum to at least `p`.

    Args:
        p: the probability mass of the nucleus, in `(0, 1]`; 0.9 by default
            (keras-hub's 0.1 keeps little more than the best token).
        temperature: divides the logits first (before the nucleus is cut);
            `0` is greedy.

    Examples:
        >>> from keras_attn_rnn.generation import generate
        >>> from keras_attn_rnn.models import AttentiveLanguageModel
        >>> from keras_attn_rnn.samplers import TopPSampler
        >>> lm = AttentiveLanguageModel(vocabulary_size=20, units=8)
        >>> generate(lm, [[3, 4]], 5, sampler=TopPSampler(p=0.9), seed=1).tokens.shape
        (1, 5)

    Reference:
        Holtzman et al., 2020, "The Curious Case of Neural Text Degeneration".
    """

    def __init__(self, p=0.9, temperature=1.0):
        self.check_arguments({"p": p, "temperature": temperature})
        super().__init__(temperature)
        self.p = float(p)

    @classmethod
    def check_arguments(cls, arguments, vocabulary_size=None):
        super().check_arguments(arguments, vocabulary_size)
        p = arguments.get("p")
        numbers = (int, float, np.integer, np.floating)
        if p is None or isinstance(p, bool) or not isinstance(p, numbers) or not 0 < p <= 1:
            raise ValueError(f"top_p needs p, a float in (0, 1]. Received: p={p!r}")

    def get_next_token(self, logits, seed):
        values, indices = ops.top_k(logits, ops.shape(logits)[-1])
        if self.p < 1:
            probs = ops.softmax(values, axis=-1)
            before = ops.cumsum(probs, axis=-1) - probs
            values = ops.where(ops.less(before, self.p), values, IMPOSSIBLE)
        choice = ops.argmax(values + gumbel_noise(ops.shape(values), seed), axis=-1)
        return ops.squeeze(ops.take_along_axis(indices, ops.expand_dims(choice, -1), axis=-1), -1)

    def get_config(self):
        return {**super().get_config(), "p": self.p}
