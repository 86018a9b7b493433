"""One name per concept across the public API (issue 49): every parameter of every public
class and function is a name `docs/guides/api-conventions.md` lists, never one of its
banned or deprecated spellings; the old spellings the page lists are the ones the code
maps (with a DeprecationWarning), sizes come first and options are keyword-only in the
ready models, generators, preprocessors and tokenizers; the defaults the page states are
the code's. The tables are read from the page, so the page and the code cannot drift."""

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import keras_attn_rnn

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "api-conventions.md"
# the families whose constructors take sizes and parts by position, options by keyword;
# layers, mechanisms, scores and samplers follow Keras layers (`Dense(units)`,
# `Attention(use_scale)`): their options are positional-or-keyword
KEYWORD_ONLY_FAMILIES = ("models", "generators", "preprocessors", "tokenizers")
SIZES_POSITIONAL_FAMILIES = ("models", "generators")


def _section(marker):
    """The lines of the page after `<!-- marker: ... -->`, up to the next blank line
    after some content."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"<!-- {marker}:"))
    block = []
    for line in lines[start + 1 :]:
        if not line.strip():
            if block:
                break
            continue
        block.append(line)
    return block


def _names(cell):
    return re.findall(r"`([^`]+)`", cell)


def _table(marker):
    """The rows of the markdown table after `marker`, as lists of cells (header dropped)."""
    rows = [line.strip().strip("|").split("|") for line in _section(marker)]
    return [[cell.strip() for cell in row] for row in rows[2:]]


def concepts():
    """`{name: (deprecated aliases, banned spellings, positional kind)}` from the page."""
    table = {}
    for _, name, aliases, banned, kind in _table("concepts"):
        (name,) = _names(name)
        table[name] = (set(_names(aliases)), set(_names(banned)), kind)
    return table


def other_names():
    return {name for line in _section("other-names") for name in _names(line)}


def public_objects():
    """`{qualified name: object}`: the classes and functions of every public package's
    `__all__`, and the public ones defined in each top-level module without one."""
    found = {}
    packages = pkgutil.walk_packages(keras_attn_rnn.__path__, "keras_attn_rnn.")
    for info in [None, *packages]:
        name = "keras_attn_rnn" if info is None else info.name
        if any(part.startswith("_") for part in name.split(".")):
            continue
        module = importlib.import_module(name)
        names = getattr(module, "__all__", None)
        if names is None:
            if info is None or info.ispkg or name.count(".") > 1:
                continue  # a package's inner modules are public through its __all__
            names = [
                n
                for n, value in vars(module).items()
                if not n.startswith("_")
                and (inspect.isclass(value) or inspect.isfunction(value))
                and value.__module__ == name
            ]
        for n in names:
            value = getattr(module, n)
            if inspect.isclass(value) or inspect.isfunction(value):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def _parameters(value):
    function = value.__init__ if inspect.isclass(value) else value
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # a builtin's
        return []
    return [
        p
        for p in parameters
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _family(qualified):
    parts = qualified.split(".")
    return parts[1] if len(parts) > 2 else None


OBJECTS = public_objects()
CONSTRUCTORS = {q: v for q, v in OBJECTS.items() if inspect.isclass(v)}


def test_the_walk_reaches_every_family():
    families = {_family(q) for q in OBJECTS}
    assert {"models", "generators", "preprocessors", "tokenizers", "layers"} <= families
    assert {"mechanisms", "samplers", "scores", "copying", "generation"} <= families
    assert len(OBJECTS) > 60


def test_the_page_s_tables_are_read():
    table = concepts()
    assert table["vocabulary_size"][0] == {"vocab_size", "max_vocabulary"}
    assert "seq_len" in table["sequence_length"][1]
    assert table["num_classes"][2] == "size"
    assert "temperature" in other_names()


def test_no_spelling_is_listed_twice():
    table = concepts()
    spellings = [name for name in table]
    for aliases, banned, _ in table.values():
        spellings += [*aliases, *banned]
    assert len(spellings) == len(set(spellings)), "a spelling belongs to two concepts"
    assert not set(spellings) & other_names(), "a concept's spelling is also an other name"


def test_every_public_parameter_is_a_listed_name():
    table, others = concepts(), other_names()
    banned = {
        spelling: name
        for name, (aliases, never, _) in table.items()
        for spelling in aliases | never
    }
    problems = []
    for qualified, value in sorted(OBJECTS.items()):
        for p in _parameters(value):
            if p.name in banned:
                problems.append(f"{qualified}: `{p.name}` is spelled `{banned[p.name]}`")
            elif p.name not in table and p.name not in others:
                problems.append(
                    f"{qualified}: `{p.name}` is in neither table of api-conventions.md"
                )
    assert not problems, "\n".join(problems)


def test_the_deprecated_aliases_are_the_ones_the_code_maps():
    table = concepts()
    documented = {alias: name for name, (aliases, _, _) in table.items() for alias in aliases}
    mapped = {}
    for qualified, value in OBJECTS.items():
        for old, new in getattr(value, "renamed_arguments", {}).items():
            assert documented.get(old) == new, (
                f"{qualified} maps `{old}` to `{new}`; the page says {documented.get(old)!r}"
            )
            mapped[old] = new
    assert mapped == documented


@pytest.mark.parametrize(
    "qualified",
    sorted(q for q in CONSTRUCTORS if _family(q) in KEYWORD_ONLY_FAMILIES),
)
def test_sizes_and_parts_come_first_every_other_option_is_keyword_only(qualified):
    table = concepts()
    for p in _parameters(CONSTRUCTORS[qualified]):
        kind = table.get(p.name, (None, None, "option"))[2]
        required = p.default is inspect.Parameter.empty
        if p.kind == p.POSITIONAL_OR_KEYWORD and not required:
            assert kind in ("size", "part"), (
                f"{qualified}: the option `{p.name}` must be keyword-only (after `*`)"
            )
        if kind == "size" and _family(qualified) in SIZES_POSITIONAL_FAMILIES:
            assert p.kind == p.POSITIONAL_OR_KEYWORD, (
                f"{qualified}: the size `{p.name}` must be positional"
            )


def test_the_ready_models_defaults_are_the_page_s():
    from keras_attn_rnn import models

    for name, units, embedding_dim in _table("defaults"):
        (name,) = _names(name)
        parameters = inspect.signature(getattr(models, name)).parameters
        assert parameters["units"].default == int(units), name
        assert parameters["embedding_dim"].default == int(embedding_dim), name


def test_each_layer_s_default_score_is_the_page_s():
    from keras_attn_rnn import layers
    from keras_attn_rnn.models import attentive_classifier, attentive_language_model, seq2seq

    model_defaults = {
        "Seq2Seq": seq2seq._ATTENTION_DEFAULTS,
        "AttentiveClassifier": attentive_classifier._ATTENTION_DEFAULTS,
        "AttentiveLanguageModel": attentive_language_model._ATTENTION_DEFAULTS,
    }
    rows = _table("scores")
    for name, score, _ in rows:
        (name,), (score,) = _names(name), _names(score)
        if name in model_defaults:
            assert model_defaults[name]["score"] == score, name
        else:
            assert inspect.signature(getattr(layers, name)).parameters["score"].default == score
    assert {_names(row[0])[0] for row in rows} == {*model_defaults, *layers.__all__}
