"""Decoding strategies for `keras_attn_rnn.generation.generate`, after keras-hub's samplers.

Each strategy is a `Sampler` subclass; `get("top_k", k=5)` builds one from
its name, `serialize` / `deserialize` turn one into a config and back.
Subclass `Sampler` and override `get_next_token(logits, seed)` to add your
own (see `Sampler`).
"""

import inspect

import keras

from keras_attn_rnn.samplers.beam_sampler import BeamSampler
from keras_attn_rnn.samplers.greedy_sampler import GreedySampler
from keras_attn_rnn.samplers.random_sampler import RandomSampler
from keras_attn_rnn.samplers.sampler import Sampler, gumbel_noise
from keras_attn_rnn.samplers.top_k_sampler import TopKSampler
from keras_attn_rnn.samplers.top_p_sampler import TopPSampler

__all__ = [
    "BeamSampler",
    "GreedySampler",
    "RandomSampler",
    "Sampler",
    "TopKSampler",
    "TopPSampler",
    "arguments",
    "deserialize",
    "get",
    "gumbel_noise",
    "names",
    "serialize",
]

# The names `generate(sampler=...)`, the runner's `generate.strategy` and `get` accept.
_CLASSES = {
    "greedy": GreedySampler,
    "sample": RandomSampler,
    "top_k": TopKSampler,
    "top_p": TopPSampler,
    "beam": BeamSampler,
}


def names():
    """The registered sampler names: `("greedy", "sample", "top_k", "top_p", "beam")`."""
    return tuple(_CLASSES)


def check_name(identifier, argument="sampler"):
    """Raises a `ValueError` naming `argument` unless `identifier` is a registered name."""
    if isinstance(identifier, str) and identifier in _CLASSES:
        return
    choices = ", ".join(repr(name) for name in _CLASSES)
    raise ValueError(
        f"{argument} must be one of {choices} or a `keras_attn_rnn.samplers.Sampler`. "
        f"Received: {argument}={identifier!r}"
    )


def class_for(name):
    """The `Sampler` subclass registered under `name`."""
    check_name(name)
    return _CLASSES[name]


def arguments(name):
    """The constructor arguments of the sampler registered under `name`, e.g. `("k", "temperature")`."""
    parameters = inspect.signature(class_for(name).__init__).parameters
    return tuple(key for key in parameters if key not in ("self", "args", "kwargs"))


def get(identifier, vocabulary_size=None, **kwargs):
    """A sampler from a name (`get("top_k", k=5)`), a config dict, or an instance.

    Args:
        identifier: a name of `names()`, a dict made by `serialize`, or a
            `Sampler` (returned as is; no `kwargs` then).
        vocabulary_size: if given, arguments counted in tokens (`k`) are
            checked against it.
        **kwargs: the constructor arguments for a name.
    """
    if isinstance(identifier, Sampler):
        if kwargs:
            raise ValueError(
                f"sampler arguments go to the constructor of a sampler given by name; "
                f"this one is built already. Received: sampler={identifier!r}, "
                f"arguments {sorted(kwargs)}"
            )
        sampler = identifier
    elif isinstance(identifier, dict):
        sampler = deserialize(identifier)
    else:
        cls = class_for(identifier)
        cls.check_arguments(kwargs, vocabulary_size)
        return cls(**kwargs)
    if vocabulary_size is not None:
        sampler.check_vocabulary(vocabulary_size)
    return sampler


def serialize(sampler):
    """The config of a sampler (Keras's serialization format, JSON-able)."""
    return keras.saving.serialize_keras_object(sampler)


def deserialize(config, custom_objects=None):
    """A sampler back from `serialize`'s config."""
    sampler = keras.saving.deserialize_keras_object(config, custom_objects=custom_objects)
    if not isinstance(sampler, Sampler):
        raise ValueError(
            f"config must describe a keras_attn_rnn.samplers.Sampler. Received: config={config!r}"
        )
    return sampler
