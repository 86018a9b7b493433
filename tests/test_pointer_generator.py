"""Copy attention (the pointer-generator of See et al., 2017): the mixture over the extended
vocabulary and its loss against NumPy references, the loss's gradient against finite
differences, `Seq2Seq(copy=True)`'s contract (wiring, every mechanism, config,
`.keras` in a fresh process, mixed precision, compiled training), and generation over the
extended vocabulary (step = teacher-forced mixture, greedy, sampling, beam search)."""

import json
import warnings

import keras
import numpy as np
import pytest
from helpers import assert_config_round_trip, gradient, save_and_reload_in_subprocess, to_numpy

from keras_attn_rnn import copying, losses, mechanisms, samplers
from keras_attn_rnn.generation import generate
from keras_attn_rnn.models import Seq2Seq

pytestmark = pytest.mark.layers

B, T, S, V, NUM_OOV = 4, 3, 6, 5, 3
W = V + NUM_OOV


# ---------------------------------------------------------------- NumPy references


def mixture_reference(vocab, attention, p_gen, source_ext, num_oov, mask=None, floor=1e-6):
    """Loops in float64: `p_gen P_vocab(w) + (1 - p_gen) P_copy(w)`, with `P_copy(w) =
    sum_{i: x_i = w, mask_i} a_i / m` (`m` the attention's mass on unmasked in-range
    positions); below `m = floor`, `a_i / floor + (1 - m / floor) P_vocab(w)`."""
    vocab, attention = vocab.astype("float64"), attention.astype("float64")
    p_gen = p_gen.astype("float64").reshape(vocab.shape[:2])
    if mask is None:
        mask = source_ext != 0
    batch, steps, size = vocab.shape
    out = np.zeros((batch, steps, size + num_oov))
    for b in range(batch):
        for t in range(steps):
            copied = np.zeros(size + num_oov)
            for i, word in enumerate(source_ext[b]):
                if mask[b, i] and 0 <= word < size + num_oov:
                    copied[word] += attention[b, t, i]
            mass = copied.sum()
            copied /= max(mass, floor)
            copied[:size] += max(0.0, 1.0 - mass / floor) * vocab[b, t]
            out[b, t, :size] = p_gen[b, t] * vocab[b, t]
            out[b, t] += (1.0 - p_gen[b, t]) * copied
    return out


def loss_reference(targets, probabilities, epsilon=1e-7):
    """Per row: the mean of -log(max(P(y_t), epsilon)) over the steps with y_t != 0, else 0."""
    out = []
    for row_targets, row in zip(targets, probabilities.astype("float64")):
        nll = [-np.log(max(row[t, y], epsilon)) for t, y in enumerate(row_targets) if y != 0]
        out.append(np.mean(nll) if nll else 0.0)
    return np.asarray(out)


def token_loss_reference(targets, probabilities, epsilon=1e-7):
    """The mean of -log(max(P(y_t), epsilon)) over all steps with y_t != 0 (Keras' masked
    reduction), and their sum."""
    rows, steps = np.nonzero(targets)
    picked = probabilities.astype("float64")[rows, steps, targets[rows, steps]]
    nll = -np.log(np.maximum(picked, epsilon))
    return nll.mean(), nll.sum()


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def inputs(seed=0):
    """Distributions with extended ids: duplicated words (in and out of the vocabulary),
    an all-OOV row, padded positions that still carry attention (the mask must drop it)."""
    rng = np.random.default_rng(seed)
    vocab = softmax(rng.normal(size=(B, T, V)) * 2).astype("float32")
    attention = softmax(rng.normal(size=(B, T, S)) * 2).astype("float32")
    p_gen = sigmoid(rng.normal(size=(B, T, 1))).astype("float32")
    source_ext = np.array(
        [
            [3, 5, 3, 6, 5, 1],  # 3 twice (in vocabulary), OOV 5 twice, OOV 6 once
            [5, 6, 7, 7, 6, 5],  # every word out of the vocabulary
            [2, 4, 5, 0, 0, 0],  # padding at the end
            [1, 1, 1, 1, 0, 0],  # one word, repeated
        ],
        "int32",
    )
    return vocab, attention, p_gen, source_ext


# ---------------------------------------------------------------- the mixture


def test_mixture_equals_the_reference_on_the_extended_vocabulary():
    vocab, attention, p_gen, source_ext = inputs()
    got = to_numpy(copying.pointer_generator_mixture(vocab, attention, p_gen, source_ext, NUM_OOV))
    expected = mixture_reference(vocab, attention, p_gen, source_ext, NUM_OOV)
    assert got.shape == (B, T, W) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, atol=1e-6)
    # hand-checked cells: duplicates add, OOV ids get copy mass only
    q = 1.0 - p_gen[..., 0]
    np.testing.assert_allclose(
        got[0, :, 3], p_gen[0, :, 0] * vocab[0, :, 3] + q[0] * attention[0, :, [0, 2]].sum(0), 1e-6
    )
    np.testing.assert_allclose(got[1, :, 7], q[1] * attention[1, :, [2, 3]].sum(0), atol=1e-6)
    np.testing.assert_allclose(got[1, :, :V], p_gen[1] * vocab[1], atol=1e-6)  # nothing copied
    # padded positions carried attention, which the mask drops; the rest is renormalised,
    # so every row is a distribution
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-6)
    kept = attention[2, :, :3] / attention[2, :, :3].sum(-1, keepdims=True)
    np.testing.assert_allclose(
        got[2, :, 4], p_gen[2, :, 0] * vocab[2, :, 4] + q[2] * kept[:, 1], 1e-6
    )


def test_mixture_renormalises_any_attention_mass_and_falls_back_to_the_generator():
    """Attention that is not a distribution (a GMM's sums range far from 1) is
    renormalised; a row with no mass (an all-padding source, attention exactly 0) gives its
    copy share to the generator, continuously below the floor of 1e-6."""
    vocab, attention, p_gen, source_ext = inputs(4)
    for scale in (4.3, 0.5, 1e-3, 1e-7, 0.0):
        got = to_numpy(
            copying.pointer_generator_mixture(vocab, attention * scale, p_gen, source_ext, NUM_OOV)
        )
        np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)
        want = mixture_reference(vocab, attention * scale, p_gen, source_ext, NUM_OOV)
        np.testing.assert_allclose(got, want, atol=1e-5)
        assert np.all(got <= 1.0 + 1e-6) and np.all(got >= 0.0)
    unscaled = mixture_reference(vocab, attention, p_gen, source_ext, NUM_OOV)
    np.testing.assert_allclose(
        to_numpy(copying.pointer_generator_mixture(vocab, attention * 4.3, p_gen, source_ext, 3)),
        unscaled,
        atol=1e-5,
    )
    # no attention at all: exactly the generator's distribution
    none = to_numpy(
        copying.pointer_generator_mixture(vocab, attention * 0, p_gen, source_ext, NUM_OOV)
    )
    np.testing.assert_allclose(none[..., :V], vocab, atol=1e-6)
    assert np.all(none[..., V:] == 0)
    # half the floor: half copied (renormalised by the floor), half generated
    half = to_numpy(
        copying.pointer_generator_mixture(
            vocab, attention * 5e-7, np.zeros_like(p_gen), source_ext, NUM_OOV
        )
    )
    np.testing.assert_allclose(half[1, :, :V], 0.5 * vocab[1], atol=1e-5)
    assert np.all(half[1, :, V:].sum(-1) > 0.49)


def test_mixture_takes_an_explicit_mask_p_gen_of_rank_2_and_no_oov():
    vocab, attention, p_gen, source_ext = inputs(1)
    mask = np.ones((B, S), bool)
    mask[0, 1:3] = False  # positions of real words, masked explicitly
    got = copying.pointer_generator_mixture(
        vocab, attention, p_gen[..., 0], source_ext, NUM_OOV, source_mask=mask
    )
    np.testing.assert_allclose(
        to_numpy(got), mixture_reference(vocab, attention, p_gen, source_ext, NUM_OOV, mask), 1e-6
    )
    # without extra ids, the OOV ids (>= V) are not copied anywhere
    in_vocab = copying.pointer_generator_mixture(vocab, attention, p_gen, source_ext, 0)
    np.testing.assert_allclose(
        to_numpy(in_vocab), mixture_reference(vocab, attention, p_gen, source_ext, 0), atol=1e-6
    )
    assert to_numpy(in_vocab).shape == (B, T, V)


def test_mixture_is_float32_under_float16_inputs_and_checks_num_oov():
    vocab, attention, p_gen, source_ext = inputs(2)
    half = [keras.ops.convert_to_tensor(x, "float16") for x in (vocab, attention, p_gen)]
    got = copying.pointer_generator_mixture(*half, source_ext, NUM_OOV)
    assert keras.backend.standardize_dtype(got.dtype) == "float32"
    expected = mixture_reference(vocab, attention, p_gen, source_ext, NUM_OOV)
    np.testing.assert_allclose(to_numpy(got), expected, atol=2e-3)
    for bad in (-1, 1.5, None, True):
        with pytest.raises(ValueError, match=r"num_oov must be .*Received: num_oov="):
            copying.pointer_generator_mixture(vocab, attention, p_gen, source_ext, bad)


def test_extended_vocab_size_takes_a_vocabulary_of_one_and_refuses_other_sizes():
    assert copying.extended_vocab_size(1, 0) == 1
    assert copying.extended_vocab_size(1, 3) == 4
    for bad in (0, -2, 2.0, True, None):
        with pytest.raises(ValueError, match=r"^the vocabulary axis of .* static size\. Received"):
            copying.extended_vocab_size(bad, 0)
    num_oov_message = (
        r"^num_oov must be a non-negative Python int \(the number of extended ids; e\.g\. the "
        r"largest count of a batch\)\. Received: num_oov=False$"
    )
    with pytest.raises(ValueError, match=num_oov_message):
        copying.extended_vocab_size(5, False)


# ---------------------------------------------------------------- the loss


def test_pointer_generator_nll_per_step_with_its_default_epsilon():
    probabilities = np.array([[[0.1, 0.1, 0.8], [1.0, 0.0, 0.0]]], "float32")
    got = to_numpy(losses.pointer_generator_nll(np.array([[2, 0]]), probabilities))
    np.testing.assert_allclose(got[0, 0], -np.log(0.8), rtol=1e-6)
    assert got[0, 1] == 0.0  # padding costs exactly nothing
    # one step, two rows: a zero probability costs -log(1e-7), the default epsilon
    one_step = np.array([[[1.0, 0.0, 0.0]], [[0.0, 0.5, 0.5]]], "float32")
    got = to_numpy(losses.pointer_generator_nll(np.array([[1], [2]]), one_step))
    assert got.shape == (2, 1)
    np.testing.assert_allclose(got, [[-np.log(1e-7)], [-np.log(0.5)]], rtol=1e-5)


def targets():
    return np.array(
        [
            [3, 5, 6],  # in vocabulary, then two OOV ids
            [7, 6, 0],  # OOV ids, then padding
            [0, 0, 0],  # padding only: 0
            [1, 4, 2],  # id 4 is not in the row's source: generated only
        ],
        "int32",
    )


def test_loss_equals_the_reference_and_clips_at_epsilon():
    vocab, attention, p_gen, source_ext = inputs()
    probabilities = mixture_reference(vocab, attention, p_gen, source_ext, NUM_OOV)
    probabilities = probabilities.astype("float32")
    probabilities[3, 1] = 0.0  # P(y) = 0 exactly: -log(epsilon), finite
    probabilities[3, 1, 0] = 1.0
    got = to_numpy(losses.pointer_generator_loss(targets(), probabilities))
    expected = loss_reference(targets(), probabilities)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert got[2] == 0.0 and np.isfinite(got).all() and got[3] > -np.log(1e-7) / 3
    wider = to_numpy(losses.pointer_generator_loss(targets(), probabilities, epsilon=1e-2))
    np.testing.assert_allclose(wider, loss_reference(targets(), probabilities, 1e-2), rtol=1e-6)


def test_the_keras_loss_reduces_serializes_and_is_float32():
    vocab, attention, p_gen, source_ext = inputs(3)
    probabilities = mixture_reference(vocab, attention, p_gen, source_ext, NUM_OOV)
    loss = losses.PointerGeneratorLoss(epsilon=1e-3)
    # the mean over the batch's target tokens (7 of 12 steps), not over its rows
    mean, _ = token_loss_reference(targets(), probabilities, 1e-3)
    np.testing.assert_allclose(float(loss(targets(), probabilities)), mean, rtol=1e-6)
    assert not np.isclose(mean, loss_reference(targets(), probabilities, 1e-3).mean())
    summed = losses.PointerGeneratorLoss(reduction="sum")
    _, total = token_loss_reference(targets(), probabilities)
    np.testing.assert_allclose(float(summed(targets(), probabilities)), total, rtol=1e-6)
    # a mask on y_pred (a ready model's output carries its target's) changes nothing
    masked = keras.ops.convert_to_tensor(probabilities.astype("float32"))
    from keras_attn_rnn import _keras_compat

    _keras_compat.set_keras_mask(masked, keras.ops.not_equal(targets(), 0))
    np.testing.assert_allclose(float(loss(targets(), masked)), mean, rtol=1e-6)
    clone = losses.PointerGeneratorLoss.from_config(loss.get_config())
    assert clone.epsilon == 1e-3 and clone.name == "pointer_generator_loss"
    restored = keras.saving.deserialize_keras_object(
        json.loads(json.dumps(keras.saving.serialize_keras_object(loss)))
    )
    assert isinstance(restored, losses.PointerGeneratorLoss) and restored.epsilon == 1e-3
    half = keras.ops.convert_to_tensor(probabilities, "float16")
    value = losses.pointer_generator_loss(targets(), half)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"


def test_the_loss_gradient_equals_finite_differences_of_the_reference():
    """d loss / d (vocab logits, attention scores, p_gen logit), by the backend's autodiff in
    float32, against central differences of the float64 NumPy reference."""
    _, _, _, source_ext = inputs()
    a, b = B * T * V, B * T * (V + S)
    rng = np.random.default_rng(5)
    x = rng.normal(size=b + B * T).astype("float32")
    mask = source_ext != 0
    ops = keras.ops

    def model_loss(flat):
        vocab = ops.softmax(ops.reshape(flat[:a], (B, T, V)), axis=-1)
        scores = ops.reshape(flat[a:b], (B, T, S))
        scores = ops.where(mask[:, None, :], scores, -1e9)
        attention = ops.softmax(scores, axis=-1)
        p_gen = ops.sigmoid(ops.reshape(flat[b:], (B, T, 1)))
        mixed = copying.pointer_generator_mixture(vocab, attention, p_gen, source_ext, NUM_OOV)
        return losses.pointer_generator_loss(targets(), mixed)

    def reference_loss(flat):
        vocab = softmax(flat[:a].reshape(B, T, V))
        scores = np.where(mask[:, None, :], flat[a:b].reshape(B, T, S), -np.inf)
        attention = softmax(scores)
        p_gen = sigmoid(flat[b:].reshape(B, T, 1))
        mixed = mixture_reference(vocab, attention, p_gen, source_ext, NUM_OOV)
        return loss_reference(targets(), mixed)

    np.testing.assert_allclose(to_numpy(model_loss(x)), reference_loss(x), rtol=1e-6)
    grad, w = gradient(model_loss, x)
    x64, h = x.astype("float64"), 1e-6
    numeric = np.zeros_like(x64)
    for i in range(len(x64)):
        step = np.zeros_like(x64)
        step[i] = h
        numeric[i] = (w @ reference_loss(x64 + step) - w @ reference_loss(x64 - step)) / (2 * h)
    assert np.abs(numeric).max() > 0.05  # the check has something to compare
    np.testing.assert_allclose(grad, numeric, atol=2e-6, rtol=1e-4)
    # the padded source positions get no gradient at all
    padded = np.zeros((B, T, S), bool)
    padded[:] = ~mask[:, None, :]
    assert np.all(grad[a:b].reshape(B, T, S)[padded] == 0)


# ---------------------------------------------------------------- Seq2Seq(copy=True)

SOURCE_VOCAB, TARGET_VOCAB = 11, 8  # source ids 8..10 are copy-only in a shared vocabulary


def copy_model(**kwargs):
    return Seq2Seq(SOURCE_VOCAB, TARGET_VOCAB, embedding_dim=6, units=8, copy=True, **kwargs)


def model_inputs():
    source = np.array(
        [
            [9, 4, 9, 10, 2, 4],  # OOV 9 twice, in-vocabulary 4 twice
            [3, 10, 8, 5, 0, 0],
            [10, 10, 0, 0, 0, 0],  # every word out of the vocabulary
        ],
        "int32",
    )
    target = np.random.default_rng(7).integers(1, TARGET_VOCAB, (3, 4)).astype("int32")
    target[:, 0] = 1
    target[2, 3:] = 0
    # extended ids: each example numbers its own OOVs from TARGET_VOCAB
    source_ext = np.array(
        [[8, 4, 8, 9, 2, 4], [3, 8, 9, 5, 0, 0], [8, 8, 0, 0, 0, 0]],
        "int32",
    )
    return source, target, source_ext


def set_p_gen(model, bias):
    """Makes `p_gen` the constant `sigmoid(bias)`."""
    kernel, _ = model.p_gen.get_weights()
    model.p_gen.set_weights([np.zeros_like(kernel), np.full((1,), bias, "float32")])


DECODERS = [
    {"decoder": "bahdanau"},
    {"decoder": "luong", "attention": {"score": "general"}},
]


@pytest.mark.parametrize("kwargs", DECODERS, ids=["bahdanau", "luong"])
def test_copy_model_mixes_its_own_distributions(kwargs):
    source, target, source_ext = model_inputs()
    model = copy_model(max_oov=2, **kwargs)
    probabilities, alignments, p_gen = to_numpy(
        model([source, target, source_ext], return_attention_scores=True)
    )
    assert probabilities.shape == (3, 4, TARGET_VOCAB + 2) and p_gen.shape == (3, 4)
    assert alignments.shape == (3, 4, 6) and np.all((p_gen > 0) & (p_gen < 1))
    # (rows at padded target steps are left unspecified: the loss skips them)
    np.testing.assert_allclose(probabilities.sum(-1)[target != 0], 1.0, atol=1e-5)
    # copying only: the alignments summed per extended id, padded positions never
    set_p_gen(model, -60.0)
    copied, alignments = to_numpy(
        model([source, target, source_ext], return_attention_scores=True)[:2]
    )
    nothing = np.zeros((3, 4, TARGET_VOCAB))
    expected = mixture_reference(nothing, alignments, np.zeros((3, 4, 1)), source_ext, 2)
    live = target != 0  # a padded step attends nowhere: its copy share is generated
    np.testing.assert_allclose(copied[live], expected[live], atol=1e-6)
    np.testing.assert_allclose(copied[0, :, 8], alignments[0, :, [0, 2]].sum(0), atol=1e-6)
    # generating only: the vocabulary softmax, no mass on the extended ids
    set_p_gen(model, 60.0)
    generated = to_numpy(model([source, target, source_ext]))
    assert np.all(generated[..., TARGET_VOCAB:] == 0)
    np.testing.assert_allclose(generated.sum(-1), 1.0, atol=1e-5)
    # in between: the returned p_gen weighs the two
    set_p_gen(model, 0.7)
    mixed, _, p_gen = to_numpy(model([source, target, source_ext], return_attention_scores=True))
    np.testing.assert_allclose(p_gen, sigmoid(0.7), atol=1e-6)
    np.testing.assert_allclose(
        mixed, p_gen[..., None] * generated + (1 - p_gen[..., None]) * copied, atol=1e-6
    )


def test_copy_model_defaults_to_a_shared_vocabulary():
    source, target, _ = model_inputs()
    model = copy_model()
    assert model.num_oov == SOURCE_VOCAB - TARGET_VOCAB
    implicit = to_numpy(model([source, target]))
    explicit = to_numpy(model([source, target, source]))
    assert implicit.shape == (3, 4, SOURCE_VOCAB)
    np.testing.assert_allclose(implicit, explicit, atol=0)
    np.testing.assert_allclose(implicit.sum(-1)[target != 0], 1.0, atol=1e-5)
    assert Seq2Seq(5, 9, copy=True).num_oov == 0


# Options that push a mechanism's alignments away from a distribution: GMM v2's wide
# unnormalised Gaussians sum to several times 1; monotonic attention loses mass.
UNNORMALISED = {
    "gmm": {"version": "v2", "initial_width": 50.0},
    "monotonic": {"mode": "parallel", "score_bias_init": -4.0},
}


@pytest.mark.parametrize("name", mechanisms.names())
def test_copy_is_a_distribution_with_every_mechanism(name):
    """Every registered mechanism: each output row sums to 1 within 1e-5 (padded target
    steps too), whatever its alignments sum to, and copying alone is its renormalised
    attention."""
    source, target, source_ext = model_inputs()
    attention = {"mechanism": name, "units": 5, **UNNORMALISED.get(name, {})}
    model = copy_model(attention=attention, attention_layer_size=5)
    probabilities, alignments, _ = to_numpy(
        model([source, target, source_ext], return_attention_scores=True)
    )
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    assert np.all(probabilities <= 1 + 1e-5) and np.all(probabilities >= 0)
    set_p_gen(model, -60.0)
    probabilities, alignments, _ = to_numpy(
        model([source, target, source_ext], return_attention_scores=True)
    )
    nothing, never = np.zeros((3, 4, TARGET_VOCAB)), np.zeros((3, 4, 1))
    expected = mixture_reference(nothing, alignments, never, source_ext, model.num_oov)
    live = target != 0  # a padded step attends nowhere: its copy share is generated
    np.testing.assert_allclose(probabilities[live], expected[live], atol=1e-5)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    loss = to_numpy(losses.pointer_generator_loss(target, probabilities))
    assert np.all(loss >= 0)


def test_the_issue_s_gmm_copy_model_gives_probabilities():
    """Issue 40's repro: GMM v2 with wide Gaussians gave P(5) = 3.81 and a negative loss."""
    model = Seq2Seq(
        12,
        12,
        units=8,
        embedding_dim=8,
        copy=True,
        attention={"mechanism": "gmm", "units": 8, "version": "v2", "initial_width": 50.0},
    )
    source, target = np.array([[5] * 8]), np.array([[1, 5, 5]])
    probabilities = to_numpy(model([source, target]))
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    assert probabilities.max() <= 1.0 + 1e-6
    assert float(losses.PointerGeneratorLoss()(target, probabilities)) >= 0


def test_copy_config_round_trip_and_copy_false_config_unchanged():
    model = copy_model(max_oov=4, unk_id=3, attention={"mechanism": "coverage", "units": 5})
    clone = assert_config_round_trip(model)
    assert clone.copy and clone.max_oov == 4 and clone.num_oov == 4 and clone.unk_id == 3
    assert "unk_id" not in copy_model().get_config()
    plain = Seq2Seq(SOURCE_VOCAB, TARGET_VOCAB)
    assert "copy" not in plain.get_config() and "max_oov" not in plain.get_config()
    assert not hasattr(plain, "p_gen") or plain.p_gen is None


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: Seq2Seq(11, 9, copy="yes"), r"copy must be True or False.*Received: copy="),
        (lambda: Seq2Seq(11, 9, max_oov=2), r"needs copy=True.*Received: max_oov=2"),
        (lambda: Seq2Seq(11, 9, copy=True, max_oov=-1), r"max_oov must be .*Received"),
        (lambda: Seq2Seq(11, 9, unk_id=3), r"needs copy=True.*Received: unk_id=3"),
        (lambda: Seq2Seq(11, 9, copy=True, unk_id=9), r"\[1, target_vocabulary_size=9\).*unk_id=9"),
        (lambda: Seq2Seq(11, 9, copy=True, unk_id=0), r"\[1, target_vocabulary_size=9\).*unk_id=0"),
    ],
)
def test_copy_constructor_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_copy_call_and_generation_errors():
    source, target, source_ext = model_inputs()
    with pytest.raises(ValueError, match=r"source_ext needs copy=True.*Received"):
        Seq2Seq(11, 8, units=4)([source, target, source_ext])
    model = copy_model()
    with pytest.raises(ValueError, match=r"source_ext must have the source's shape"):
        model([source, target, source_ext[:, :4]])
    with pytest.raises(ValueError, match=r"feeds a copied extended id back as unk_id.*unk_id=None"):
        generate(model, source, 3, start_id=1)
    model = copy_model(max_oov=2, unk_id=3)
    with pytest.raises(ValueError, match=r"source_ext must be an int array of the source's shape"):
        generate(model, source, 3, start_id=1, source_ext=source_ext[:, :4])
    with pytest.raises(ValueError, match=r"extended ids in \[0, 10\).*\[0, 10\]"):
        generate(model, source, 3, start_id=1, source_ext=np.where(source_ext == 9, 10, source_ext))
    with pytest.raises(ValueError, match=r"needs a Seq2Seq with copy=True.*Seq2Seq"):
        generate(Seq2Seq(11, 8, units=4), source, 3, start_id=1, source_ext=source_ext)
    with pytest.raises(ValueError, match=r"shape \(B, S\), or \(B, 2, S\).*\(3, 3, 6\)"):
        model.init_cache(np.stack([source] * 3, 1), start_id=1)
    bad = np.where(source_ext == 9, 10, source_ext)
    with pytest.raises(ValueError, match=r"extended ids in \[0, 10\).*\[0, 10\]"):
        model([source, target, bad])


def test_source_ids_beyond_the_extended_vocabulary_are_refused_in_every_path():
    """Issue 40's repro: with no source_ext the source is read as extended ids; ids >=
    target_vocab + max_oov were dropped silently by call() and generate() (rows summed to
    0.49) while the same array as source_ext= raised."""
    model = Seq2Seq(20, 12, units=8, embedding_dim=8, copy=True, max_oov=2, unk_id=3)
    source, target = np.array([[17, 18, 19, 16]]), np.array([[1, 5, 5]])
    message = r"source_ext must hold extended ids in \[0, 14\).*without source_ext.*\[16, 19\]"
    with pytest.raises(ValueError, match=message):
        model([source, target])
    with pytest.raises(ValueError, match=message):
        generate(model, source, 3, start_id=1)
    with pytest.raises(ValueError, match=message):
        model.init_cache(source, start_id=1)
    with pytest.raises(
        ValueError,
        match=r"in \[0, 14\) \(target_vocabulary_size \+ max_oov\)\. Received: source_ext with ids in \[16",
    ):
        generate(model, source, 3, start_id=1, source_ext=source)
    # ids in range pass, with or without source_ext
    fine = np.array([[13, 5, 6, 0]])
    np.testing.assert_allclose(to_numpy(model([fine, target])).sum(-1), 1.0, atol=1e-5)
    assert generate(model, fine, 3, start_id=1).tokens.shape == (1, 3)


# ---------------------------------------------------------------- generation


def unk_model(p_gen_bias=None, **kwargs):
    """A copy model with two extended ids whose decoder reads `<unk>` (id 3) for them."""
    model = copy_model(max_oov=2, unk_id=3, **kwargs)
    source, target, source_ext = model_inputs()
    model([source, target, source_ext])
    if p_gen_bias is not None:
        set_p_gen(model, p_gen_bias)
    return model


@pytest.mark.parametrize("kwargs", DECODERS, ids=["bahdanau", "luong"])
def test_generation_steps_are_the_mixture_and_report_p_gen(kwargs):
    """Each step's distribution over the extended vocabulary is the teacher-forced mixture,
    and the result's p_gen and attention are the ones behind each token."""
    source, _, source_ext = model_inputs()
    model = unk_model(**kwargs)
    result = generate(model, source, 5, start_id=1, eos_id=2, source_ext=source_ext)
    tokens = result.tokens
    assert result.p_gen.shape == tokens.shape and np.all(result.p_gen[tokens == 0] == 0)
    # the step API, token by token, against one teacher-forced pass
    target_in = np.concatenate([np.ones((3, 1), "int32"), tokens[:, :-1]], axis=1)
    forced = to_numpy(model([source, target_in, source_ext]))
    logits, _, cache = model.init_cache(np.stack([source, source_ext], 1), start_id=1)
    for t in range(tokens.shape[1]):
        steps = np.exp(to_numpy(logits))
        live = tokens[:, t] != 0
        np.testing.assert_allclose(steps[live], forced[live, t], atol=1e-5)
        # an extended id's probability is (1 - p_gen) times its attention, as reported
        for b in np.flatnonzero(live):
            for word in (8, 9):
                mass = result.attention[b, t][source_ext[b] == word].sum()
                want = (1 - result.p_gen[b, t]) * mass
                np.testing.assert_allclose(steps[b, word], want, atol=1e-5)
        logits, _, cache = model.next_logits(tokens[:, t], cache)
    # an extended id is read as unk_id: the next step is the same
    a = to_numpy(model.next_logits(np.array([8, 9, 8]), cache)[0])
    b = to_numpy(model.next_logits(np.array([3, 3, 3]), cache)[0])
    np.testing.assert_allclose(a, b, atol=0)


def test_a_copying_model_emits_the_extended_ids_of_its_attention():
    """With p_gen ~ 0 each greedy token is the extended id with the most attention: the
    out-of-vocabulary words of each row included, numbered per row."""
    source, _, source_ext = model_inputs()
    model = unk_model(p_gen_bias=-60.0)
    result = generate(model, source, 6, start_id=1, source_ext=source_ext)
    assert np.all(result.p_gen < 1e-12)
    for b in range(3):
        for t in range(6):
            copied = np.zeros(TARGET_VOCAB + 2)
            np.add.at(copied, source_ext[b], result.attention[b, t])
            copied[0] = -1  # padding is never generated
            assert result.tokens[b, t] == np.argmax(copied)
    assert np.any(result.tokens >= TARGET_VOCAB)
    assert np.all(result.tokens[2] == 8)  # the all-OOV row can only copy its one word
    # sampling draws from the same distribution: only ids of each row's source
    sampled = generate(
        model, source, 6, sampler="sample", seed=4, start_id=1, source_ext=source_ext
    )
    for b in range(3):
        assert set(sampled.tokens[b]) <= set(source_ext[b]) - {0}
    assert np.any(sampled.tokens >= TARGET_VOCAB)


@pytest.mark.parametrize("kwargs", DECODERS, ids=["bahdanau", "luong"])
def test_copy_beam_width_1_equals_greedy_and_keeps_p_gen_per_beam(kwargs):
    source, _, source_ext = model_inputs()
    model = unk_model(**kwargs)
    rng = np.random.default_rng(0)  # the same weights on every backend: the same beams
    for weight in model.weights:  # p_gen varies from step to step and beam to beam
        weight.assign(rng.normal(0.0, 0.5, weight.shape).astype(weight.dtype))
    options = dict(start_id=1, eos_id=2, source_ext=source_ext)
    greedy = generate(model, source, 5, **options)
    beam = generate(model, source, 5, sampler=samplers.BeamSampler(1, length_penalty=0), **options)
    np.testing.assert_array_equal(beam.tokens, greedy.tokens)
    for field in ("scores", "attention", "p_gen"):
        np.testing.assert_allclose(getattr(beam, field), getattr(greedy, field), atol=1e-6)
    wide = generate(  # no eos_id: every step of both beams is live
        model,
        source,
        8,
        sampler=samplers.BeamSampler(4, num_beams_returned=2),
        start_id=1,
        source_ext=source_ext,
    )
    assert wide.tokens.shape == wide.p_gen.shape == (3, 2, 8)
    # each returned beam's p_gen is the one its own tokens give
    for n in range(2):
        own = to_numpy(model.copy_probabilities(source, wide.tokens[:, n], 1))
        np.testing.assert_allclose(wide.p_gen[:, n], own, atol=1e-6)
    # where the two beams' prefixes differ, so do their p_gen
    first, second = wide.tokens[:, 0], wide.tokens[:, 1]
    split = np.cumsum(first != second, axis=1) > 0
    apart = np.concatenate([np.zeros((3, 1), bool), split[:, :-1]], axis=1)
    apart &= (first != 0) & (second != 0)
    assert apart.any()
    assert np.all(np.abs(wide.p_gen[:, 0] - wide.p_gen[:, 1])[apart] > 1e-6)


def test_copy_generation_compiled_equals_eager():
    source, _, source_ext = model_inputs()
    model = unk_model()
    options = dict(start_id=1, eos_id=2, source_ext=source_ext, sampler="beam")
    eager = generate(model, source, 5, **options)
    compiled = generate(model, source, 5, jit_compile=True, **options)
    np.testing.assert_array_equal(compiled.tokens, eager.tokens)
    np.testing.assert_allclose(compiled.scores, eager.scores, atol=1e-5)
    # without source_ext (the source is its own) after a call with it: the same function
    without = dict(options, source_ext=None)
    shared = generate(model, source_ext, 5, **without)
    explicit = generate(model, source_ext, 5, **dict(options, source_ext=source_ext))
    np.testing.assert_array_equal(shared.tokens, explicit.tokens)


def test_extended_ids_in_target_in_are_read_as_unk_id():
    source, target, source_ext = model_inputs()
    model = unk_model()
    extended = target.copy()
    extended[0, 2], extended[1, 1] = 8, 9
    unknown = np.where(extended >= TARGET_VOCAB, 3, extended)
    got = to_numpy(model([source, extended, source_ext]))
    np.testing.assert_allclose(got, to_numpy(model([source, unknown, source_ext])), atol=0)
    assert not np.allclose(got, to_numpy(model([source, target, source_ext])))


@pytest.mark.slow  # a fresh process: ~10 s on TensorFlow, ~20 s on JAX
def test_copy_model_keras_file_loads_in_a_fresh_process(tmp_path):
    source, target, source_ext = model_inputs()
    model = copy_model(bidirectional=True, attention={"mechanism": "coverage", "units": 5})
    model([source, target, source_ext])  # built: the file holds the weights
    model.compile(loss=losses.PointerGeneratorLoss())
    save_and_reload_in_subprocess(
        model,
        [source, target, source_ext],
        tmp_path,
        call_kwargs={"return_attention_scores": True},
    )
    with warnings.catch_warnings():  # the unbuilt optimizer's variables are not restored
        warnings.simplefilter("ignore")
        loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert isinstance(loaded.loss, losses.PointerGeneratorLoss)


def test_mixed_float16_is_close_to_float32():
    source, target, source_ext = model_inputs()
    reference = copy_model()
    expected = to_numpy(reference([source, target, source_ext], return_attention_scores=True))
    mixed = copy_model(dtype="mixed_float16")
    mixed([source, target, source_ext])
    mixed.set_weights(reference.get_weights())
    got = mixed([source, target, source_ext], return_attention_scores=True)
    for value, want in zip(got, expected):
        assert keras.backend.standardize_dtype(value.dtype) == "float32"
        np.testing.assert_allclose(to_numpy(value), want, atol=5e-3)
    assert np.isfinite(to_numpy(got[0])).all()


# On torch `jit_compile=True` is torch.compile, which takes minutes on the decoder's loop.
_SLOW_ON_TORCH = [pytest.mark.slow] if keras.backend.backend() == "torch" else []


@pytest.mark.parametrize("jit_compile", [pytest.param(True, marks=_SLOW_ON_TORCH)])
def test_compiled_training_equals_eager(jit_compile):
    source, target, source_ext = model_inputs()
    labels = np.concatenate([target[:, 1:], np.zeros((3, 1), "int32")], axis=1)
    labels[0, 1] = 8  # a copied OOV word as the label
    x = [source, target, source_ext]
    results = []
    for mode in ({"jit_compile": jit_compile}, {"run_eagerly": True}):
        keras.utils.set_random_seed(3)
        model = copy_model(max_oov=2)
        model.compile(
            optimizer=keras.optimizers.SGD(0.5), loss=losses.PointerGeneratorLoss(), **mode
        )
        trained = [float(model.train_on_batch(x, labels)) for _ in range(3)]
        results.append((trained, to_numpy(model.predict_on_batch(x))))
    (jit_losses, jit_out), (eager_losses, eager_out) = results
    np.testing.assert_allclose(jit_losses, eager_losses, atol=1e-5)
    assert jit_losses[2] < jit_losses[0]
    np.testing.assert_allclose(jit_out, eager_out, atol=1e-5)
