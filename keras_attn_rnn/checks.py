"""Argument checks shared by the layers, mechanisms and models: each error names the
argument, what was expected, and ends with `Received: ...`."""

import math


def check_positive_int(name, value, allow_none=True):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer. Received: {name}={value!r}")


def check_choice(name, value, choices):
    """Raises unless `value` is one of `choices`."""
    if value not in choices:
        expected = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {expected}. Received: {name}={value!r}")


def check_odd_width(name, value):
    """A filter width: a positive odd integer (the filter is centred on each position)."""
    check_positive_int(name, value, allow_none=False)
    if value % 2 == 0:
        raise ValueError(
            f"{name} must be odd (the filter is centred on each position). "
            f"Received: {name}={value!r}"
        )


def check_above(name, value, bound):
    """Raises unless `value` is a finite real number (not a bool) greater than `bound`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= bound
    ):
        raise ValueError(f"{name} must be a finite number > {bound}. Received: {name}={value!r}")


def check_dropout(value, name="dropout"):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a float in [0, 1). Received: {name}={value!r}")


def check_rank(name, shape, rank):
    if len(shape) != rank:
        raise ValueError(
            f"{name} must have rank {rank}. Received: {name} with shape {tuple(shape)}"
        )


def check_mask(name, mask, shape):
    """Raises if a mask's static shape does not equal `shape` (e.g. `(batch, time)`)."""
    if mask is None:
        return
    mask_shape = tuple(mask.shape)
    ok = len(mask_shape) == len(shape) and all(
        a is None or b is None or a == b for a, b in zip(mask_shape, shape)
    )
    if not ok:
        raise ValueError(
            f"{name} must have shape {tuple(shape)} (batch, time). "
            f"Received: {name} with shape {mask_shape}"
        )


def is_shape(value):
    """True for a shape tuple such as `(None, 7, 16)`, False for a list of shapes or tensors."""
    return isinstance(value, (list, tuple)) and all(d is None or isinstance(d, int) for d in value)


def describe(inputs):
    """A short description of call inputs or input shapes for error messages."""
    if is_shape(inputs):
        return f"a tensor of shape {tuple(inputs)}"
    if isinstance(inputs, (list, tuple)):
        return f"a list of {len(inputs)} inputs"
    if isinstance(inputs, dict):
        return f"a dict with keys {sorted(inputs)}"
    shape = getattr(inputs, "shape", None)
    return f"a tensor of shape {tuple(shape)}" if shape is not None else repr(inputs)
