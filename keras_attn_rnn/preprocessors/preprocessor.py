import keras
import numpy as np

from keras_attn_rnn import _keras_compat, tokenizers
from keras_attn_rnn.tokenizers.tokenizer import END, START, check_texts


class Preprocessor(keras.layers.Layer):
    """Base of the preprocessors: strings in, padded int32 id arrays out (NumPy), on every
    backend, with the tokenizers inside the layer's config.

    `preprocessor(x, y=None, sample_weight=None)` returns `(x, y, sample_weight)` in the
    form the matching ready model trains on (`keras.Model.fit`'s arguments); a subclass
    implements `call`. Rows are padded with 0 to the batch's longest row, and cut to the
    preprocessor's length (None: no cut); `last_truncated` holds, per row of the last
    call, whether a text was cut.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        _keras_compat.accept_python_inputs(self)
        self.last_truncated = None

    @classmethod
    def from_config(cls, config):
        """`cls(**config)`: a damaged tokenizer's error reaches the caller as it is (Keras's
        `Layer.from_config` would wrap it in a `TypeError` printing the whole config)."""
        return cls(**config)

    def encode(self, tokenizer, texts, length, start=False, end=False, name="texts"):
        """`(ids (B, T) int32, truncated (B,) bool)`: each text's ids cut to `length` tokens
        (the start and end ids not counted), with `<s>` before and `</s>` after when asked."""
        rows, truncated = [], []
        for text in check_texts(texts, name):
            ids = tokenizer.encode(text)
            truncated.append(length is not None and len(ids) > length)
            ids = ids if length is None else ids[:length]
            rows.append([START] * start + ids + [END] * end)
        return pad(rows), np.asarray(truncated, bool)


def pad(rows, width=None):
    """`rows` (lists of ids) right-padded with 0 into an int32 array `(B, width or longest)`."""
    width = max((len(row) for row in rows), default=0) if width is None else width
    out = np.zeros((len(rows), max(width, 1)), "int32")
    for i, row in enumerate(rows):
        out[i, : len(row)] = row[:width]
    return out


def check_length(name, value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be a positive integer or None. Received: {name}={value!r}")


def tokenizer_argument(name, value):
    """A tokenizer from an instance, a name or a config; raises naming `name` otherwise."""
    return tokenizers.REGISTRY.get(value, argument=name)


def serialize(tokenizer):
    return tokenizers.serialize(tokenizer)
