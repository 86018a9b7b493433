"""The ready models: shapes, masking, the step/cache API against teacher forcing,
real-model generation, config and `.keras` round trips, and a needle task."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from helpers import ROOT, to_numpy

from keras_attn_rnn import models, samplers
from keras_attn_rnn.generation import generate

pytestmark = pytest.mark.layers

ATOL = 1e-5


def tiny_lm(**kwargs):
    return models.AttentiveLanguageModel(13, **{"embedding_dim": 6, "units": 8, **kwargs})


def tiny_seq2seq(**kwargs):
    return models.Seq2Seq(11, 9, **{"embedding_dim": 6, "units": 8, **kwargs})


def ids(shape, high, seed=0, low=1):
    return np.random.default_rng(seed).integers(low, high, shape).astype("int32")


SOURCE = ids((3, 6), 11)
SOURCE[1, 4:] = 0
SOURCE[2, 2:] = 0


# ---------------------------------------------------------------- classifier


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {
            "rnn": "gru",
            "bidirectional": False,
            "num_layers": 2,
            "attention": {
                "score": "additive",
                "query": "fixed",
                "units": 4,
                "query_value": [1.0, 0.5, -1.0, 0.0],
            },
        },
    ],
)
def test_classifier_logits_and_attention(kwargs):
    model = models.AttentiveClassifier(20, 3, embedding_dim=6, units=5, **kwargs)
    tokens = ids((4, 7), 20)
    tokens[1, 3:] = 0
    logits, weights = to_numpy(model(tokens, return_attention_scores=True))
    assert logits.shape == (4, 3) and weights.shape == (4, 7)
    np.testing.assert_allclose(weights.sum(-1), np.ones(4), atol=1e-6)
    assert np.all(weights[1, 3:] == 0)
    np.testing.assert_allclose(to_numpy(model(tokens)), logits, atol=ATOL)
    np.testing.assert_allclose(to_numpy(model.attention_weights(tokens)), weights, atol=ATOL)
    # Padding changes nothing: the same rows with extra trailing padding.
    padded = np.pad(tokens, ((0, 0), (0, 3)))
    np.testing.assert_allclose(to_numpy(model(padded)), logits, atol=ATOL)


# ------------------------------------------------------- step API == teacher forcing

# `slow` cases run on TensorFlow only (`make test-jax` deselects them): JAX compiles
# every new shape, so its run keeps one case of each kind.
JAX_TOO, TF_ONLY = (), (pytest.mark.slow,)

LM_CASES = [
    pytest.param({}, marks=JAX_TOO),
    pytest.param(
        {"rnn": "gru", "num_layers": 2, "attention": {"score": "additive", "units": 5}},
        marks=TF_ONLY,
    ),
    pytest.param({"attention": {"score": "general", "window": 2}}, marks=TF_ONLY),
    pytest.param({"rnn": "gru", "attention": {"score": "scaled_dot", "window": 1}}, marks=JAX_TOO),
]


@pytest.mark.parametrize("kwargs", LM_CASES)
def test_language_model_cache_equals_teacher_forcing(kwargs):
    model = tiny_lm(**kwargs)
    tokens = ids((3, 7), 13, seed=1)
    full, weights = to_numpy(model(tokens, return_attention_scores=True))
    assert full.shape == (3, 7, 13) and weights.shape == (3, 7, 7)
    assert np.all(np.triu(weights[0], 1) == 0)  # causal
    logits, step_weights, cache = model.init_cache(tokens[:, :2], max_length=5)
    for t in range(1, 7):
        if t > 1:
            logits, step_weights, cache = model.next_logits(tokens[:, t], cache)
        np.testing.assert_allclose(to_numpy(logits), full[:, t], atol=ATOL)
        step_weights = to_numpy(step_weights)
        np.testing.assert_allclose(step_weights[:, : t + 1], weights[:, t, : t + 1], atol=ATOL)
        assert np.all(step_weights[:, t + 1 :] == 0)

    # A ragged batch of prompts: each row's logits come from its last token.
    ragged = tokens.copy()
    ragged[0, 3:] = 0
    ragged[1, 5:] = 0
    logits, _, cache = model.init_cache(ragged, max_length=2)
    np.testing.assert_array_equal(to_numpy(cache["position"]), [3, 5, 7])
    for row, last in enumerate([2, 4, 6]):
        alone = to_numpy(model(tokens[row : row + 1, : last + 1]))[0, -1]
        np.testing.assert_allclose(to_numpy(logits)[row], alone, atol=ATOL)


SEQ2SEQ_CASES = [
    pytest.param({"decoder": "bahdanau"}, marks=JAX_TOO),
    pytest.param(
        {"decoder": "bahdanau", "rnn": "gru", "bidirectional": True, "attention_layer_size": 7},
        marks=TF_ONLY,
    ),
    pytest.param(
        {"decoder": "luong", "bidirectional": True, "attention": {"score": "general"}},
        marks=TF_ONLY,
    ),
    pytest.param(
        {
            "decoder": "luong",
            "rnn": "gru",
            "attention": {"score": "dot"},
            "attention_layer_size": 5,
        },
        marks=JAX_TOO,
    ),
]


@pytest.mark.parametrize("kwargs", SEQ2SEQ_CASES)
def test_seq2seq_cache_equals_teacher_forcing(kwargs):
    model = tiny_seq2seq(**kwargs)
    target = ids((3, 5), 9, seed=2)
    target[:, 0] = 1  # the start token
    full, alignments = to_numpy(model([SOURCE, target], return_attention_scores=True))
    assert full.shape == (3, 5, 9) and alignments.shape == (3, 5, 6)
    assert np.all(alignments[1, :, 4:] == 0) and np.all(alignments[2, :, 2:] == 0)
    logits, step_alignments, cache = model.init_cache(SOURCE, start_id=1)
    for t in range(5):
        if t:
            logits, step_alignments, cache = model.next_logits(target[:, t], cache)
        np.testing.assert_allclose(to_numpy(logits), full[:, t], atol=ATOL)
        np.testing.assert_allclose(to_numpy(step_alignments), alignments[:, t], atol=ATOL)


# ------------------------------------------------------------ real-model generation


def _greedy_by_rerunning(model, prompts, steps, source=None):
    """Greedy decoding that re-runs the whole model on the prefixes (no cache).

    `prompts` `(B, P)` all have the same length.
    """
    prefix = np.asarray(prompts, "int32")
    for _ in range(steps):
        inputs = prefix if source is None else [source, prefix]
        logits = to_numpy(model(inputs))[:, -1]
        next_token = np.argmax(logits[:, 1:], axis=-1) + 1  # id 0 is never generated
        prefix = np.concatenate([prefix, next_token[:, None].astype("int32")], axis=1)
    return prefix[:, len(prompts[0]) :]


@pytest.mark.slow  # TensorFlow only; JAX runs the seq2seq (luong) variant below
def test_language_model_generation_equals_rerunning_and_ignores_batching():
    model = tiny_lm(num_layers=2, attention={"score": "general", "window": 3})
    same_length = [[3, 4, 5], [8, 9, 2]]
    np.testing.assert_array_equal(
        generate(model, same_length, max_length=5).tokens,
        _greedy_by_rerunning(model, same_length, 5),
    )
    prompts = [[3, 4, 5, 6], [7], [8, 9]]
    result = generate(model, prompts, max_length=5)
    assert result.attention.shape == (3, 5, 4 + 5)
    for row in (0, 1):  # the longest and the shortest prompt
        alone = generate(model, [prompts[row]], max_length=5)
        np.testing.assert_array_equal(alone.tokens[0], result.tokens[row])
        np.testing.assert_allclose(alone.scores[0], result.scores[row], atol=ATOL)
    beam = generate(model, prompts, 5, sampler=samplers.get("beam", beam_width=3))
    beam_alone = generate(model, prompts[1:2], 5, sampler=samplers.get("beam", beam_width=3))
    np.testing.assert_array_equal(beam_alone.tokens[0], beam.tokens[1])
    np.testing.assert_allclose(beam_alone.scores[0], beam.scores[1], atol=ATOL)


@pytest.mark.parametrize(
    "decoder", [pytest.param("bahdanau", marks=TF_ONLY), pytest.param("luong", marks=JAX_TOO)]
)
def test_seq2seq_generation_equals_rerunning_and_ignores_batching(decoder):
    model = tiny_seq2seq(decoder=decoder, bidirectional=decoder == "bahdanau")
    result = generate(model, SOURCE, max_length=4, start_id=1)
    expected = _greedy_by_rerunning(model, [[1]] * 3, 4, source=SOURCE)
    np.testing.assert_array_equal(result.tokens, expected)
    assert result.attention.shape == (3, 4, 6)
    np.testing.assert_allclose(result.attention.sum(-1), np.ones((3, 4)), atol=1e-5)
    alone = generate(model, SOURCE[2:, :2], max_length=4, start_id=1)
    np.testing.assert_array_equal(alone.tokens[0], result.tokens[2])
    beam = generate(model, SOURCE, 4, start_id=1, sampler=samplers.get("beam", beam_width=1))
    np.testing.assert_array_equal(beam.tokens, result.tokens)


MECHANISM_OPTIONS = {
    "monotonic": {"mechanism": "monotonic", "score": "general", "mode": "parallel"},
    "monotonic_hard": {"mechanism": "monotonic", "score": "general", "mode": "hard"},
    "location": {"mechanism": "location", "units": 5, "filters": 2, "kernel_size": 3},
    "coverage": {"mechanism": "coverage", "units": 5},
    "local_p": {"mechanism": "local_p", "score": "general", "window": 2},
    "gmm": {"mechanism": "gmm", "units": 5, "num_mixtures": 2},
    "gmm_backward": {"mechanism": "gmm", "units": 5, "num_mixtures": 2, "direction": "backward"},
    "dca": {
        "mechanism": "dca",
        "units": 5,
        "static_filters": 2,
        "static_kernel_size": 3,
        "dynamic_filters": 2,
        "dynamic_kernel_size": 3,
    },
    "relative_location": {"mechanism": "relative_location", "units": 5, "min_width": 0.3},
    "sparsemax": {"score": "additive", "normalizer": "sparsemax"},
}


@pytest.mark.parametrize("name", sorted(MECHANISM_OPTIONS))
def test_seq2seq_with_each_mechanism_caches_generates_and_beams(name):
    """Every mechanism's state is carried by the cache: steps equal teacher forcing, beam
    search of width 1 equals greedy token for token (state tiled and reordered)."""
    model = tiny_seq2seq(attention=MECHANISM_OPTIONS[name], attention_layer_size=5)
    target = ids((3, 4), 9, seed=3)
    target[:, 0] = 1
    full, alignments = to_numpy(model([SOURCE, target], return_attention_scores=True))
    logits, step_alignments, cache = model.init_cache(SOURCE, start_id=1)
    for t in range(4):
        if t:
            logits, step_alignments, cache = model.next_logits(target[:, t], cache)
        np.testing.assert_allclose(to_numpy(logits), full[:, t], atol=ATOL)
        np.testing.assert_allclose(to_numpy(step_alignments), alignments[:, t], atol=ATOL)
    greedy = generate(model, SOURCE, 5, start_id=1, eos_id=2)
    beam = generate(
        model,
        SOURCE,
        5,
        start_id=1,
        eos_id=2,
        sampler=samplers.get("beam", beam_width=1, length_penalty=0),
    )
    np.testing.assert_array_equal(beam.tokens, greedy.tokens)
    np.testing.assert_allclose(beam.attention, greedy.attention, atol=ATOL)
    wide = generate(
        model,
        SOURCE,
        5,
        start_id=1,
        eos_id=2,
        sampler=samplers.get("beam", beam_width=3, length_penalty=0),
    )
    assert wide.tokens.shape == (3, 5) and np.all(wide.scores >= greedy.scores - 1e-4)
    clone = models.Seq2Seq.from_config(model.get_config())
    assert clone.get_config() == model.get_config()


@pytest.mark.parametrize("name", ["content", "monotonic"])
def test_seq2seq_cache_starts_beam_coverage_where_tfa_does(name):
    """tfa's accumulated attention starts from the initial alignments: one-hot at 0
    for monotonic attention (whose first step reads them), none (zeros) otherwise."""
    model = tiny_seq2seq(attention=MECHANISM_OPTIONS.get(name, {}))
    _, _, cache = model.init_cache(SOURCE, start_id=1)
    if name == "content":
        assert "initial_alignments" not in cache
        return
    expected = np.zeros(SOURCE.shape, "float32")
    expected[:, 0] = 1.0
    np.testing.assert_array_equal(to_numpy(cache["initial_alignments"]), expected)
    _, _, cache = model.next_logits(np.ones((3,), "int32"), cache)
    np.testing.assert_array_equal(to_numpy(cache["initial_alignments"]), expected)


def _location_kernel(model):
    (kernel,) = [w for w in model.weights if w.path.endswith("location_kernel")]
    return tuple(kernel.shape)


def test_seq2seq_location_default_and_old_configs():
    """`location` now defaults to Tacotron 2's two channels; a config saved before
    `location_features` existed (`cumulative: None`, then meaning True) keeps one."""
    model = tiny_seq2seq(attention=MECHANISM_OPTIONS["location"])
    model([SOURCE, ids((3, 4), 9, seed=3)])
    assert _location_kernel(model) == (3, 2, 2)
    config = model.get_config()
    assert "location_features" not in config["attention"]  # only the options set are saved
    # saved when every mechanism's options were listed, unset ones as None
    listed = ("mode", "sigmoid_noise", "score_bias_init", "cumulative", "window")
    old = {**config, "attention": {**config["attention"], **dict.fromkeys(listed)}}
    restored = models.Seq2Seq.from_config(old)
    restored([SOURCE, ids((3, 4), 9, seed=3)])
    assert _location_kernel(restored) == (3, 1, 2)
    assert restored.attention_decoder.mechanisms[0].location_features == "cumulative"
    clone = models.Seq2Seq.from_config(restored.get_config())
    clone([SOURCE, ids((3, 4), 9, seed=3)])
    assert _location_kernel(clone) == (3, 1, 2)


def test_generation_rejects_ids_outside_the_source_vocabulary():
    with pytest.raises(ValueError, match=r"token ids in \[0, 11\).*Received: prompts"):
        generate(tiny_seq2seq(), [[3, 11]], 3, start_id=1)
    with pytest.raises(ValueError, match=r"start_id must be a token id in \[0, 9\)"):
        generate(tiny_seq2seq(), [[3]], 3, start_id=9)


# ------------------------------------------------------------ config and errors


@pytest.mark.parametrize(
    "model",
    [
        lambda: models.AttentiveClassifier(
            20, 3, attention={"score": "additive", "units": 4}, name="cls"
        ),
        lambda: tiny_lm(attention={"score": "general", "window": 4}, dropout=0.1),
        lambda: tiny_seq2seq(decoder="luong", bidirectional=True, attention_layer_size=6),
    ],
)
def test_config_round_trip(model):
    model = model()
    config = model.get_config()
    json.dumps(config)
    clone = type(model).from_config(config)
    assert clone.get_config() == config


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: tiny_lm(rnn="rnn"), r"rnn must be one of 'lstm', 'gru'. Received: rnn='rnn'"),
        (
            lambda: models.AttentiveLanguageModel(0),
            r"vocabulary_size must be a positive integer. Received",
        ),
        (lambda: tiny_lm(attention={"scor": "dot"}), r"unknown keys \['scor'\].*Received"),
        (lambda: tiny_lm(attention={"score": "dott"}), r"score must be one of.*Received"),
        (lambda: tiny_lm(attention={"window": 0}), r"window'\] must be .* Received"),
        (lambda: tiny_seq2seq(decoder="tfa"), r"decoder must be one of .* Received: decoder="),
        (lambda: tiny_seq2seq(bidirectional="yes"), r"bidirectional must be True or False"),
        (
            lambda: tiny_seq2seq(attention={"mechanism": "monotone"}),
            r"mechanism must be one of 'content', .*Received: mechanism='monotone'",
        ),
        (
            lambda: tiny_seq2seq(decoder="luong", attention={"mechanism": "coverage"}),
            r"mechanism='content' only.*Received: attention\['mechanism'\]='coverage'",
        ),
        (
            lambda: tiny_seq2seq(attention={"mechanism": "monotonic", "window": 3}),
            r"attention\['window'\] is not an option of mechanism 'monotonic'.*Received",
        ),
        (
            lambda: tiny_lm(attention={"normalizer": "sparse"}),
            r"normalizer must be one of .*Received: normalizer='sparse'",
        ),
        (
            lambda: models.AttentiveClassifier(20, 3, attention={"query": "fixed"}),
            r"query_value.*Received: query_value=None",
        ),
        (lambda: models.AttentiveClassifier(20, 3, dropout=1.0), r"dropout .* Received"),
    ],
)
def test_constructor_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_seq2seq_init_cache_needs_a_start_id():
    with pytest.raises(ValueError, match="start_id.*Received: start_id=None"):
        tiny_seq2seq().init_cache(SOURCE)


# ------------------------------------------------------------ save / load


@pytest.mark.slow
def test_keras_round_trip_in_a_fresh_process_generates_identically(tmp_path):
    lm = tiny_lm(num_layers=2, attention={"score": "additive", "units": 4})
    seq2seq = tiny_seq2seq(bidirectional=True, attention_layer_size=6)
    classifier = models.AttentiveClassifier(20, 3, embedding_dim=6, units=5)
    tokens = ids((2, 7), 20)
    expected = {
        "lm": generate(lm, [[3, 4], [5]], 4, seed=4, sampler=samplers.get("top_k", k=3)).tokens,
        "seq2seq": generate(
            seq2seq, SOURCE, 4, start_id=1, sampler=samplers.get("beam", beam_width=2)
        ).tokens,
        "classifier": to_numpy(classifier(tokens)),
    }
    for name, model in (("lm", lm), ("seq2seq", seq2seq), ("classifier", classifier)):
        model.save(os.path.join(tmp_path, f"{name}.keras"))
    np.savez(os.path.join(tmp_path, "expected.npz"), source=SOURCE, tokens=tokens, **expected)
    script = textwrap.dedent(
        f"""
        import os, numpy as np, keras
        from keras_attn_rnn import samplers
        from keras_attn_rnn.generation import generate
        d = {str(tmp_path)!r}
        e = np.load(os.path.join(d, "expected.npz"))
        load = lambda n: keras.saving.load_model(os.path.join(d, n + ".keras"), safe_mode=True)
        lm, s2s, cls = load("lm"), load("seq2seq"), load("classifier")
        eq = np.testing.assert_array_equal
        top_k, beam = samplers.TopKSampler(3), samplers.BeamSampler(2)
        eq(generate(lm, [[3, 4], [5]], 4, sampler=top_k, seed=4).tokens, e["lm"])
        eq(generate(s2s, e["source"], 4, sampler=beam, start_id=1).tokens, e["seq2seq"])
        out = np.asarray(keras.ops.convert_to_numpy(cls(e["tokens"])))
        np.testing.assert_allclose(out, e["classifier"], atol=0, rtol=0)
        print("RELOAD-OK", type(lm).__name__, type(s2s).__name__, type(cls).__name__)
        """
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "RELOAD-OK AttentiveLanguageModel Seq2Seq AttentiveClassifier" in result.stdout


def test_attention_image_uses_one_scale_for_every_step():
    from matplotlib import colormaps

    from keras_attn_rnn.plotting import attention_image

    viridis = colormaps["viridis"]
    uniform, sharp = np.full((2, 4), 0.25), np.eye(2, 4)
    image = attention_image(uniform, cell=3)
    assert image.shape == (6, 12, 3) and image.dtype == np.uint8
    # Uniform attention is dark on the shared 0..1 scale; a one-hot row is bright.
    np.testing.assert_array_equal(image[0, 0], viridis(0.25, bytes=True)[:3])
    np.testing.assert_array_equal(
        attention_image(sharp, cell=1)[1, 1], viridis(1.0, bytes=True)[:3]
    )
    # vmax=None: scaled by the image's own maximum (plot_attention's choice).
    np.testing.assert_array_equal(
        attention_image(uniform, cell=1, vmax=None)[0, 0], viridis(1.0, bytes=True)[:3]
    )
    assert attention_image(np.ones((300, 2)), cell=12, max_side=600).shape[0] == 600
    with pytest.raises(ValueError, match="weights must have shape"):
        attention_image(np.zeros((2, 2, 2)))


def test_attention_image_draws_the_tokens_beside_the_same_grid():
    from keras_attn_rnn.plotting import attention_image

    weights = np.random.default_rng(0).dirichlet(np.ones(5), size=3)
    grid = attention_image(weights, cell=20)
    labelled = attention_image(
        weights, cell=20, source_tokens=list("abcde") + ["extra"], target_tokens=["x", "y", "z"]
    )
    height, width = grid.shape[:2]
    assert labelled.shape[0] > height and labelled.shape[1] > width
    np.testing.assert_array_equal(labelled[-height:, -width:], grid)  # the grid, bottom right
    top, left = labelled[:-height, -width:], labelled[-height:, :-width]
    assert (top < 128).any() and (left < 128).any()  # dark text on the white margins
    assert (labelled[:-height, :-width] == 255).all()  # the corner stays blank
    # each column's label is drawn over its own column
    for column in range(5):
        strip = top[:, column * 20 + 4 : column * 20 + 16]
        assert (strip < 128).any(), column
    only_rows = attention_image(weights, cell=20, target_tokens=["x", "y", "z"])
    assert only_rows.shape[0] == height and only_rows.shape[1] > width


def test_attention_image_draws_whitespace_labels_as_glyphs_not_boxes():
    from keras_attn_rnn.plotting import attention_image

    # A private-use character has no glyph in any font: it is drawn as the missing-glyph box.
    # A space's label (␣) and an empty token's (∅) must be drawn as themselves, as
    # plot_attention's do, not as that box.
    tokens = [" ", "", "\ue000"]
    image = attention_image(np.full((3, 1), 0.5), cell=20, target_tokens=tokens)
    top = image.shape[0] - 60  # the grid's rows, bottom left
    labels = [image[top + 20 * i : top + 20 * (i + 1), :-20] for i in range(3)]
    space, empty, missing = (np.asarray(label < 200) for label in labels)  # the ink
    assert space.any() and empty.any() and missing.any()
    assert not np.array_equal(space, missing)
    assert not np.array_equal(empty, missing)
    assert not np.array_equal(space, empty)


def _long_row(count=200):
    weights = np.random.default_rng(0).dirichlet(np.full(count, 0.3))[None]
    return weights, [f"w{i}" for i in range(count)]


def test_plot_attention_wraps_one_long_row_into_lines_of_tokens():
    from keras_attn_rnn.plotting import plot_attention

    # A classifier's attention over a long text: lines of cells with the tokens written in
    # them, not a 1-row strip ~10 times as wide as high.
    weights, tokens = _long_row()
    figure = plot_attention(weights, tokens, ["pred good"], title="probe 0")
    grid = np.ma.filled(figure.axes[0].images[0].get_array().astype(float), np.nan)
    lines, width = grid.shape
    assert lines > 1 and width * (lines - 1) < 200 <= width * lines
    np.testing.assert_allclose(grid.ravel()[:200], weights[0], rtol=1e-6)
    assert np.isnan(grid.ravel()[200:]).all()  # the last line's empty cells
    assert [t.get_text() for t in figure.axes[0].texts] == tokens  # each in its cell
    assert [(t.get_position()) for t in figure.axes[0].texts][width + 1] == (1, 1)
    across, down = figure.get_size_inches()
    assert 0.5 < across / down < 2, (across, down)
    # Short rows and several rows keep the plain heatmap.
    short = plot_attention(weights[:, :20], tokens[:20], ["pred good"])
    assert short.axes[0].images[0].get_array().shape == (1, 20)
    assert plot_attention(weights, tokens, ["x"], wrap=None).axes[0].images[
        0
    ].get_array().shape == (
        1,
        200,
    )


def test_attention_image_wraps_one_long_row_into_a_square_of_tokens():
    from matplotlib import colormaps

    from keras_attn_rnn.plotting import attention_image

    weights, tokens = _long_row()
    image = attention_image(weights, vmax=None, source_tokens=tokens, target_tokens=["pred"])
    height, width = image.shape[:2]
    assert 0.5 < width / height < 2, image.shape  # MLflow's UI shows a 256-pixel thumbnail
    # Every position's colour is in the image, the strongest one included, with ink on it.
    colours = colormaps["viridis"](weights[0] / weights.max(), bytes=True)[:, :3]
    present = {tuple(c) for c in image.reshape(-1, 3)}
    assert {tuple(c) for c in colours} <= present
    brightest = np.all(image == colours[np.argmax(weights[0])], axis=-1)
    rows, columns = np.nonzero(brightest)
    box = image[rows.min() : rows.max() + 1, columns.min() : columns.max() + 1]
    assert box.shape[1] == 3 * box.shape[0] >= 3 * 16  # a 3:1 cell, a line of text high
    assert (box.max(-1) < 64).any()  # dark ink (its token) on the bright cell


def test_plot_attention_of_a_model():
    from keras_attn_rnn.plotting import plot_attention

    model = tiny_seq2seq()
    result = generate(model, SOURCE[:1], 3, start_id=1)
    figure = plot_attention(result.attention[0], list("abcdef"), ["x", "y", "z"])
    assert type(figure).__name__ == "Figure"
    image = figure.axes[0].images[0].get_array()
    np.testing.assert_allclose(np.asarray(image), result.attention[0], atol=1e-6)


# ------------------------------------------------------------ learning


def needle_data(count, seed, num_classes=3, vocab=20, lengths=(8, 14)):
    """Random filler ids; one needle id `1 + label` at a random position."""
    rng = np.random.default_rng(seed)
    tokens = np.zeros((count, lengths[1]), "int32")
    labels = rng.integers(num_classes, size=count)
    positions = np.zeros(count, "int32")
    for i in range(count):
        length = rng.integers(lengths[0], lengths[1] + 1)
        tokens[i, :length] = rng.integers(1 + num_classes, vocab, size=length)
        positions[i] = rng.integers(length)
        tokens[i, positions[i]] = 1 + labels[i]
    return tokens, labels.astype("int32"), positions


@pytest.mark.slow
def test_classifier_learns_the_needle_task_and_attends_to_the_needle():
    if keras.backend.backend() != "tensorflow":
        pytest.skip("trained once, on the TensorFlow run (backend-agnostic code)")
    x, y, _ = needle_data(1000, seed=0)
    x_test, y_test, positions = needle_data(300, seed=1)
    model = models.AttentiveClassifier(20, 3, embedding_dim=16, rnn="gru", units=16)
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(x, y, batch_size=64, epochs=3, verbose=0)
    logits, weights = to_numpy(model(x_test, return_attention_scores=True))
    accuracy = np.mean(logits.argmax(-1) == y_test)
    hits = np.mean(weights.argmax(-1) == positions)
    assert accuracy >= 0.95, accuracy
    assert hits >= 0.90, hits


def test_mixed_precision_logits_are_float32_and_the_cache_still_matches():
    keras.config.set_dtype_policy("mixed_float16")
    model = tiny_lm(attention={"score": "additive"})
    tokens = ids((2, 4), 13, seed=3)
    full = model(tokens)
    assert keras.backend.standardize_dtype(full.dtype) == "float32"
    logits, _, cache = model.init_cache(tokens[:, :1], max_length=3)
    for t in range(1, 4):
        logits, _, cache = model.next_logits(tokens[:, t], cache)
        np.testing.assert_allclose(to_numpy(logits), to_numpy(full)[:, t], atol=2e-2)


# ---------------------------------------------------------------- output masks


def _masked_reference(logits, labels, mask):
    """Sparse cross-entropy from logits, float64, averaged over the unmasked steps."""
    logits = logits.astype("float64")
    logits = logits - logits.max(-1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    return nll[mask].mean()


@pytest.mark.parametrize(
    "build",
    [
        lambda: models.Seq2Seq(20, 20, units=8, decoder="bahdanau"),
        lambda: models.Seq2Seq(20, 20, units=8, decoder="luong"),
        lambda: models.Seq2Seq(20, 20, units=8, decoder="luong", copy=True),
        lambda: models.AttentiveLanguageModel(20, units=8),
    ],
    ids=["bahdanau", "luong", "luong-copy", "lm"],
)
def test_every_ready_model_s_outputs_carry_its_input_mask(build):
    """Issue 40's repro: a plain Keras loss counted padding for Luong only (evaluate gave
    21.7 for Luong against 2.94 for Bahdanau with the bias of id 0 at -50). The logits of
    every ready model carry the mask of their tokens, so padded steps are skipped."""
    src = np.array([[5, 6, 7, 0], [8, 9, 0, 0]])
    tin = np.array([[1, 10, 11, 0], [1, 12, 0, 0]])
    tout = np.array([[10, 11, 2, 0], [12, 2, 0, 0]])
    model = build()
    is_lm = isinstance(model, models.AttentiveLanguageModel)
    x = tin if is_lm else [src, tin]
    outputs = model(x)
    mask = keras.src.backend.get_keras_mask(outputs)
    assert mask is not None
    np.testing.assert_array_equal(to_numpy(mask), tin != 0)
    if getattr(model, "copy", False):
        return  # probabilities, for PointerGeneratorLoss (tests/test_pointer_generator.py)
    kernel, bias = model.output_layer.get_weights()
    bias[0] = -50.0  # padding as a label would cost ~50 a step
    model.output_layer.set_weights([kernel, bias])
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    got = model.evaluate(x, tout, verbose=0)
    expected = _masked_reference(to_numpy(model(x)), tout, tin != 0)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert got < 10
