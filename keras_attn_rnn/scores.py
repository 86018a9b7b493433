"""Score functions `score(query, key)` as small Keras layers.

Every score splits into three pure steps so that key projections are computed
once per memory and reused by every query (and every decoder step):

- `prepare_keys(keys)`: `(B, Tv, d_k) -> (B, Tv, d')`, once per memory;
- `prepare_query(query)`: `(B, Tq, d_q) -> (B, Tq, d'')`, once per query;
- `pairwise(query, keys)`: prepared `(B, Tq, .)` x `(B, Tv, .)` -> `(B, Tq, Tv)`.

`score(query, keys)` chains the three; `score_step(query, prepared_keys)` scores
a decoder step's `(B, d_q)` query. `build(query_shape, keys_shape)` creates
only the weights the score needs, named after their role.

The additive core `v . tanh(q W_q + k W_k [+ ...])` is written once, in
`additive_energy` (with `add_projections`, `additive_keys` and `additive_step`):
`Additive` and the mechanisms that add a term of their own inside the tanh
compose it. A decoder step's energy, `step_energy`, writes out its gradient so that a
decoder loop keeps no `(B, Tv, U)` tensor per step.
"""

import math

import keras
from keras import ops

from keras_attn_rnn import _compilation, _keras_compat, registry, serializable


class Score(keras.layers.Layer):
    """Base of the score layers: dot product of the prepared query and keys.

    Subclasses override the `prepare_*` steps (and `pairwise` for additive).
    """

    #: The query size this score requires for a key size, or None if free.
    def required_query_dim(self, key_dim):
        return None

    def build(self, query_shape, keys_shape):
        required = self.required_query_dim(keys_shape[-1])
        if required is not None and query_shape[-1] != required:
            raise ValueError(
                f"score={name_of(self)!r} needs the query size to equal "
                f"{required} (the key size). Received: query_shape={tuple(query_shape)}, "
                f"keys_shape={tuple(keys_shape)}"
            )

    def build_for(self, query_shape, keys_shape):
        """Builds the score for these shapes; a score built before (shared) is only checked."""
        if not self.built:
            self.build(query_shape, keys_shape)
            return
        Score.build(self, query_shape, keys_shape)
        d_q, d_k = query_shape[-1], keys_shape[-1]
        expected = {"kernel": (d_k, d_q), "query_kernel": (d_q, None), "key_kernel": (d_k, None)}
        for name, shape in expected.items():
            variable = getattr(self, name, None)
            if variable is not None and any(
                e is not None and e != got for e, got in zip(shape, variable.shape)
            ):
                raise ValueError(
                    f"The score layer {self.name!r} was built for other shapes: its {name} "
                    f"has shape {tuple(variable.shape)}. Received: "
                    f"query_shape={tuple(query_shape)}, keys_shape={tuple(keys_shape)}"
                )

    def _w(self, variable):
        return ops.cast(variable, self.compute_dtype)

    @property
    def transforms_keys(self):
        """Whether `prepare_keys` changes the keys; if not, a cache can read the values as keys."""
        return type(self).prepare_keys is not Score.prepare_keys

    def prepare_keys(self, keys):
        return keys

    def prepare_query(self, query):
        return query

    def pairwise(self, query, keys):
        return ops.einsum("...qd,...kd->...qk", query, keys)

    def score(self, query, keys):
        return self.pairwise(self.prepare_query(query), self.prepare_keys(keys))

    def score_step(self, query, prepared_keys):
        """One query per row, as a decoder step asks: `(B, d_q)` x prepared `(B, Tv, .)`
        -> `(B, Tv)`. The query is prepared before it gains its query axis: TensorFlow's
        matmul of `(B, 1, d_q)` is a tensordot whose gradient XLA cannot compile in a loop
        of dynamic shapes."""
        query = ops.expand_dims(self.prepare_query(query), 1)
        return ops.squeeze(self.pairwise(query, prepared_keys), 1)

    def call(self, query, keys):
        return self.score(query, keys)


@serializable.register
class Dot(Score):
    """`score(q, k) = q . k` (Luong "dot"). No weights; needs `dim q == dim k`."""

    def required_query_dim(self, key_dim):
        return key_dim


@serializable.register
class ScaledDot(Score):
    """`score(q, k) = scale * q . k / sqrt(d)` (Vaswani et al., 2017).

    Args:
        use_scale: adds a trainable scalar `scale` (initialised to 1.0).
    """

    def __init__(self, use_scale=False, **kwargs):  # pragma: no mutate block
        super().__init__(**kwargs)
        self.use_scale = use_scale

    def required_query_dim(self, key_dim):
        return key_dim

    def build(self, query_shape, keys_shape):
        super().build(query_shape, keys_shape)
        self.inverse_sqrt_dim = 1.0 / math.sqrt(query_shape[-1])
        if self.use_scale:
            self.scale = self.add_weight(name="scale", shape=(), initializer="ones")

    def prepare_query(self, query):
        query = query * ops.cast(self.inverse_sqrt_dim, self.compute_dtype)
        if self.use_scale:
            query = query * self._w(self.scale)
        return query

    def get_config(self):
        return {**super().get_config(), "use_scale": self.use_scale}


@serializable.register
class General(Score):
    """`score(q, k) = scale * q . (k W)` (Luong "general", multiplicative).

    Weights: `kernel (d_k, d_q)`; with `use_scale=True` a scalar `scale` (tfa's
    scaled `LuongAttention`).
    """

    def __init__(self, use_scale=False, **kwargs):  # pragma: no mutate block
        super().__init__(**kwargs)
        self.use_scale = use_scale

    def build(self, query_shape, keys_shape):
        super().build(query_shape, keys_shape)
        self.kernel = self.add_weight(
            name="kernel", shape=(keys_shape[-1], query_shape[-1]), initializer="glorot_uniform"
        )
        if self.use_scale:
            self.scale = self.add_weight(name="scale", shape=(), initializer="ones")

    def prepare_keys(self, keys):
        return ops.matmul(keys, self._w(self.kernel))

    def prepare_query(self, query):
        return query * self._w(self.scale) if self.use_scale else query

    def get_config(self):
        return {**super().get_config(), "use_scale": self.use_scale}


@serializable.register
class TanhDot(Score):
    """`score(q, k) = q . tanh(k W + b)`: the attention-pooling formula.

    Weights: `kernel (d_k, d_q)`, `bias (d_q,)`.
    """

    def build(self, query_shape, keys_shape):
        super().build(query_shape, keys_shape)
        self.kernel = self.add_weight(
            name="kernel", shape=(keys_shape[-1], query_shape[-1]), initializer="glorot_uniform"
        )
        self.bias = self.add_weight(name="bias", shape=(query_shape[-1],), initializer="zeros")

    def prepare_keys(self, keys):
        return ops.tanh(ops.matmul(keys, self._w(self.kernel)) + self._w(self.bias))


@serializable.register
class Additive(Score):
    """`score(q, k) = v . tanh(q W_q + k W_k [+ b])` (Bahdanau et al., 2015).

    Args:
        units: size of the hidden layer; defaults to the key size.
        normalize: weight normalisation as tfa's normalized `BahdanauAttention`
            (Salimans & Kingma, 2016): `v` is replaced by `g v / ||v||` and a
            bias `b` is added inside the tanh.

    Weights: `query_kernel (d_q, units)`, `key_kernel (d_k, units)`,
    `v (units,)`; with `normalize` also `g ()` and `b (units,)`.
    """

    def __init__(self, units=None, normalize=False, **kwargs):  # pragma: no mutate block
        if units is not None and (
            isinstance(units, bool) or not isinstance(units, int) or units <= 0
        ):
            raise ValueError(f"units must be a positive integer. Received: units={units!r}")
        super().__init__(**kwargs)
        self.units = units
        self.normalize = normalize

    def build(self, query_shape, keys_shape):
        super().build(query_shape, keys_shape)
        units = self.units or keys_shape[-1]
        add_projections(self, query_shape[-1], keys_shape[-1], units)
        self.v = self.add_weight(name="v", shape=(units,), initializer="glorot_uniform")
        if self.normalize:
            self.g = self.add_weight(
                name="g", shape=(), initializer=keras.initializers.Constant(math.sqrt(1.0 / units))
            )
            self.b = self.add_weight(name="b", shape=(units,), initializer="zeros")

    def prepare_keys(self, keys):
        return additive_keys(
            keys, self._w(self.key_kernel), self._w(self.b) if self.normalize else None
        )

    def prepare_query(self, query):
        return ops.matmul(query, self._w(self.query_kernel))

    def _v(self):
        v = self._w(self.v)
        if self.normalize:
            v = self._w(self.g) * v * ops.rsqrt(ops.sum(ops.square(v)))
        return v

    def pairwise(self, query, keys):
        return additive_pairwise(self._v(), query, keys)

    def score_step(self, query, prepared_keys):
        # the sum of `pairwise`, without the query and key axes it adds and squeezes
        return additive_step(query, self._w(self.query_kernel), prepared_keys, self._v())

    def get_config(self):
        return {**super().get_config(), "units": self.units, "normalize": self.normalize}


# The additive core: `Additive` and the mechanisms that add a term inside its tanh
# (`CoverageAttention`, `LocationSensitiveAttention`) compose these.


def add_projections(layer, query_dim, key_dim, units):
    """Adds the additive core's `query_kernel (d_q, units)` and `key_kernel (d_k, units)` to
    `layer`, the first two of its weights (saved files hold them in that order)."""
    layer.query_kernel = layer.add_weight(
        name="query_kernel", shape=(query_dim, units), initializer="glorot_uniform"
    )
    layer.key_kernel = layer.add_weight(
        name="key_kernel", shape=(key_dim, units), initializer="glorot_uniform"
    )


def additive_keys(keys, key_kernel, bias=None):
    """The keys' side of the core, `k W_k [+ b]` `(..., U)`, once per memory."""
    keys = ops.matmul(keys, key_kernel)
    return keys if bias is None else keys + bias


def additive_energy(v, *terms):
    """`v . tanh(term_1 + term_2 + ...)`, the additive (Bahdanau) core.

    The terms are projections that broadcast to `(..., U)`: the query's `q W_q`, the keys'
    `k W_k [+ b]` and any feature a mechanism adds inside the tanh (a coverage or location
    term); they are summed in the order given. Returns `(...)`.
    """
    hidden = terms[0]
    for term in terms[1:]:
        hidden = hidden + term
    return energy(ops.tanh(hidden), v)


# How many elements of the `(B, c, Tv, U)` tanh `additive_pairwise` forms at once: 8 MB
# of float32 (docs/results/benchmarks.md, "The parallel additive score in chunks").
PAIRWISE_CHUNK_ELEMENTS = 2**21


def additive_pairwise(v, query, keys):
    """`v . tanh(q_i + k_j)` for every query row `i` and key `j`: `query (B, Tq, U)` and
    `keys (B, Tv, U)`, both projected, -> `(B, Tq, Tv)`.

    Where each op writes out its result (TensorFlow's graph mode and eager, PyTorch
    eager: `_compilation.fuses_elementwise()` is False) the `(B, Tq, Tv, U)` tensor inside
    is formed `c` query rows at a time, `c` the most whose `(B, c, Tv, U)` tensor holds
    `PAIRWISE_CHUNK_ELEMENTS` (at least one row): in one piece, at the benchmark's shapes,
    it is 59 MB written and read again by every op of the forward and backward passes.
    The chunks are the steps of Keras's backend loop (where the shapes are only known at
    run time, the chunk length is reckoned then); each chunk's values are those of the
    whole tensor's rows. Under XLA (JAX, TensorFlow's `jit_compile`) the sum, the `tanh`
    and the contraction are fused and never write the tensor, and one piece was faster.
    Other ranks, and a single query row, in one piece too.
    """
    whole = lambda: additive_energy(v, ops.expand_dims(query, -2), ops.expand_dims(keys, -3))  # noqa: E731
    if (
        len(query.shape) != 3
        or len(keys.shape) != 3
        or query.shape[1] == 1
        or _compilation.fuses_elementwise()
    ):
        return whole()
    batch, length, units = ops.shape(query)
    key_length = ops.shape(keys)[1]
    per_row = batch * key_length * units
    if all(isinstance(d, int) for d in (batch, length, key_length, units)):
        chunk = max(1, PAIRWISE_CHUNK_ELEMENTS // per_row)
        if chunk >= length:
            return whole()
    else:
        chunk = ops.maximum(1, PAIRWISE_CHUNK_ELEMENTS // per_row)
    count = (length + chunk - 1) // chunk
    rows = ops.pad(query, [[0, 0], [0, count * chunk - length], [0, 0]])
    chunks = ops.reshape(rows, (batch, count, chunk * units))
    expanded_keys = ops.expand_dims(keys, 1)

    def step(flat_rows, states):
        part = ops.expand_dims(ops.reshape(flat_rows, (batch, chunk, units)), 2)
        energies = additive_energy(v, part, expanded_keys)  # (B, c, Tv)
        return ops.reshape(energies, (batch, chunk * key_length)), states

    _, energies, _ = _keras_compat.rnn(step, chunks, [])
    return ops.reshape(energies, (batch, count * chunk, key_length))[:, :length]


def additive_step(query, query_kernel, prepared_keys, v, *features):
    """One decoder step of the core: `query (B, d_q)` against the prepared keys `(B, Tv, U)`
    and the `features (B, Tv, U)` -> `(B, Tv)`.

    The query is projected while it is `(B, d_q)` and gains its axis after (see
    `Score.score_step`).
    """
    return step_energy(v, ops.matmul(query, query_kernel), prepared_keys, *features)


def step_energy(v, query, *terms):
    """`v . tanh(query[:, None] + term_1 + ...)` `(B, Tv)` for a projected `query (B, U)` and
    `terms (B, Tv, U)` (the prepared keys, then any features), summed in that order: the
    value of `additive_energy`, with its gradient written out.

    The gradient recomputes the `tanh` from the inputs instead of keeping the
    `(B, Tv, U)` tensor it made: autodiff inside a decoder loop keeps one per step
    (for JAX's scan, a `(T, B, Tv, U)` stack written and read again), which cost
    more than the `tanh` itself. The keys are the same at every step, so only the
    `(B, U)` query is new. Its maths: with `t = tanh(hidden)` and `g = de v (1 - t^2)`,
    `dv = sum(de t)` over all but the last axis, `dquery = sum_Tv g`, `dterm = g`.

    On TensorFlow the gradient is autodiff's: its loop keeps each step's tensors in a
    list without a copy, so the written gradient was no faster there (autodiff 0.95 of its
    step time, docs/results/benchmarks.md), and a custom gradient would keep every traced
    graph alive for the life of the process (see
    `_compilation.custom_gradients_outlive_graphs`).
    """
    if _compilation.custom_gradients_outlive_graphs():
        return additive_energy(v, ops.expand_dims(query, 1), *terms)
    return _step_energy(*(ops.convert_to_tensor(x) for x in (v, query, *terms)))


@ops.custom_gradient
def _step_energy(v, query, *terms):
    def hidden():
        total = ops.expand_dims(query, 1)
        for term in terms:
            total = total + term
        return ops.tanh(total)

    def grad(*args, upstream=None):
        # JAX and TensorFlow pass the upstream gradient alone, PyTorch as `upstream`
        de = ops.expand_dims(args[0] if upstream is None else upstream, -1)
        t = hidden()
        g = de * v * (1.0 - t * t)
        return (ops.sum(de * t, axis=(0, 1)), ops.sum(g, axis=1)) + (g,) * len(terms)

    return energy(hidden(), v), grad


def energy(hidden, v):
    """`hidden (..., U) . v (U,)`, the additive score's last contraction, as one 2-D matmul.

    `hidden` is flattened to `(N, U)` and multiplied by `v` as a `(U, 1)` matrix: a
    multiply and a sum cost more passes over the `(..., U)` tensor (its gradient tiles
    the upstream `(...)` back to `(..., U)`, then multiplies twice and sums), and a
    TensorFlow decoder step with the additive score took 1.76 instead of 1.88 plain-Keras
    translator steps, the Luong path's 1.49 instead of 1.90 of its dot score's
    (docs/results/benchmarks.md); on JAX it is neutral. Flat, because TensorFlow's oneDNN
    BatchMatMul of a rank-4 tensor by a matrix writes out of bounds with several threads
    on AVX-512 CPUs (wrong scores, then heap corruption; seen with TensorFlow 2.18 to
    2.21), and the gradient of `tensordot` transposes by a permutation XLA cannot compile
    inside a loop whose shapes are dynamic.
    """
    shape = ops.shape(hidden)
    flat = ops.reshape(hidden, (-1, shape[-1]))
    return ops.reshape(ops.matmul(flat, ops.expand_dims(v, -1)), shape[:-1])


REGISTRY = registry.Registry(
    "score",
    Score,
    "a `keras_attn_rnn.scores.Score` instance",
    {
        "dot": Dot,
        "scaled_dot": ScaledDot,
        "general": General,
        "additive": Additive,
        "tanh_dot": TanhDot,
    },
)


def names():
    """The registered score names, in registry order: `("dot", "scaled_dot", ...)`."""
    return REGISTRY.names()


def check(identifier):
    """Raises a `ValueError` unless `identifier` names or is a score."""
    REGISTRY.check(identifier)


def get(identifier, **kwargs):
    """Returns a score layer from a name (`"additive"`), a config, or an instance as is.

    `kwargs` (e.g. `units=64`, `name=...`, `dtype=...`) are given to the
    constructor when `identifier` is a name; `units` only reaches `additive`.
    """
    check(identifier)
    if not isinstance(identifier, str):
        return REGISTRY.get(identifier)
    cls = REGISTRY.class_for(identifier)
    if cls is not Additive:
        kwargs.pop("units", None)
    return cls(**kwargs)


def role_named(identifier, units=None, dtype=None):
    """The score layer a decoder or mechanism owns, named `score` so its weights carry role
    names (`.../score/query_kernel`): a name is built; an unbuilt instance is a template,
    copied under that name; a built one is shared as is."""
    layer = get(identifier, units=units, dtype=dtype, name="score")
    if not layer.built and layer.name != "score":
        layer = type(layer).from_config({**layer.get_config(), "name": "score", "dtype": dtype})
    return layer


def name_of(score):
    """The registry name of a score (`"additive"`) given as a name, a layer or its config
    (an unregistered score: its class name)."""
    if isinstance(score, str):
        return score
    found = REGISTRY.name_of(score)
    if found is not None:
        return found
    return score.get("class_name") if isinstance(score, dict) else type(score).__name__


def check_units(score, units, projects_to):
    """Raises unless `score` is valid and `units` is None or used (only `additive` uses it)."""
    check(score)
    if units is not None and name_of(score) != "additive":
        raise ValueError(
            f"units is only used by score='additive'; other scores project to the "
            f"{projects_to}. Received: score={score!r}, units={units!r}"
        )


def serialize(identifier):
    """Config form of a `score=` argument: the name itself, or the serialized layer."""
    return REGISTRY.serialize(identifier)
