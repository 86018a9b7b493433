import numpy as np

from keras_attn_rnn import _deprecation, serializable
from keras_attn_rnn.preprocessors import preprocessor
from keras_attn_rnn.preprocessors.preprocessor import Preprocessor


@serializable.register
@_deprecation.renamed(old_order=("sequence_length", "labels"))
class ClassifierPreprocessor(Preprocessor):
    """Texts (and labels) -> what `AttentiveClassifier` trains on.

    `preprocessor(texts, labels)` returns `(ids, label_ids, None)`: the texts' ids cut to
    `sequence_length` (int32, right-padded with 0) and, with `labels` (a list of class
    names), each label's index in it; integer labels pass through.

    Args:
        tokenizer: an adapted tokenizer (an instance, a name or a config).
        sequence_length: the most ids per text, or None.
        labels: the class names in class-id order, or None for integer labels.

    Examples:
        >>> from keras_attn_rnn.preprocessors import ClassifierPreprocessor
        >>> from keras_attn_rnn.tokenizers import WordTokenizer
        >>> tokenizer = WordTokenizer()
        >>> tokenizer.adapt(["good film", "bad film"])
        >>> ids, y, _ = ClassifierPreprocessor(tokenizer, labels=["neg", "pos"])(
        ...     ["good film"], ["pos"])
        >>> ids.tolist(), y.tolist()
        ([[5, 4]], [1])
    """

    def __init__(self, tokenizer, *, sequence_length=None, labels=None, **kwargs):
        preprocessor.check_length("sequence_length", sequence_length)
        tokenizer = preprocessor.tokenizer_argument("tokenizer", tokenizer)
        if labels is not None:
            labels = list(labels)
            if len(labels) < 2 or len(set(labels)) != len(labels):
                raise ValueError(
                    "labels must list at least two distinct class names. "
                    f"Received: labels={labels[:10]!r}"
                )
        super().__init__(**kwargs)
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.labels = labels

    def call(self, x, y=None, sample_weight=None):
        ids, self.last_truncated = self.encode(self.tokenizer, x, self.sequence_length)
        if y is None:
            return ids
        return ids, self.label_ids(y, len(ids)), sample_weight

    def label_ids(self, y, count):
        values = [y] if isinstance(y, (str, bytes)) else list(y)
        values = [_label(value) for value in values]
        if len(values) != count:
            raise ValueError(
                f"labels must have one per text. Received: {count} texts and {len(values)} labels"
            )
        if self.labels is None:
            return np.asarray(values, "int32")
        index = {label: i for i, label in enumerate(self.labels)}
        for i, value in enumerate(values):
            if value not in index:
                raise ValueError(
                    f"labels[{i}] must be one of the preprocessor's labels "
                    f"{self.labels[:10]!r}. Received: {value!r}"
                )
        return np.asarray([index[value] for value in values], "int32")

    def get_config(self):
        return {
            **super().get_config(),
            "tokenizer": preprocessor.serialize(self.tokenizer),
            "sequence_length": self.sequence_length,
            "labels": self.labels,
        }


def _label(value):
    """A label as Python: bytes (a `tf.data` string) as text, a NumPy scalar as its value."""
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    return value.decode("utf-8") if isinstance(value, bytes) else value
