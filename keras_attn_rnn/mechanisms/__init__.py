"""Attention mechanisms for `AttentionDecoder`: a score, a normalizer, and a state.

`ContentAttention` is what `AttentionDecoder(score=...)` builds; the others
carry state from step to step (where they looked before) or predict where
to look. See `Mechanism` for the interface a new one implements.
"""

from keras_attn_rnn import registry
from keras_attn_rnn.mechanisms.content_attention import ContentAttention
from keras_attn_rnn.mechanisms.coverage_attention import CoverageAttention
from keras_attn_rnn.mechanisms.dynamic_convolution_attention import DynamicConvolutionAttention
from keras_attn_rnn.mechanisms.gmm_attention import GMMAttention
from keras_attn_rnn.mechanisms.local_predictive_attention import LocalPredictiveAttention
from keras_attn_rnn.mechanisms.location_attention import LocationAttention
from keras_attn_rnn.mechanisms.location_sensitive_attention import LocationSensitiveAttention
from keras_attn_rnn.mechanisms.mechanism import Mechanism
from keras_attn_rnn.mechanisms.monotonic_attention import MonotonicAttention

__all__ = [
    "ContentAttention",
    "CoverageAttention",
    "DynamicConvolutionAttention",
    "GMMAttention",
    "LocalPredictiveAttention",
    "LocationAttention",
    "LocationSensitiveAttention",
    "Mechanism",
    "MonotonicAttention",
    "REGISTRY",
    "check_name",
    "class_for",
    "get",
    "names",
    "serialize",
]

# The names of `model.attention.mechanism` in the runner's configs and of `get`.
REGISTRY = registry.Registry(
    "mechanism",
    Mechanism,
    "a `keras_attn_rnn.mechanisms.Mechanism`",
    {
        "content": ContentAttention,
        "monotonic": MonotonicAttention,
        "location": LocationSensitiveAttention,
        "coverage": CoverageAttention,
        "local_p": LocalPredictiveAttention,
        "gmm": GMMAttention,
        "dca": DynamicConvolutionAttention,
        "relative_location": LocationAttention,
    },
)


def names():
    """The registered mechanism names: `("content", "monotonic", "location", ...)`."""
    return REGISTRY.names()


def class_for(name):
    """The `Mechanism` subclass registered under `name`."""
    return REGISTRY.class_for(name)


def check_name(identifier):
    """Raises a `ValueError` unless `identifier` is a registered mechanism name."""
    REGISTRY.check_name(identifier)


def get(identifier, **kwargs):
    """A mechanism from a name (`get("monotonic", score="general")`), a config, or an instance."""
    return REGISTRY.get(identifier, **kwargs)


def serialize(mechanism):
    """Config form of a mechanism (the owning decoder builds it)."""
    return REGISTRY.serialize(mechanism)
