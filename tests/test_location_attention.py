"""Location attention (Dubois et al., 2020): a NumPy reference from the layer's own weights
(two content scores, several steps, rows of different true lengths), its properties
(non-negative, sum to 1 over the unmasked positions, exact zeros on padding), a mean that
is relative to each row's length, left padding, its initial biases and its argument errors."""

import keras
import numpy as np
import pytest
from helpers import assert_config_round_trip, to_numpy
from hypothesis import given
from hypothesis import strategies as st
from keras import ops

from keras_attn_rnn import mechanisms
from keras_attn_rnn.mechanisms import location_attention

pytestmark = pytest.mark.layers

B, T, S, D_Q, D_M, UNITS = 3, 4, 7, 5, 3, 6
ATOL = 1e-5
LENGTHS = np.array([7, 2, 5])
MASK = np.arange(S)[None, :] < LENGTHS[:, None]
# block weights -> sigmoid(30) == 1.0 and sigmoid(-30) ~ 1e-13 in float32: a block on or off
ON, OFF = 30.0, -30.0


def built(seed=1, scale=0.6, score="general", length=S, **arguments):
    layer = mechanisms.LocationAttention(UNITS, score=score, **arguments)
    layer.build((None, D_Q), (None, length, D_M))
    rng = np.random.default_rng(seed)
    for w in layer.weights:
        w.assign(rng.normal(0.0, scale, w.shape).astype("float32"))
    return layer


def fixed(block_bias, width=0.5, gate_bias=ON, length=S):
    """A layer whose MLP and gate read nothing of the query: the block weights' logits are
    `block_bias`, the width `width` and the gate `sigmoid(gate_bias)`."""
    layer = mechanisms.LocationAttention(UNITS, score="general", min_width=0.1)
    layer.build((None, D_Q), (None, length, D_M))
    for kernel in (layer.query_kernel, layer.block_kernel, layer.width_kernel, layer.gate_kernel):
        kernel.assign(np.zeros(kernel.shape, "float32"))
    layer.block_bias.assign(np.array(block_bias, "float32"))
    layer.width_bias.assign(np.array([np.log(np.expm1(width - 0.1))], "float32"))
    layer.gate_bias.assign(np.array([gate_bias], "float32"))
    return layer


def queries(seed=0, steps=T, batch=B):
    return np.random.default_rng(seed).normal(size=(batch, steps, D_Q)).astype("float32")


def memories(seed=0, length=S, batch=B):
    return np.random.default_rng(seed + 100).normal(size=(batch, length, D_M)).astype("float32")


def run(layer, queries, memory, mask=MASK):
    """Alignments `(B, T, S)` and the means `(B, T)` after each step (the inputs in the
    layer's compute dtype, as the decoder gives them)."""
    dtype = layer.compute_dtype
    memory = ops.convert_to_tensor(memory, dtype)
    keys = layer.prepare_keys(memory)
    mask = None if mask is None else ops.convert_to_tensor(mask)
    state = layer.initial_state(keys, mask)
    alignments, means = [], []
    for t in range(queries.shape[1]):
        query = ops.convert_to_tensor(queries[:, t], dtype)
        weights, state = layer.call(query, keys, memory, mask, state)
        alignments.append(to_numpy(weights))
        means.append(to_numpy(state["mean"])[:, 0])
    return np.stack(alignments, 1), np.stack(means, 1)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, mask):
    x = np.where(mask, x, -np.inf)
    e = np.exp(x - x.max(-1, keepdims=True))
    return np.where(mask, e / e.sum(-1, keepdims=True), 0.0)


def reference(layer, queries, memory, mask, score):
    """float64 loops over the steps, from the layer's weights."""
    w = {v.path.split("/", 1)[-1]: to_numpy(v).astype("float64") for v in layer.weights}
    memory = memory.astype("float64")
    n = mask.sum(-1).astype("float64")[:, None]  # (B, 1) true lengths
    gaps = np.maximum(n - 1.0, 1.0)
    positions = (np.cumsum(mask, -1) - 1.0) / gaps
    mean, out = np.zeros((len(mask), 1)), []
    for t in range(queries.shape[1]):
        q = queries[:, t].astype("float64")
        if score == "general":
            energies = np.einsum("bd,bsd->bs", q, memory @ w["score/kernel"])
        else:
            hidden = np.tanh(
                (q @ w["score/query_kernel"])[:, None] + memory @ w["score/key_kernel"]
            )
            energies = hidden @ w["score/v"]
        content = softmax(energies, mask)
        hidden = np.tanh(q @ w["query_kernel"] + w["query_bias"])
        rho = hidden @ w["block_kernel"] + w["block_bias"]
        weights = np.stack(
            [
                sigmoid(rho[:, 0]),
                np.tanh(rho[:, 1]),
                rho[:, 2],
                sigmoid(rho[:, 3]),
                sigmoid(rho[:, 4]),
            ],
            -1,
        )
        blocks = np.concatenate(
            [
                mean,
                t / gaps,
                1.0 / gaps,
                (content * positions).sum(-1, keepdims=True),
                np.ones_like(n),
            ],
            -1,
        )
        mix = (weights * blocks).sum(-1, keepdims=True)
        # Dubois's leaky clamp to [0, 1]: slope 1 inside, 0.01 beyond (continuous)
        mean = np.maximum(0.01 * mix, np.minimum(mix, 1.0 + 0.01 * mix))
        width = np.logaddexp(0.0, hidden @ w["width_kernel"] + w["width_bias"]) + layer.min_width
        sigma = width / n
        location = softmax(-((positions - mean) ** 2) / (2 * sigma**2), mask)
        gate = sigmoid(q @ w["gate_kernel"] + w["gate_bias"])
        out.append(gate * location + (1 - gate) * content)
    return np.stack(out, 1)


@pytest.mark.parametrize("score", ["general", "additive"])
def test_matches_numpy_over_several_steps_with_rows_of_different_lengths(score):
    layer = built(score=score)
    q, memory = queries(), memories()
    got, means = run(layer, q, memory)
    expected = reference(layer, q, memory, MASK, score)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)
    assert got.dtype == np.float32
    assert np.all(got[~np.broadcast_to(MASK[:, None], got.shape)] == 0.0)
    assert np.abs(expected).max() > 0.3  # the comparison is not of near-uniform weights
    # the state matters: the last step from a fresh state differs
    fresh, _ = run(layer, q[:, -1:], memory)
    assert not np.allclose(fresh[:, 0], got[:, -1], atol=1e-3)


def test_both_attentions_and_the_gate_matter():
    """Gate 1 gives the location attention, gate 0 the content attention alone (checked
    against the score); they differ from each other and from the learnt mix."""
    layer = built()
    q, memory = queries(2), memories(2)
    mixed, _ = run(layer, q, memory)
    layer.gate_kernel.assign(np.zeros(layer.gate_kernel.shape, "float32"))
    layer.gate_bias.assign(np.array([ON], "float32"))
    location, _ = run(layer, q, memory)
    layer.gate_bias.assign(np.array([OFF], "float32"))
    content, _ = run(layer, q, memory)
    assert not np.allclose(location, content, atol=1e-2)
    assert not np.allclose(mixed, location, atol=1e-3)
    assert not np.allclose(mixed, content, atol=1e-3)
    energies = np.einsum("btd,bsd->bts", q, memory @ to_numpy(layer.score_layer.kernel))
    np.testing.assert_allclose(content, softmax(energies, MASK[:, None]), atol=ATOL)


@given(st.integers(0, 2**16), st.lists(st.integers(1, S), min_size=B, max_size=B))
def test_properties(seed, lengths):
    mask = np.arange(S)[None, :] < np.array(lengths)[:, None]
    layer = built(seed=seed, scale=1.0)
    got, means = run(layer, queries(seed, steps=5), memories(seed), mask=mask)
    padded = ~np.broadcast_to(mask[:, None], got.shape)
    assert np.all(np.isfinite(got))
    assert np.all(got >= 0.0)
    assert np.all(got[padded] == 0.0)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)
    # the leaky clamp keeps the mean near [0, 1]
    assert np.all((means > -0.5) & (means < 1.5)), means


@pytest.mark.parametrize("short, long", [(10, 40), (7, 13)])
def test_the_same_blocks_point_to_the_same_relative_position_at_any_length(short, long):
    """With fixed block weights, the location part's mean is relative to each row's true
    length: the bias block puts it at a third of every row, the diagonal at step `t / (n -
    1)`, the previous mean plus two single steps moves it two positions a step."""
    rows = np.array([short, long])
    mask = np.arange(long)[None, :] < rows[:, None]
    q, memory = queries(3, steps=3, batch=2), memories(3, length=long, batch=2)
    third = np.log(0.5)  # sigmoid(log(1/2)) = 1/3
    cases = {
        "bias": ([OFF, 0.0, 0.0, OFF, third], lambda t: (rows - 1) / 3.0),
        "diagonal": ([OFF, ON, 0.0, OFF, OFF], lambda t: np.array([t, t])),
        "steps": ([ON, 0.0, 2.0, OFF, OFF], lambda t: np.array([2 * (t + 1)] * 2)),
    }
    for name, (block_bias, target) in cases.items():
        layer = fixed(block_bias, length=long)
        got, means = run(layer, q, memory, mask=mask)
        for t in range(3):
            expected = target(t)  # a position in each row
            np.testing.assert_allclose(means[:, t], expected / (rows - 1), atol=1e-6, err_msg=name)
            np.testing.assert_array_equal(got[:, t].argmax(-1), expected, err_msg=name)
        # the same relative means in both rows where the blocks are relative
        if name == "bias":
            np.testing.assert_allclose(means[0], means[1], atol=1e-6)


def test_the_location_alignments_are_a_gaussian_normalised_over_the_row():
    """Gate 1, the mean at the middle of a row of 5 (bias 1/2): a Gaussian of width `sigma /
    n` around `r = 1/2`, normalised over the 5 positions, whatever the padding after them."""
    layer = fixed([OFF, 0.0, 0.0, OFF, 0.0], width=0.8, length=S)
    mask = np.arange(S)[None, :] < np.array([[5]])
    got, means = run(layer, queries(batch=1), memories(batch=1), mask=mask)
    r = np.arange(5) / 4.0
    expected = np.exp(-((r - 0.5) ** 2) / (2 * (0.8 / 5) ** 2))
    expected /= expected.sum()
    np.testing.assert_allclose(got[0, :, :5], np.broadcast_to(expected, (T, 5)), atol=ATOL)
    np.testing.assert_allclose(means, 0.5, atol=1e-7)


def test_a_left_padded_row_attends_like_the_right_padded_one_shifted():
    layer = built(seed=4)
    q, memory = queries(4, batch=1), memories(4, length=5, batch=1)
    right = np.concatenate([memory, np.full((1, 2, D_M), 9.0, "float32")], 1)
    left = np.concatenate([np.full((1, 2, D_M), -9.0, "float32"), memory], 1)
    got_right, _ = run(layer, q, right, mask=np.arange(S)[None] < 5)
    got_left, _ = run(layer, q, left, mask=np.arange(S)[None] >= 2)
    np.testing.assert_allclose(got_left[..., 2:], got_right[..., :5], atol=1e-6)
    assert np.all(got_left[..., :2] == 0.0) and np.all(got_right[..., 5:] == 0.0)


def test_a_row_of_length_one_attends_to_its_one_position():
    layer = built(seed=5)
    mask = np.arange(S)[None, :] < np.array([[1], [S]])
    got, _ = run(layer, queries(5, batch=2), memories(5, batch=2), mask=mask)
    np.testing.assert_array_equal(got[0, :, 0], 1.0)
    assert np.all(np.isfinite(got))


def test_no_mask_is_the_whole_memory():
    layer = built(seed=6)
    q, memory = queries(6), memories(6)
    np.testing.assert_allclose(
        run(layer, q, memory, mask=None)[0],
        run(layer, q, memory, mask=np.ones((B, S), bool))[0],
        atol=1e-7,
    )


def test_mixed_precision_computes_the_alignments_in_float32():
    """Under mixed_float16 the MLP and the score run in float16 but the blocks, the Gaussian
    and the mix in float32: float32 alignments that sum to 1, close to the float32 layer's."""
    q, memory = queries(7), memories(7)
    expected, _ = run(built(seed=7), q, memory)
    keras.config.set_dtype_policy("mixed_float16")  # conftest restores float32
    layer = built(seed=7)
    assert layer.compute_dtype == "float16"
    got, means = run(layer, q, memory)
    assert got.dtype == np.float32 and means.dtype == np.float32
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(got, expected, atol=1e-2)
    assert np.all(got[~np.broadcast_to(MASK[:, None], got.shape)] == 0.0)


def test_state_and_initial_biases():
    layer = mechanisms.LocationAttention(4, initial_width=2.0)
    layer.build((None, D_Q), (None, S, D_M))
    for kernel in (layer.query_kernel, layer.block_kernel, layer.width_kernel, layer.gate_kernel):
        kernel.assign(np.zeros(kernel.shape, "float32"))
    weights, width, gate = (to_numpy(x) for x in layer.parameters(ops.ones((2, D_Q))))
    np.testing.assert_allclose(weights, [[0.5, 0.0, 0.0, 0.5, 0.5]] * 2, atol=1e-7)
    np.testing.assert_allclose(width, 2.0, rtol=1e-6)
    np.testing.assert_allclose(gate, 0.5)
    keys = layer.prepare_keys(ops.zeros((2, S, D_M)))
    state = layer.initial_state(keys, None)
    assert sorted(state) == ["mean", "step"]
    for value in state.values():
        assert tuple(value.shape) == (2, 1) and to_numpy(value).dtype == np.float32
    _, state = layer.call(ops.ones((2, D_Q)), keys, ops.zeros((2, S, D_M)), None, state)
    _, state = layer.call(ops.ones((2, D_Q)), keys, ops.zeros((2, S, D_M)), None, state)
    np.testing.assert_array_equal(to_numpy(state["step"]), 2.0)


def test_config_round_trip_and_get_by_name():
    layer = mechanisms.get(
        "relative_location", units=4, score="dot", min_width=0.2, initial_width=3.0
    )
    assert isinstance(layer, mechanisms.LocationAttention)
    clone = assert_config_round_trip(layer)
    assert (clone.units, clone.score, clone.min_width, clone.initial_width) == (
        4,
        "dot",
        0.2,
        3.0,
    )
    default = mechanisms.LocationAttention(4)
    assert (default.score, default.min_width, default.initial_width) == ("additive", 0.41, 1.0)
    assert location_attention.BLOCKS == (
        "previous_mean",
        "diagonal",
        "single_step",
        "mean_content",
        "bias",
    )


@pytest.mark.parametrize(
    "arguments, match",
    [
        ({"units": 0}, r"units must be a positive integer. Received: units=0"),
        ({"units": 2.0}, r"units must be a positive integer. Received: units=2.0"),
        ({"score": "dott"}, r"score.*Received: .*dott"),
        ({"min_width": 0.0}, r"min_width must be a finite number > 0.0. Received: min_width=0.0"),
        ({"min_width": -1}, r"min_width must be .*Received: min_width=-1"),
        ({"min_width": float("nan")}, r"min_width must be .*Received: min_width=nan"),
        ({"min_width": "1"}, r"min_width must be .*Received: min_width='1'"),
        (
            {"initial_width": 0.41},
            r"initial_width must be a finite number > 0.41. Received: initial_width=0.41",
        ),
        (
            {"min_width": 2.0, "initial_width": 1.0},
            r"initial_width must be a finite number > 2.0. Received: initial_width=1.0",
        ),
        ({"initial_width": True}, r"initial_width must .*Received: initial_width=True"),
        ({"normalizer": "nope"}, r"normalizer.*Received: .*nope"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(arguments, match):
    with pytest.raises(ValueError, match=match):
        mechanisms.LocationAttention(**{"units": 4, **arguments})


def test_the_leaky_clamp_is_ray_chowdhury_and_caragea_s_and_is_attributed_to_them():
    """`max(0.01 x, min(x, 1 + 0.01 x))` is Ray Chowdhury and Caragea's (2023) clamp; Dubois
    et al.'s leaks from 1 (`1 + 0.01 (x - 1)`). The docstrings attribute it correctly
    (issue 40)."""
    x = np.array([-2.0, 0.0, 0.5, 1.0, 1.005, 1.5, 3.0], "float32")
    got = to_numpy(location_attention.leaky_clamp(ops.convert_to_tensor(x)))
    np.testing.assert_allclose(got, np.maximum(0.01 * x, np.minimum(x, 1 + 0.01 * x)), 1e-6)
    dubois = np.where(x > 1, 1 + 0.01 * (x - 1), np.where(x < 0, 0.01 * x, x))
    assert np.abs(got - dubois)[x > 1.0101].min() > 0.0099  # the two forms differ above 1.01
    doc = " ".join(mechanisms.LocationAttention.__doc__.split())
    assert "Ray Chowdhury and Caragea's (2023) leaky clamp" in doc
    assert "Dubois's leaky clamp" not in doc
    assert "Ray Chowdhury and Caragea" in location_attention.leaky_clamp.__doc__
