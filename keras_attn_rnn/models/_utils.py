"""Argument checks and RNN construction shared by the ready models."""

import inspect

import keras

from keras_attn_rnn import _keras_compat, checks, mechanisms, normalizers, scores

RNN_KINDS = ("lstm", "gru")


def check_sizes(**sizes):
    """Each keyword must be a positive integer (e.g. `check_sizes(units=units)`)."""
    for name, value in sizes.items():
        checks.check_positive_int(name, value, allow_none=False)


def check_bool(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False. Received: {name}={value!r}")


def attention_dict(attention):
    """A `Seq2Seq`'s `attention` in its dict form: a mechanism name (`"monotonic"`) is
    `{"mechanism": name}`, a `Mechanism` instance the dict of its registered name and its
    constructor arguments (its configuration; not its weights); a dict or None as given.
    The forms `AttentionDecoder(attention=...)` takes too."""
    if isinstance(attention, str):
        return {"mechanism": attention}
    if isinstance(attention, mechanisms.Mechanism):
        name = mechanisms.REGISTRY.name_of(attention)
        if name is None:
            raise ValueError(
                "attention must be a registered mechanism (see keras_attn_rnn.mechanisms."
                f"names()) to be saved in a model's config. Received: attention={attention!r}"
            )
        accepted = mechanisms.REGISTRY.arguments(name)
        config = attention.get_config()
        return {"mechanism": name, **{key: config[key] for key in accepted if key in config}}
    return attention


def attention_options(attention, defaults, mechanism_options=False):
    """`attention` (a dict or None) merged over `defaults`; unknown keys raise.

    With `mechanism_options`, a key that is a constructor argument of the chosen
    mechanism is known too (its value is checked when the mechanism is built); a key
    set to None that is not is dropped (a config saved when every mechanism's options
    were listed with None).
    """
    if attention is None:
        attention = {}
    if not isinstance(attention, dict):
        raise ValueError(
            f"attention must be a dict with keys among {sorted(defaults)}. "
            f"Received: attention={attention!r}"
        )
    if mechanism_options:
        mechanisms.check_name(attention.get("mechanism", defaults["mechanism"]))
        accepted = set(mechanisms.REGISTRY.arguments(attention.get("mechanism", "content")))
        attention = {
            key: value
            for key, value in attention.items()
            if key in defaults or key in accepted or value is not None
        }
        defaults = {**defaults, **{key: None for key in attention if key in accepted}}
    unknown = sorted(set(attention) - set(defaults))
    if unknown and mechanism_options:
        mechanism = attention.get("mechanism", defaults["mechanism"])
        raise ValueError(
            f"attention[{unknown[0]!r}] is not an option of mechanism {mechanism!r} (it takes "
            f"{sorted(mechanisms.REGISTRY.arguments(mechanism))}). Received: attention={attention!r}"
        )
    if unknown:
        raise ValueError(
            f"attention accepts the keys {sorted(defaults)}; unknown keys {unknown}. "
            f"Received: attention={attention!r}"
        )
    options = {**defaults, **attention}
    if options.get("score") is None:
        options["score"] = defaults["score"]
    scores.get(options["score"])  # raises the score error for unknown names
    checks.check_positive_int("attention['units']", options.get("units"))
    if "normalizer" in options:
        normalizers.get(options["normalizer"])
    if "mechanism" in options:
        mechanisms.check_name(options["mechanism"])
    return options


def make_mechanism(options, defaults, units, dtype, name):
    """The `AttentionDecoder` mechanism of a model's attention options.

    Options the chosen mechanism does not take must keep their defaults;
    `units` is the mechanism's size when it needs one and none is given.
    """
    cls = mechanisms.class_for(options["mechanism"])
    accepted = inspect.signature(cls.__init__).parameters
    kwargs = {}
    for key, value in options.items():
        if key == "mechanism" or value is None:
            continue
        if key in accepted:
            kwargs[key] = value
        elif value != defaults[key]:
            raise ValueError(
                f"attention[{key!r}] is not an option of mechanism {options['mechanism']!r} "
                f"(it takes {sorted(k for k in accepted if k not in ('self', 'kwargs'))}). "
                f"Received: attention={options!r}"
            )
    if "units" in accepted and accepted["units"].default is inspect.Parameter.empty:
        kwargs.setdefault("units", units)
    return cls(**kwargs, dtype=dtype, name=name)


def serialize_attention(options):
    return {
        key: scores.serialize(value) if key == "score" else value for key, value in options.items()
    }


def make_rnn(kind, units, name, dtype, **kwargs):
    """A `keras.layers.LSTM` or `GRU` layer."""
    layer = keras.layers.LSTM if kind == "lstm" else keras.layers.GRU
    return layer(units, name=name, dtype=dtype, **kwargs)


def make_cell(kind, units, name, dtype):
    cell = keras.layers.LSTMCell if kind == "lstm" else keras.layers.GRUCell
    return cell(units, name=name, dtype=dtype)


def logits_dtype(policy):
    """Output layers compute in float32 under mixed precision (Keras's advice)."""
    return "float32" if policy.compute_dtype in ("float16", "bfloat16") else policy


def config_with_attention(config):
    """A model config with its serialized `attention["score"]` turned back into a layer."""
    config = dict(config)
    attention = dict(config.get("attention") or {})
    if isinstance(attention.get("score"), dict):
        attention["score"] = scores.get(attention["score"])
    if (
        attention.get("mechanism") == "location"
        and "cumulative" in attention
        and "location_features" not in attention
        and attention["cumulative"] is None
    ):
        # saved before `location_features`, whose default was then `cumulative=True`
        attention["cumulative"] = True
    config["attention"] = attention
    return config


def with_mask(outputs, mask):
    """`outputs` carrying the Keras mask `mask`, set inside `call` (JAX's training step
    runs `call` without `__call__`, which is where `compute_mask` would apply)."""
    return _keras_compat.set_keras_mask(outputs, mask)
