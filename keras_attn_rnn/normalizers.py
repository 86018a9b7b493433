"""Normalizers: functions `(scores, axis) -> weights` that turn attention scores into weights.

Every layer and mechanism takes `normalizer=` by name (`names()`) or as a
registered function. `masking.masked_softmax` runs a normalizer in float32
with masked keys at a large negative score and sets them to exactly 0
afterwards (a row with every key masked gets zeros).

- `softmax`: `exp(s) / sum exp(s)`.
- `hardmax`: the one-hot of the first maximum (TensorFlow Addons' `hardmax`);
  not differentiable.
- `sparsemax`: the Euclidean projection of the scores onto the simplex
  (Martins & Astudillo, 2016): `max(s - tau, 0)`; exact zeros outside its
  support.
- `entmax15`: 1.5-entmax (Peters, Niculae & Martins, 2019), exact by sorting:
  `max(s / 2 - tau, 0) ** 2`; sparse like sparsemax, smoother.
"""

from keras import ops

from keras_attn_rnn import registry, serializable


@serializable.register
def softmax(scores, axis=-1):
    """Plain softmax: the default normalizer."""
    if scores.shape[axis] == 1:  # one key (e.g. a memory of length 1)
        return ops.ones_like(scores)
    return ops.softmax(scores, axis=axis)


@serializable.register
def hardmax(scores, axis=-1):
    """One-hot of the first maximum along `axis` (as `tfa.seq2seq.hardmax`)."""
    index = ops.argmax(scores, axis=axis)
    one_hot = ops.one_hot(index, scores.shape[axis] or ops.shape(scores)[axis], dtype=scores.dtype)
    return ops.moveaxis(one_hot, -1, axis)


def _sorted_descending(scores, axis):
    """`(shifted, sorted, ranks)`: the scores moved to the last axis, minus their maximum and
    clipped at -2; the same sorted descending; `1..K` as floats.

    Both sparse normalizers are invariant to the shift, and a score more than 1
    below the maximum is never in their support, so the clipping changes nothing
    but keeps masked keys' -1e30 (and its square) out of the sums.
    """
    moved = ops.moveaxis(scores, axis, -1)
    moved = ops.maximum(moved - ops.max(moved, axis=-1, keepdims=True), -2.0)
    size = ops.shape(moved)[-1]
    ranked, _ = ops.top_k(moved, size)
    ranks = ops.cast(ops.arange(1, size + 1), moved.dtype)
    return moved, ranked, ranks


def _at_support_end(values, support):
    """`values[..., support - 1]` for a support size per row."""
    return ops.take_along_axis(values, ops.expand_dims(support - 1, -1), axis=-1)


@serializable.register
def sparsemax(scores, axis=-1):
    """Sparsemax (Martins & Astudillo, 2016): `max(s - tau, 0)`, summing to 1.

    `tau` is found by sorting: the support is the largest `k` with
    `1 + k s_(k) > sum_{j<=k} s_(j)`. Differentiable (the gradient of the
    ops below is the sparsemax Jacobian almost everywhere).
    """
    moved, ranked, ranks = _sorted_descending(scores, axis)
    cumulative = ops.cumsum(ranked, axis=-1)
    in_support = ops.cast(1.0 + ranks * ranked > cumulative, "int32")
    support = ops.sum(in_support, axis=-1)
    tau = (_at_support_end(cumulative, support) - 1.0) / ops.cast(
        ops.expand_dims(support, -1), moved.dtype
    )
    return ops.moveaxis(ops.relu(moved - tau), -1, axis)


@serializable.register
def entmax15(scores, axis=-1):
    """1.5-entmax (Peters et al., 2019, Algorithm 2), exact: `max(s/2 - tau, 0) ** 2`.

    With `z = s / 2` sorted descending, for each `k` the threshold is
    `tau_k = mean_k - sqrt((1 - k (meansq_k - mean_k^2)) / k)` and the
    support is the largest `k` with `tau_k <= z_(k)`.
    """
    moved, ranked, ranks = _sorted_descending(scores / 2.0, axis)
    mean = ops.cumsum(ranked, axis=-1) / ranks
    mean_square = ops.cumsum(ops.square(ranked), axis=-1) / ranks
    delta = (1.0 - ranks * (mean_square - ops.square(mean))) / ranks
    positive = delta > 0
    # sqrt only of positive entries: the gradient of sqrt(0) would be inf (and NaN after * 0)
    root = ops.where(positive, ops.sqrt(ops.where(positive, delta, 1.0)), 0.0)
    tau = mean - root
    support = ops.sum(ops.cast(tau <= ranked, "int32"), axis=-1)
    threshold = _at_support_end(tau, support)
    return ops.moveaxis(ops.square(ops.relu(moved - threshold)), -1, axis)


REGISTRY = registry.Registry(
    "normalizer",
    None,
    "a callable `(scores, axis) -> weights`",
    {"softmax": softmax, "hardmax": hardmax, "sparsemax": sparsemax, "entmax15": entmax15},
)


def names():
    """The registered normalizer names: `("softmax", "hardmax", "sparsemax", "entmax15")`."""
    return REGISTRY.names()


def get(identifier):
    """The normalizer function for a name of `names()`, a callable, or a serialized function."""
    return REGISTRY.get(identifier)


def serialize(identifier):
    """Config form of a normalizer: its name, or the serialized registered function."""
    return REGISTRY.serialize(identifier)
