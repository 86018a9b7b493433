"""Seeds as tensors for `keras.random` inside compiled loops."""

import keras
from keras import ops

from keras_attn_rnn import _keras_compat

# Draw i from one TensorSeed gets [seed_0, seed_1 + i * _DRAW_STRIDE].
_DRAW_STRIDE = 1_000_003


class TensorSeed(keras.random.SeedGenerator):
    """A `(2,)` int seed tensor as a `SeedGenerator`, for `keras.random` ops inside a loop.

    Keras's random ops take an int or a `SeedGenerator`; inside a compiled loop
    the seed must be a tensor (derived from a generation seed and the step, or
    carried in a decoder's state). Successive draws from one `TensorSeed`
    get distinct seeds; the first gets `seed` itself.
    """

    def __init__(self, seed):  # no state variable: nothing to update in the loop
        self._seed, self._draws = seed, 0

    def next(self, ordered=True):
        seed = ops.cast(self._seed, "int32")
        if self._draws:
            seed = seed + ops.convert_to_tensor([0, self._draws * _DRAW_STRIDE], "int32")
        self._draws += 1
        return ops.cast(seed, _keras_compat.random_seed_dtype())
