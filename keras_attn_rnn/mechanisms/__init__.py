"""Attention mechanisms for `AttentionDecoder`: a score, a normalizer, and a state.

`ContentAttention` is what `AttentionDecoder(score=...)` builds; the others
carry state from step to step (where they looked before) or predict where
to look. See `Mechanism` for the interface a new one implements.
"""

import keras

from keras_attn_rnn.mechanisms.content_attention import ContentAttention
from keras_attn_rnn.mechanisms.coverage_attention import CoverageAttention
from keras_attn_rnn.mechanisms.local_predictive_attention import LocalPredictiveAttention
from keras_attn_rnn.mechanisms.location_sensitive_attention import LocationSensitiveAttention
from keras_attn_rnn.mechanisms.mechanism import Mechanism
from keras_attn_rnn.mechanisms.monotonic_attention import MonotonicAttention

__all__ = [
    "ContentAttention",
    "CoverageAttention",
    "LocalPredictiveAttention",
    "LocationSensitiveAttention",
    "Mechanism",
    "MonotonicAttention",
    "check_name",
    "class_for",
    "get",
    "names",
    "serialize",
]

# The names of `model.attention.mechanism` in the runner's configs and of `get`.
_CLASSES = {
    "content": ContentAttention,
    "monotonic": MonotonicAttention,
    "location": LocationSensitiveAttention,
    "coverage": CoverageAttention,
    "local_p": LocalPredictiveAttention,
}


def names():
    """The registered mechanism names: `("content", "monotonic", "location", ...)`."""
    return tuple(_CLASSES)


def class_for(name):
    """The `Mechanism` subclass registered under `name`."""
    check_name(name)
    return _CLASSES[name]


def check_name(identifier):
    """Raises a `ValueError` unless `identifier` is a registered mechanism name."""
    if isinstance(identifier, str) and identifier in _CLASSES:
        return
    choices = ", ".join(repr(name) for name in _CLASSES)
    raise ValueError(
        f"mechanism must be one of {choices} or a `keras_attn_rnn.mechanisms.Mechanism`. "
        f"Received: mechanism={identifier!r}"
    )


def get(identifier, **kwargs):
    """A mechanism from a name (`get("monotonic", score="general")`), a config, or an instance."""
    if isinstance(identifier, Mechanism):
        return identifier
    if isinstance(identifier, dict):
        return keras.saving.deserialize_keras_object(identifier)
    return class_for(identifier)(**kwargs)


def serialize(mechanism):
    """Config form of a mechanism (the owning decoder builds it)."""
    config = keras.saving.serialize_keras_object(mechanism)
    config.pop("build_config", None)
    return config
