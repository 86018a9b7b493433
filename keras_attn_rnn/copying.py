"""Copy attention (the pointer-generator of See et al., 2017): the output distribution
over an extended vocabulary that mixes generating a word with copying a source word.

Each example's source words outside the target vocabulary (size `V`) get temporary ids
`V, V + 1, ...` (the same word twice gets the same id); `source_ext` is the source
written in those extended ids. A step's distribution is
`P(w) = p_gen P_vocab(w) + (1 - p_gen) P_copy(w)`, over `V + num_oov` ids, where
`P_copy(w) = sum_{i: source_ext_i = w} a_i / sum_i a_i` (unmasked positions `i`): the
attention renormalised over the source, so that `P` is a distribution whatever the
mechanism (a GMM's Gaussians are not normalised over the memory; monotonic attention
may lose mass off the end). Where the attention has (almost) no mass the copy share
goes to the generator (see `pointer_generator_mixture`).
"""

from keras import ops

from keras_attn_rnn import _deprecation

# Below this attention mass a row's copy distribution fades into the generator's: its
# gradient (a / m, of order 1 / m^2) stays finite in float32.
MIN_COPY_MASS = 1e-6


@_deprecation.renamed({"vocab_size": "vocabulary_size"})
def extended_vocab_size(vocabulary_size, num_oov):
    """`V + num_oov`, checked: both static non-negative integers (`V` positive)."""
    if (
        not isinstance(vocabulary_size, int)
        or isinstance(vocabulary_size, bool)
        or vocabulary_size < 1
    ):
        raise ValueError(
            "the vocabulary axis of vocab_probabilities must have a static size. "
            f"Received: vocabulary_size={vocabulary_size!r}"
        )
    if not isinstance(num_oov, int) or isinstance(num_oov, bool) or num_oov < 0:
        raise ValueError(
            "num_oov must be a non-negative Python int (the number of extended ids; "
            f"e.g. the largest count of a batch). Received: num_oov={num_oov!r}"
        )
    return vocabulary_size + num_oov


# Where the ids came from when no source_ext was given (one shared vocabulary).
SOURCE_AS_EXTENDED = "; without source_ext the source ids are read as extended ids"


def check_extended_ids(ids, size, name="source_ext", note=""):
    """Raises unless the NumPy int array `ids` holds extended ids in `[0, size)`.

    An id at or beyond `size` (`target_vocabulary_size + max_oov`) has no column to be copied
    into: rather than drop its attention silently, every path (a model call with
    values, generation) refuses it with this error. `note` says where the ids came from.
    """
    if ids.size and (ids.min() < 0 or ids.max() >= size):
        raise ValueError(
            f"{name} must hold extended ids in [0, {size}) (target_vocabulary_size + max_oov){note}. "
            f"Received: {name} with ids in [{ids.min()}, {ids.max()}]"
        )


def copy_distribution(attention, source_ext, size, source_mask=None):
    """The attention summed per extended id: `(B, T, S)`, `(B, S)` -> float32 `(B, T, size)`.

    Duplicated source words add their weights; positions where `source_mask` is False
    (default: `source_ext != 0`, id 0 being padding) and ids outside `[0, size)`
    contribute nothing.
    """
    attention = ops.cast(attention, "float32")
    source_ext = ops.cast(source_ext, "int32")
    if source_mask is None:
        source_mask = ops.not_equal(source_ext, 0)
    attention = attention * ops.expand_dims(ops.cast(source_mask, "float32"), 1)
    # one_hot by comparison: out-of-range ids give a zero row on every backend
    one_hot = ops.cast(
        ops.equal(ops.expand_dims(source_ext, -1), ops.arange(size, dtype="int32")), "float32"
    )
    return ops.einsum("bts,bsw->btw", attention, one_hot)


def pointer_generator_mixture(
    vocab_probabilities, attention, p_gen, source_ext, num_oov, source_mask=None
):
    """`p_gen P_vocab + (1 - p_gen) P_copy` over the extended vocabulary, in float32.

    Args:
        vocab_probabilities: `(B, T, V)`, the generator's distribution (a softmax).
        attention: `(B, T, S)`, the alignments over the source.
        p_gen: `(B, T, 1)` (or `(B, T)`), the probability of generating.
        source_ext: int `(B, S)`, the source in extended ids (`< V + num_oov`).
        num_oov: Python int, the number of extended ids beyond `V` (static: e.g. the
            largest number of source OOVs of a batch, or a fixed maximum).
        source_mask: bool `(B, S)`, False at padding; default `source_ext != 0`.

    Returns:
        probabilities: float32 `(B, T, V + num_oov)`, each row a distribution (it
            sums to 1). The attention is renormalised over the unmasked positions of
            in-range ids, `P_copy = a / m` with `m` its mass, so any mechanism's
            weights serve; where `m < MIN_COPY_MASS` (1e-6) the copy share is
            `a / MIN_COPY_MASS + (1 - m / MIN_COPY_MASS) P_vocab`, which is
            continuous in `m` and gives the whole share to the generator when
            nothing is attended (an all-padding source).

    Examples:
        >>> from keras_attn_rnn.copying import pointer_generator_mixture
        >>> vocab = np.array([[[0.5, 0.5]]])  # V = 2
        >>> attention = np.array([[[0.25, 0.25, 0.5]]])
        >>> source_ext = np.array([[1, 2, 2]])  # word 2 (an OOV) twice
        >>> p = pointer_generator_mixture(vocab, attention, np.array([[[0.6]]]), source_ext, 1)
        >>> np.round(keras.ops.convert_to_numpy(p), 3)
        array([[[0.3, 0.4, 0.3]]], dtype=float32)
    """
    size = extended_vocab_size(vocab_probabilities.shape[-1], num_oov)
    vocab_probabilities = ops.cast(vocab_probabilities, "float32")
    p_gen = ops.cast(p_gen, "float32")
    if len(p_gen.shape) == 2:
        p_gen = ops.expand_dims(p_gen, -1)
    if num_oov:
        vocab_probabilities = ops.pad(vocab_probabilities, [(0, 0), (0, 0), (0, num_oov)])
    copied = copy_distribution(attention, source_ext, size, source_mask)
    mass = ops.sum(copied, axis=-1, keepdims=True)
    copied = copied / ops.maximum(mass, MIN_COPY_MASS)
    copied = copied + ops.maximum(1.0 - mass / MIN_COPY_MASS, 0.0) * vocab_probabilities
    return p_gen * vocab_probabilities + (1.0 - p_gen) * copied
