"""One registry type for every choice by name: scores, normalizers, mechanisms, samplers.

A `Registry` maps names to classes (or functions) of one kind and resolves an
identifier the way Keras' own `get` functions do (`keras.activations.get`,
`keras.optimizers.get`): a registered name, a config dict made by
`serialize`, or an instance passed through. A new kind member is one class
plus `REGISTRY.register("name", cls)`; everything that lists, checks or
builds members (the layers, the runner's config, the contract tests) reads
the registry, so nothing else changes.
"""

import inspect

import keras


class Registry:
    """Names to members of one kind.

    Args:
        argument: the argument name errors use (`"score"`, `"sampler"`).
        base: the members' base class; `None` for functions (then any
            callable is an instance).
        expected: how errors describe an instance (`"a keras_attn_rnn.scores.Score"`).
        members: `{name: class or function}`, in listing order.
    """

    def __init__(self, argument, base, expected, members):
        self.argument = argument
        self.base = base
        self.expected = expected
        self._members = {}
        for name, member in members.items():
            self.register(name, member)

    def register(self, name, member):
        """Adds `member` under `name` (a new name only): a subclass of `base` (a callable
        when `base` is None); returns `member` (usable as a decorator argument:
        `REGISTRY.register("mine", Mine)`)."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(
                f"a {self.argument} name must be an identifier. Received: name={name!r}"
            )
        if self.base is None and not callable(member):
            raise ValueError(f"a {self.argument} must be callable. Received: {name}={member!r}")
        if self.base is not None and not (
            isinstance(member, type) and issubclass(member, self.base)
        ):
            raise ValueError(
                f"a {self.argument} must be a subclass of {self.base.__name__}. "
                f"Received: {name}={member!r}"
            )
        if name in self._members and self._members[name] is not member:
            raise ValueError(
                f"{self.argument} {name!r} is registered already "
                f"(to {self._members[name].__name__}). Received: {member!r}"
            )
        self._members[name] = member
        return member

    def names(self):
        """The registered names, in registration order."""
        return tuple(self._members)

    def is_instance(self, value):
        if self.base is None:
            return callable(value) and not isinstance(value, (str, type))
        return isinstance(value, self.base)

    def check(self, identifier, argument=None):
        """Raises a `ValueError` naming `argument` unless `identifier` is a registered name,
        a config dict or an instance."""
        if (
            (isinstance(identifier, str) and identifier in self._members)
            or isinstance(identifier, dict)
            or self.is_instance(identifier)
        ):
            return
        self.check_name(identifier, argument)

    def check_name(self, identifier, argument=None):
        """Raises a `ValueError` naming `argument` unless `identifier` is a registered name."""
        if isinstance(identifier, str) and identifier in self._members:
            return
        argument = argument or self.argument
        choices = ", ".join(repr(name) for name in self._members)
        raise ValueError(
            f"{argument} must be one of {choices} or {self.expected}. "
            f"Received: {argument}={identifier!r}"
        )

    def class_for(self, name, argument=None):
        """The member registered under `name`."""
        self.check_name(name, argument)
        return self._members[name]

    def arguments(self, name):
        """The constructor arguments of the class registered under `name` (a layer's own:
        not Keras' `Layer` arguments such as `name`, `dtype` or `trainable`)."""
        member = self.class_for(name)
        parameters = inspect.signature(member.__init__).parameters
        inherited = ()
        if isinstance(member, type) and issubclass(member, keras.layers.Layer):
            inherited = tuple(inspect.signature(keras.layers.Layer.__init__).parameters)
        return tuple(key for key in parameters if key not in ("self", "args", "kwargs", *inherited))

    def defaults(self, name):
        """`{argument: default}` of the class registered under `name` (those with one)."""
        parameters = inspect.signature(self.class_for(name).__init__).parameters
        return {
            key: p.default
            for key, p in parameters.items()
            if key in self.arguments(name) and p.default is not inspect.Parameter.empty
        }

    def name_of(self, value):
        """The registered name of an instance, a class, a config dict or a name (None if
        it has none: an unregistered subclass)."""
        if isinstance(value, str):
            return value if value in self._members else None
        if isinstance(value, dict):
            class_name = value.get("class_name")
            matches = [n for n, m in self._members.items() if m.__name__ == class_name]
            return matches[0] if matches else None
        kind = value if isinstance(value, type) or self.base is None else type(value)
        matches = [n for n, m in self._members.items() if m is kind]
        return matches[0] if matches else None

    def get(self, identifier, argument=None, **kwargs):
        """A member from a name (built with `kwargs`), a config dict (deserialized) or an
        instance (returned as is; `kwargs` are then refused)."""
        self.check(identifier, argument)
        if isinstance(identifier, str):
            member = self._members[identifier]
            return member if self.base is None else member(**kwargs)
        if kwargs:
            raise ValueError(
                f"arguments go to the constructor of a {self.argument} given by name; "
                f"{identifier!r} is built already. Received: arguments {sorted(kwargs)}"
            )
        if isinstance(identifier, dict):
            return keras.saving.deserialize_keras_object(identifier)
        return identifier

    def serialize(self, identifier):
        """The config form: a name stays a name; an instance becomes Keras' config dict
        (without its `build_config`: the owner builds its parts)."""
        if isinstance(identifier, (str, dict)):
            return identifier
        config = keras.saving.serialize_keras_object(identifier)
        if isinstance(config, dict):
            config.pop("build_config", None)
        return config

    def deserialize(self, config, custom_objects=None):
        """A member back from `serialize`'s config; raises unless it is of this kind."""
        member = keras.saving.deserialize_keras_object(config, custom_objects=custom_objects)
        if not self.is_instance(member):
            raise ValueError(f"config must describe {self.expected}. Received: config={config!r}")
        return member
