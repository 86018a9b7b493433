"""Old argument names, kept for a release: the one place that maps them to the new ones.

A class whose constructor renamed arguments, or made them keyword-only, says so with one
decorator (the table of names is `docs/guides/api-conventions.md`):

    @_deprecation.renamed(
        {"vocab_size": "vocabulary_size"},
        old_order=("embedding_dim", "rnn", "units"),
    )
    class AttentiveClassifier(AttentiveModel): ...

- an old keyword (`vocab_size=30`) is passed on under its new name with a
  `DeprecationWarning` that names the new spelling; both at once is a `TypeError`;
- positional arguments beyond the new signature's positional parameters are the
  parameters of `old_order` (the class's order before they became keyword-only, spelled
  as now), with a `DeprecationWarning`;
- `from_config` maps a config's old keys silently (an old `.keras` file, which the
  person loading it cannot change), so the file loads as it was saved;
- each old name stays readable as an attribute (`model.vocab_size`), with a warning.

Subclasses inherit the mapping (a `CharTokenizer` config with `max_vocabulary` loads).
"""

import functools
import inspect
import warnings

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def renamed(arguments=None, old_order=(), attributes=None):
    """Class (or function) decorator: `arguments` maps old keyword names to new ones,
    `old_order` names (new spellings) the parameters that older calls passed by position
    after the new positional ones, `attributes` maps old attribute names to the ones that
    hold the value now (default: `arguments`; `{}` where the class kept no attribute)."""
    arguments = dict(arguments or {})

    def decorate(cls):
        if inspect.isfunction(cls):
            return _renamed_function(cls, arguments)
        init = cls.__dict__["__init__"]
        parameters = inspect.signature(init).parameters
        positional = [p.name for p in parameters.values() if p.kind in _POSITIONAL][1:]
        unknown = [name for name in [*arguments.values(), *old_order] if name not in parameters]
        if unknown:
            raise TypeError(f"{cls.__name__}.__init__ has no parameters {unknown}")

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            args, kwargs = _new_arguments(
                type(self).__name__, positional, old_order, arguments, args, kwargs
            )
            init(self, *args, **kwargs)

        # the new signature, for inspect and for Keras (which reads it in `__new__`)
        __init__.__signature__ = inspect.signature(init)
        cls.__init__ = __init__
        cls.renamed_arguments = {**getattr(cls, "renamed_arguments", {}), **arguments}
        _wrap_from_config(cls)
        for old, new in (attributes if attributes is not None else arguments).items():
            setattr(cls, old, _RenamedAttribute(old, new))
        return cls

    return decorate


def _renamed_function(function, arguments):
    positional = [
        p.name for p in inspect.signature(function).parameters.values() if p.kind in _POSITIONAL
    ]

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        args, kwargs = _new_arguments(function.__name__, positional, (), arguments, args, kwargs)
        return function(*args, **kwargs)

    wrapper.renamed_arguments = dict(arguments)
    return wrapper


def upgrade_config(cls, config):
    """`config` with the old keys of `cls` (and its bases) under their new names."""
    renames = getattr(cls, "renamed_arguments", {})
    if not any(old in config for old in renames):
        return config
    config = dict(config)
    for old, new in renames.items():
        if old in config:
            config[new] = config.pop(old)
    return config


def warn(owner, old, new, stacklevel=3):
    warnings.warn(
        f"{owner}: `{old}` is deprecated in keras_attn_rnn (it will be removed in a "
        f"future release); use `{new}`.",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def _new_arguments(owner, positional, old_order, arguments, args, kwargs):
    """`(args, kwargs)` in the new spellings; warns for each old one."""
    extra = args[len(positional) :]
    if extra:
        if len(extra) > len(old_order):
            raise TypeError(
                f"{owner}() takes at most {len(positional) + len(old_order)} positional "
                f"arguments. Received: {len(args)} positional arguments"
            )
        names = old_order[: len(extra)]
        warnings.warn(
            f"{owner}: passing {', '.join(f'`{n}`' for n in names)} by position is "
            "deprecated in keras_attn_rnn (it will be removed in a future release); pass "
            f"{'it' if len(names) == 1 else 'them'} by keyword "
            f"({', '.join(f'{n}=...' for n in names)}).",
            DeprecationWarning,
            stacklevel=3,  # the caller of the constructor
        )
        for name, value in zip(names, extra):
            if name in kwargs:
                raise TypeError(f"{owner}() got multiple values for argument '{name}'")
            kwargs[name] = value
        args = args[: len(positional)]
    for old, new in arguments.items():
        if old not in kwargs:
            continue
        if new in kwargs or new in positional[: len(args)]:
            raise TypeError(
                f"{owner}() got `{old}` (deprecated) and `{new}`, two spellings of one "
                f"argument: pass `{new}` alone. Received: {old}={kwargs[old]!r}"
            )
        warn(owner, old, new, stacklevel=3)
        kwargs[new] = kwargs.pop(old)
    return args, kwargs


def _wrap_from_config(cls):
    own = cls.__dict__.get("from_config")

    def from_config(klass, config):
        config = upgrade_config(klass, config)
        if own is not None:
            return own.__func__(klass, config)
        return super(cls, klass).from_config(config)

    from_config.__doc__ = "The object of `config`; a config saved with old argument names loads."
    cls.from_config = classmethod(from_config)


class _RenamedAttribute:
    """A read-only attribute under its old name: warns, then reads the new one."""

    def __init__(self, old, new):
        self.old, self.new = old, new

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        warn(type(instance).__name__, self.old, self.new, stacklevel=2)
        return getattr(instance, self.new)
