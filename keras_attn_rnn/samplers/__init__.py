"""Decoding strategies for `keras_attn_rnn.generation.generate`, after keras-hub's samplers.

Each strategy is a `Sampler` subclass; `get("top_k", k=5)` builds one from
its name (keras-hub's names: `"greedy"`, `"random"`, `"top_k"`, `"top_p"`, `"beam"`;
the older `"sample"` still means `"random"`, with a `DeprecationWarning`), `serialize` / `deserialize` turn one into a config and back.
Subclass `Sampler` and override `get_next_token(logits, seed)` to add your
own (see `Sampler`).
"""

import warnings

from keras_attn_rnn import registry
from keras_attn_rnn.samplers.beam_sampler import BeamSampler
from keras_attn_rnn.samplers.greedy_sampler import GreedySampler
from keras_attn_rnn.samplers.random_sampler import RandomSampler
from keras_attn_rnn.samplers.sampler import Sampler, gumbel_noise, without_early_eos
from keras_attn_rnn.samplers.top_k_sampler import TopKSampler
from keras_attn_rnn.samplers.top_p_sampler import TopPSampler

__all__ = [
    "BeamSampler",
    "GreedySampler",
    "RandomSampler",
    "REGISTRY",
    "Sampler",
    "TopKSampler",
    "TopPSampler",
    "RENAMED",
    "arguments",
    "current_name",
    "deserialize",
    "get",
    "gumbel_noise",
    "is_name",
    "names",
    "serialize",
    "without_early_eos",
]

# The names `generate(sampler=...)`, the runner's `generate.strategy` and `get` accept.
REGISTRY = registry.Registry(
    "sampler",
    Sampler,
    "a `keras_attn_rnn.samplers.Sampler`",
    {
        "greedy": GreedySampler,
        "random": RandomSampler,
        "top_k": TopKSampler,
        "top_p": TopPSampler,
        "beam": BeamSampler,
    },
)


# Older names, each kept as a deprecated alias of keras-hub's name for the same sampler.
RENAMED = {"sample": "random"}


def names():
    """The registered sampler names: `("greedy", "random", "top_k", "top_p", "beam")`
    (deprecated aliases such as `"sample"` are not listed)."""
    return REGISTRY.names()


def is_name(identifier):
    """Whether `identifier` is a registered name or a deprecated alias of one."""
    return isinstance(identifier, str) and (identifier in RENAMED or identifier in names())


def current_name(identifier):
    """`identifier` with a deprecated name replaced by its new one (with a
    `DeprecationWarning`); anything else as it is."""
    if isinstance(identifier, str) and identifier in RENAMED:
        warnings.warn(
            f"the sampler name {identifier!r} is deprecated: use {RENAMED[identifier]!r} "
            "(keras-hub's name for the same sampler)",
            DeprecationWarning,
            stacklevel=3,
        )
        return RENAMED[identifier]
    return identifier


def check_name(identifier, argument="sampler"):
    """Raises a `ValueError` naming `argument` unless `identifier` is a registered name."""
    REGISTRY.check_name(current_name(identifier), argument)


def class_for(name):
    """The `Sampler` subclass registered under `name`."""
    return REGISTRY.class_for(current_name(name))


def arguments(name):
    """The constructor arguments of sampler `name`, e.g. `("k", "temperature")`."""
    return REGISTRY.arguments(current_name(name))


def get(identifier, vocabulary_size=None, **kwargs):
    """A sampler from a name (`get("top_k", k=5)`), a config dict, or an instance.

    Args:
        identifier: a name of `names()`, a dict made by `serialize`, or a
            `Sampler` (returned as is; no `kwargs` then).
        vocabulary_size: if given, arguments counted in tokens (`k`) are
            checked against it.
        **kwargs: the constructor arguments for a name.
    """
    given, identifier = identifier, current_name(identifier)
    if isinstance(identifier, str):
        cls = class_for(identifier)
        kwargs = cls.current_arguments(kwargs)
        unknown = sorted(set(kwargs) - set(arguments(identifier)))
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not an argument "
                f"of sampler={given!r}, which takes {list(arguments(identifier))}. "
                f"Received: {', '.join(f'{key}={kwargs[key]!r}' for key in unknown)}"
            )
        cls.check_arguments({**REGISTRY.defaults(identifier), **kwargs}, vocabulary_size)
        return cls(**kwargs)
    sampler = REGISTRY.get(identifier, **kwargs)
    if vocabulary_size is not None:
        sampler.check_vocabulary(vocabulary_size)
    return sampler


def serialize(sampler):
    """The config of a sampler (Keras's serialization format, JSON-able)."""
    return REGISTRY.serialize(sampler)


def deserialize(config, custom_objects=None):
    """A sampler back from `serialize`'s config."""
    return REGISTRY.deserialize(config, custom_objects)
