"""Contracts every registered member of every registry keeps (scores, normalizers,
mechanisms, samplers).

The cases are generated from `REGISTRY.names()` when the tests are collected, so a
newly registered member is covered without editing a list here; a required
constructor argument takes its minimal value from `MINIMAL_BY_ARGUMENT` (`units`,
`k`, `p`), and one of another name must be added to `MINIMAL_ARGUMENTS` (a test
fails until it is), and a mechanism whose alignments are not normalised must say
why in `SUM_AT_MOST_ONE`.
"""

import inspect
import json
import re

import keras
import numpy as np
import pytest
from fake_models import TableModel, V, cycle_table, random_table
from helpers import to_numpy

from keras_attn_rnn import AttentionDecoder, masking, mechanisms, normalizers, samplers, scores
from keras_attn_rnn.generation import generate

pytestmark = pytest.mark.layers

MODULES = {
    "score": scores,
    "normalizer": normalizers,
    "mechanism": mechanisms,
    "sampler": samplers,
}
REGISTRIES = {kind: module.REGISTRY for kind, module in MODULES.items()}

# The smallest value of a required constructor argument, by its name: `k` and `p` small
# enough that the cut changes which tokens are drawn (a lost value shows).
MINIMAL_BY_ARGUMENT = {"units": 4, "k": 2, "p": 0.5}
# The smallest constructor arguments of a member whose required ones are not all above.
MINIMAL_ARGUMENTS = {"score": {}, "mechanism": {}, "sampler": {}}

# Mechanisms whose alignments are not renormalised over the memory: they sum to at most 1.
SUM_AT_MOST_ONE = {
    "monotonic": "the probability of stopping at each position (the rest runs off the end)",
    "local_p": "content weights times a Gaussian around the predicted position",
    "gmm": "a mixture of Gaussians' mass on each position (the rest lies outside the memory)",
}

# Known library defects, each an xfail(strict=True): fixing one makes its case XPASS (fail).
# (The built-in normalizer functions were not registered Keras objects, so a normalizer given
# as a function did not survive its config: fixed by registering them.)
KNOWN_DEFECTS = {}

B, T, S, D_IN, D_M, UNITS = 2, 3, 5, 4, 6, 8
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
UNKNOWN = "no_such_member"


def cases(*kinds, contract=None):
    """One pytest param per registered member of `kinds` (xfail where a defect is known)."""
    params = []
    for kind in kinds:
        for name in REGISTRIES[kind].names():
            marks = []
            if (contract, name) in KNOWN_DEFECTS:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_DEFECTS[contract, name]))
            params.append(pytest.param(kind, name, id=f"{kind}-{name}", marks=marks))
    return params


def required_arguments(registry, name):
    """Constructor parameters without a default (none for functions: they are called)."""
    if registry.base is None:
        return ()
    parameters = inspect.signature(registry.class_for(name).__init__).parameters.values()
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return tuple(
        p.name
        for p in parameters
        if p.name != "self" and p.kind not in variadic and p.default is inspect.Parameter.empty
    )


def minimal_arguments(kind, name):
    """`MINIMAL_BY_ARGUMENT` for the required arguments it names, updated with
    `MINIMAL_ARGUMENTS[kind][name]`; fails the test if a required argument is missing."""
    required = required_arguments(REGISTRIES[kind], name)
    given = {key: MINIMAL_BY_ARGUMENT[key] for key in required if key in MINIMAL_BY_ARGUMENT}
    given.update(MINIMAL_ARGUMENTS.get(kind, {}).get(name, {}))
    missing = sorted(set(required_arguments(REGISTRIES[kind], name)) - set(given))
    if missing:
        cls = REGISTRIES[kind].class_for(name)
        pytest.fail(
            f"{kind} {name!r} ({cls.__module__}.{cls.__name__}) has required constructor "
            f"arguments {missing} without a value in tests/test_registry_contract.py: add "
            f"MINIMAL_ARGUMENTS[{kind!r}][{name!r}] = {{{', '.join(f'{m!r}: ...' for m in missing)}}}"
        )
    return dict(given)


def build(kind, name):
    return REGISTRIES[kind].get(name, **minimal_arguments(kind, name))


def rng(seed=0):
    return np.random.default_rng(seed)


# -- every registry ------------------------------------------------------------------------


@pytest.mark.parametrize("kind, name", cases("score", "mechanism", "sampler"))
def test_required_constructor_arguments_have_minimal_values(kind, name):
    given = minimal_arguments(kind, name)
    unknown = sorted(set(given) - set(REGISTRIES[kind].arguments(name)))
    assert not unknown, f"MINIMAL_ARGUMENTS[{kind!r}][{name!r}] names non-arguments {unknown}"


@pytest.mark.parametrize("kind", sorted(MINIMAL_ARGUMENTS))
def test_the_minimal_arguments_table_names_registered_members_only(kind):
    stale = sorted(set(MINIMAL_ARGUMENTS[kind]) - set(REGISTRIES[kind].names()))
    assert not stale, f"MINIMAL_ARGUMENTS[{kind!r}] names unregistered members {stale}"
    stale = sorted(set(SUM_AT_MOST_ONE) - set(mechanisms.REGISTRY.names()))
    assert not stale, f"SUM_AT_MOST_ONE names unregistered mechanisms {stale}"


@pytest.mark.parametrize("kind, name", cases(*REGISTRIES))
def test_get_by_name_gives_a_member_known_by_that_name(kind, name):
    registry = REGISTRIES[kind]
    member = build(kind, name)
    assert registry.is_instance(member)
    if registry.base is None:
        assert member is registry.class_for(name)
    else:
        assert type(member) is registry.class_for(name)
    assert registry.name_of(member) == name
    assert registry.name_of(type(member)) == name or registry.base is None
    assert registry.name_of(name) == name
    assert registry.get(member) is member  # an instance passes through
    # the module's own `get` agrees with the registry's
    module_get = MODULES[kind].get
    by_module = (
        module_get(name)
        if kind == "normalizer"
        else module_get(name, **minimal_arguments(kind, name))
    )
    assert registry.name_of(by_module) == name


@pytest.mark.parametrize("kind, name", cases("score", "mechanism", "sampler"))
def test_serialize_then_get_or_deserialize_round_trips_the_config(kind, name):
    registry = REGISTRIES[kind]
    member = build(kind, name)
    config = json.loads(json.dumps(registry.serialize(member)))
    assert isinstance(config, dict) and "build_config" not in config
    assert registry.name_of(config) == name
    for restored in (registry.get(config), registry.deserialize(config)):
        assert type(restored) is type(member)
        assert registry.name_of(restored) == name
        assert registry.serialize(restored) == config
        assert restored.get_config() == member.get_config()


@pytest.mark.parametrize("kind, name", cases("score", "mechanism"))
def test_a_built_member_serializes_without_its_build_config(kind, name):
    """The owner builds its parts: a config carrying shapes would build them twice."""
    if kind == "score":
        member = build(kind, name)
        member.build_for((None, T, D_IN), (None, S, D_IN))
    else:
        (member,) = decoder_for(name).mechanisms
    assert member.built and "build_config" in keras.saving.serialize_keras_object(member)
    config = REGISTRIES[kind].serialize(member)
    assert "build_config" not in config
    assert REGISTRIES[kind].get(config).get_config() == member.get_config()


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_an_unknown_name_raises_a_value_error_naming_the_argument(kind):
    registry = REGISTRIES[kind]
    for get, argument in (
        (lambda: MODULES[kind].get(UNKNOWN), registry.argument),
        (lambda: registry.get(UNKNOWN), registry.argument),
        (lambda: registry.get(UNKNOWN, argument="chosen"), "chosen"),
        (lambda: registry.class_for(UNKNOWN), registry.argument),
    ):
        with pytest.raises(ValueError) as error:
            get()
        message = str(error.value)
        assert message.startswith(f"{argument} must be one of "), message
        assert message.endswith(f"Received: {argument}={UNKNOWN!r}"), message
        for name in registry.names():
            assert repr(name) in message, message
    assert registry.name_of(UNKNOWN) is None


# -- scores ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, name", cases("score"))
def test_a_score_steps_as_it_scores(kind, name):
    layer = build(kind, name)
    query = keras.ops.convert_to_tensor(rng(1).normal(size=(B, T, D_IN)).astype("float32"))
    keys = keras.ops.convert_to_tensor(rng(2).normal(size=(B, S, D_IN)).astype("float32"))
    layer.build_for((None, T, D_IN), (None, S, D_IN))
    full = to_numpy(layer.score(query, keys))
    assert full.shape == (B, T, S) and np.all(np.isfinite(full))
    step = to_numpy(layer.score_step(query[:, 1], layer.prepare_keys(keys)))
    np.testing.assert_allclose(step, full[:, 1], atol=1e-5)


# -- normalizers -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind, name", cases("normalizer"))
def test_a_normalizer_name_round_trips(kind, name):
    assert normalizers.serialize(name) == name
    assert normalizers.get(json.loads(json.dumps(normalizers.serialize(name)))) is (
        normalizers.REGISTRY.class_for(name)
    )
    assert normalizers.REGISTRY.name_of(normalizers.get(name)) == name


@pytest.mark.parametrize(
    "kind, name", cases("normalizer", contract="normalizer_function_round_trip")
)
def test_a_normalizer_function_round_trips(kind, name):
    function = normalizers.get(name)
    config = json.loads(json.dumps(normalizers.serialize(function)))
    assert normalizers.get(config) is function
    assert normalizers.REGISTRY.deserialize(config) is function


@pytest.mark.parametrize("kind, name", cases("normalizer"))
def test_normalized_weights_are_a_distribution_with_exact_zeros_where_masked(kind, name):
    normalizer = normalizers.get(name)
    scores_ = rng(3).normal(scale=2.0, size=(B, T, S)).astype("float32")
    mask = np.broadcast_to(MASK[:, None, :], scores_.shape).copy()
    mask[1, 2] = False  # a row with every key masked

    plain = to_numpy(normalizer(keras.ops.convert_to_tensor(scores_), axis=-1))
    assert plain.shape == scores_.shape and np.all(plain >= 0)
    np.testing.assert_allclose(plain.sum(-1), 1.0, atol=1e-5)
    # the axis argument: the same weights along axis 1
    moved = to_numpy(normalizer(keras.ops.convert_to_tensor(np.moveaxis(scores_, -1, 1)), axis=1))
    np.testing.assert_allclose(np.moveaxis(moved, 1, -1), plain, atol=1e-6)

    masked = to_numpy(masking.masked_softmax(scores_, mask, normalizer=normalizer))
    assert np.all(masked >= 0) and np.all(masked[~mask] == 0.0)
    rows = mask.any(-1)
    np.testing.assert_allclose(masked.sum(-1)[rows], 1.0, atol=1e-5)
    assert np.all(masked[~rows] == 0.0)

    # -inf scores (rows with at least one finite score) get exactly 0 from the normalizer itself
    infinite = np.where(mask, scores_, -np.inf)[rows].astype("float32")
    weights = to_numpy(normalizer(keras.ops.convert_to_tensor(infinite), axis=-1))
    assert np.all(weights[~mask[rows]] == 0.0) and np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


# -- mechanisms ------------------------------------------------------------------------------


def decoder_inputs(seed=5):
    r = rng(seed)
    return (
        r.normal(size=(B, T, D_IN)).astype("float32"),
        r.normal(size=(B, S, D_M)).astype("float32"),
    )


def randomize(layer, seed=1, scale=0.5):
    r = rng(seed)
    for weight in layer.weights:
        weight.assign(r.normal(0.0, scale, weight.shape).astype(weight.dtype))


def decoder_for(name):
    decoder = AttentionDecoder(keras.layers.LSTMCell(UNITS), attention=build("mechanism", name))
    decoder.build([(None, None, D_IN), (None, None, D_M)])
    randomize(decoder)
    return decoder


@pytest.mark.parametrize("kind, name", cases("mechanism"))
def test_alignments_are_zero_on_padding_and_a_distribution_elsewhere(kind, name):
    x, memory = decoder_inputs()
    _, alignments = decoder_for(name)([x, memory], mask=[None, MASK], return_attention_scores=True)
    alignments = to_numpy(alignments)
    assert alignments.shape == (B, T, S) and alignments.dtype == np.float32
    padding = ~np.broadcast_to(MASK[:, None, :], alignments.shape)
    assert np.all(alignments[padding] == 0.0)
    assert np.all(alignments >= 0)
    totals = alignments.sum(-1)
    if name in SUM_AT_MOST_ONE:
        assert np.all(totals <= 1 + 1e-5), (SUM_AT_MOST_ONE[name], totals)
        assert np.any(totals > 1e-3), totals  # it does attend
    else:
        np.testing.assert_allclose(
            totals,
            1.0,
            atol=1e-5,
            err_msg=f"{name!r} alignments must sum to 1; if they need not, say why in "
            "SUM_AT_MOST_ONE",
        )


@pytest.mark.parametrize("kind, name", cases("mechanism"))
def test_a_keras_file_reloads_with_the_same_outputs(kind, name, tmp_path):
    x_in, m_in = keras.Input((None, D_IN)), keras.Input((None, D_M))
    mask_in = keras.Input((None,), dtype="bool")
    decoder = AttentionDecoder(keras.layers.LSTMCell(UNITS), attention=build("mechanism", name))
    outputs = decoder([x_in, m_in], mask=[None, mask_in], return_attention_scores=True)
    model = keras.Model([x_in, m_in, mask_in], list(outputs))
    randomize(model)
    x, memory = decoder_inputs()
    expected = to_numpy(model([x, memory, MASK]))
    path = tmp_path / f"{name}.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    (reloaded_decoder,) = [layer for layer in loaded.layers if isinstance(layer, AttentionDecoder)]
    assert type(reloaded_decoder.mechanisms[0]) is mechanisms.REGISTRY.class_for(name)
    for got, want in zip(to_numpy(loaded([x, memory, MASK])), expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("kind, name", cases("mechanism"))
def test_nan_in_padded_memory_changes_nothing(kind, name):
    x, memory = decoder_inputs()
    poisoned = memory.copy()
    poisoned[~MASK] = np.nan
    decoder = decoder_for(name)
    clean = to_numpy(decoder([x, memory], mask=[None, MASK], return_attention_scores=True))
    dirty = to_numpy(decoder([x, poisoned], mask=[None, MASK], return_attention_scores=True))
    for got, want in zip(dirty, clean, strict=True):
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("kind, name", cases("mechanism"))
def test_the_step_api_reproduces_the_full_call(kind, name):
    x, memory = decoder_inputs()
    decoder = decoder_for(name)
    outputs, alignments = decoder([x, memory], mask=[None, MASK], return_attention_scores=True)
    state = decoder.get_initial_state(memory, MASK)
    step_outputs, step_alignments = [], []
    for t in range(T):
        output, state, weights = decoder.step(x[:, t], state)
        step_outputs.append(to_numpy(output))
        step_alignments.append(to_numpy(weights))
    np.testing.assert_allclose(np.stack(step_outputs, 1), to_numpy(outputs), atol=1e-5)
    np.testing.assert_allclose(np.stack(step_alignments, 1), to_numpy(alignments), atol=1e-5)


def positive_int_arguments(name):
    """The arguments of mechanism `name` that must be positive integers: those its
    constructor checks with `check_positive_int`, those with a positive int default (a
    seed aside) and `units` (checked by the constructor or the additive score it builds)."""
    cls = mechanisms.REGISTRY.class_for(name)
    checked = set(re.findall(r'check_positive_int\(\s*"(\w+)"', inspect.getsource(cls.__init__)))
    parameters = inspect.signature(cls.__init__).parameters.values()
    counts = {
        p.name
        for p in parameters
        if type(p.default) is int and p.default > 0 and "seed" not in p.name
    }
    return sorted((checked | counts | {"units"}) & set(mechanisms.REGISTRY.arguments(name)))


HOSTILE = [
    pytest.param(name, argument, id=f"{name}-{argument}")
    for name in mechanisms.REGISTRY.names()
    for argument in positive_int_arguments(name)
]


@pytest.mark.parametrize("name, argument", HOSTILE)
def test_a_non_positive_count_is_refused_by_the_constructor(name, argument):
    arguments = minimal_arguments("mechanism", name)
    if argument == "units" and "score" in mechanisms.REGISTRY.arguments(name):
        arguments["score"] = "additive"  # the score that takes units
    cls = mechanisms.REGISTRY.class_for(name)
    cls(**{**arguments, argument: 1})  # the smallest count is accepted
    for value in (0, -2):
        with pytest.raises(ValueError) as error:
            mechanisms.get(name, **{**arguments, argument: value})
        message = str(error.value)
        assert re.search(rf"\b{argument}\b", message.split("Received:")[0]), message
        assert re.search(rf"Received: (.*, )?{argument}={value}$", message), message


# -- samplers --------------------------------------------------------------------------------

PROMPTS = [[3], [5, 6]]
LENGTH = 3


def decode(name, table, seed=11, eos_id=None, sampler=None):
    """`generate` on a fresh `TableModel` (a new model: nothing compiled before is reused)."""
    sampler = build("sampler", name) if sampler is None else sampler
    return generate(TableModel(table), PROMPTS, LENGTH, sampler=sampler, eos_id=eos_id, seed=seed)


def assert_no_padding_before_eos(tokens, eos_id=None):
    for row in tokens:
        ends = np.flatnonzero(row == eos_id) if eos_id is not None else []
        stop = ends[0] + 1 if len(ends) else len(row)
        assert np.all(row[:stop] != 0) and np.all(row[:stop] < V), tokens
        assert np.all(row[stop:] == 0), tokens


@pytest.mark.parametrize("kind, name", cases("sampler"))
def test_a_sampler_generates_tokens_without_padding_before_eos(kind, name):
    result = decode(name, random_table(4, scale=0.5))
    assert result.tokens.shape == (B, LENGTH), result.tokens.shape
    assert np.issubdtype(result.tokens.dtype, np.integer)
    assert_no_padding_before_eos(result.tokens)
    # a certain model (one-hot logits x 1e9): every strategy writes its one sequence, EOS kept
    certain = decode(name, cycle_table(), eos_id=5)
    np.testing.assert_array_equal(certain.tokens, [[4, 5, 0], [7, 1, 2]])
    assert_no_padding_before_eos(certain.tokens, eos_id=5)


@pytest.mark.parametrize("kind, name", cases("sampler"))
def test_the_same_seed_gives_the_same_tokens(kind, name):
    table = random_table(6, scale=0.5)
    first = decode(name, table, seed=11)
    np.testing.assert_array_equal(decode(name, table, seed=11).tokens, first.tokens)


@pytest.mark.parametrize("kind, name", cases("sampler"))
def test_a_sampler_config_holds_every_constructor_argument(kind, name):
    """`Sampler.get_config` must return the constructor arguments (the base class's rule)."""
    sampler = build(kind, name)
    config = samplers.serialize(sampler)["config"]
    assert set(config) == set(samplers.arguments(name)), (config, samplers.arguments(name))
    for key, value in minimal_arguments(kind, name).items():
        assert config[key] == value, (key, config[key], value)


@pytest.mark.parametrize("kind, name", cases("sampler"))
def test_a_sampler_config_decodes_as_the_sampler(kind, name):
    table = random_table(7, scale=0.5)
    sampler = build("sampler", name)
    expected = decode(name, table, seed=5, sampler=sampler).tokens
    config = json.loads(json.dumps(samplers.serialize(sampler)))
    for restored in (samplers.get(config), samplers.deserialize(config), config):
        tokens = decode(name, table, seed=5, sampler=restored).tokens
        np.testing.assert_array_equal(tokens, expected)


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_a_registry_refuses_a_member_of_another_kind(kind):
    registry = REGISTRIES[kind]
    with pytest.raises(ValueError, match=rf"a {registry.argument} must be .*Received: odd="):
        registry.register("odd", "not a member")
    if registry.base is not None:
        with pytest.raises(ValueError, match=f"subclass of {registry.base.__name__}"):
            registry.register("odd", dict)
    assert "odd" not in registry.names()
