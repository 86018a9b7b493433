"""One tokenizer on both sides: hostile text encodes alike in the runner and the served text model.

For every task kind's tokenizer (characters: reverse, dates, lm; padded
and reversed characters: addition; whitespace: needle; a regex, lower-cased
or not: textcls) the runner's encoding (`Task.tokenizer`, which the task
builders make their ids with) is compared with the served text model's: its
codec built from the run's text card exactly as `TextModel.load_context`
builds it, and (slow) the logged pyfunc itself. Inputs are hostile: unicode
(combining marks, emoji, right-to-left text, NUL and control characters),
unknown characters, empty strings and words, whitespace alone, 100k
characters.
"""

from __future__ import annotations

import ast
import json
import sys
import tempfile
import types
from pathlib import Path

import keras
import mlflow
import numpy as np
import pytest
from experiments_helpers import migrated_store

from experiments.config import validate
from experiments.data.split import pad
from experiments.data.vocab import PAD, UNK
from experiments.tasks import build_task
from experiments.tracking import model_logging, text_model
from keras_attn_rnn import tokenizers
from keras_attn_rnn.tokenizers import SPECIALS
from keras_attn_rnn.tokenizers import VocabularyTokenizer as Tokenizer

ROOT = Path(__file__).resolve().parents[1]
LONG = 100_000

HOSTILE = [
    "",
    " ",
    "\t\n \r\x0b\x0c",  # whitespace alone
    "\u3000\u2028\x85",  # unicode whitespace
    "\x1c\x1d\x1e\x1f",  # separators `str.split` treats as whitespace
    "a\u0301 e\u0301\u0302 n\u0303",  # combining marks
    "\u0301",  # a combining mark alone
    "\U0001f469\u200d\U0001f469\u200d\U0001f467 \U0001f1eb\U0001f1f7 \U0001f600!",  # emoji
    "\u05e9\u05dc\u05d5\u05dd, \u05e2\u05d5\u05dc\u05dd! \u0645\u0631\u062d\u0628\u0627",  # RTL
    "\u202eabc\u202c \u200f12+3\u200e",  # direction marks and overrides
    "\x00",
    "a\x00b \x00 \x00c",  # NUL
    "\x01\x02\x07\x08\x1b[31m\x7f\x9f",  # control characters
    "\ufeff\u200b\u2060",  # zero-width characters (not whitespace)
    "\ud800 \udfff",  # lone surrogates
    "\u0130stanbul STRASSE \u00df \u01c5 \u1e9e",  # lower() changes lengths
    "a  b   c",  # empty words
    " a b ",
    "~~~ \u00a7\u00b6 \u2603 \U00010348",  # unknown characters
    "535+61",
    "1234567+89",
    "+",
    "abcdef fedcba",
    "N0 w1  w2 N1",
    "It was GREAT, really! It's fine; awful?",
    "12 March 2001",
    "x" * LONG,
    ("word " * (LONG // 5))[:LONG],
    "\u00e9\u0301" * (LONG // 2),
]

# One tiny task per tokenizer; `textcls*` read `hostile.jsonl` (written by the fixture).
TASKS = {
    "reverse": {"name": "reverse", "num_examples": 64, "max_length": 6},
    "dates": {"name": "dates", "num_examples": 64},
    "addition": {"name": "addition", "num_examples": 64, "digits": 2},
    "addition_forward": {
        "name": "addition",
        "num_examples": 64,
        "digits": 2,
        "reverse_input": False,
    },
    "lm": {"name": "lm", "max_chars": 2000, "seq_length": 16},
    "needle": {"name": "needle", "num_examples": 64, "max_length": 12},
    "textcls": {"name": "textcls", "max_length": 12},
    "textcls_cased": {"name": "textcls", "max_length": 5, "lowercase": False},
}

# `input` of the text card as format-1 cards wrote it (the runner's `text_tokenizer` config,
# with the vocabulary as `tokens`): the keys the builders set in `Task.tokenizer`.
OLD_RULES = {
    "reverse": {"split": "chars"},
    "dates": {"split": "chars"},
    "lm": {"split": "chars"},
    "addition": {"split": "chars", "pad_to": 5, "reverse": True},
    "addition_forward": {"split": "chars", "pad_to": 5, "reverse": False},
    "needle": {"split": "whitespace"},
    "textcls": {
        "split": "regex",
        "pattern": r"\w+|[^\w\s]",
        "lowercase": True,
        "sequence_length": 12,
        "empty_as_unknown": True,
    },
    "textcls_cased": {
        "split": "regex",
        "pattern": r"\w+|[^\w\s]",
        "lowercase": False,
        "sequence_length": 5,
        "empty_as_unknown": True,
    },
}


def _dataset_texts() -> list[str]:
    """The textcls rows: the hostile texts (short ones), and words it learns a vocabulary of."""
    words = [f"it was {w} really {i} !" for i, w in enumerate(["great", "fine", "awful", "dull"])]
    return [t for t in HOSTILE if len(t) < 1000] + words + ["It was GREAT, really!"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """name -> (task, config) of every entry of `TASKS`."""
    folder = tmp_path_factory.mktemp("hostile")
    path = folder / "hostile.jsonl"
    rows = [{"text": text, "label": f"c{i % 2}"} for i, text in enumerate(_dataset_texts())]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    out = {}
    for name, spec in TASKS.items():
        spec = {**spec, "num_probes": 2}
        if spec["name"] == "textcls":
            spec["path"] = str(path)
        cfg = validate({"task": spec, "generate": {"max_length": 4}})
        out[name] = (build_task(cfg.task), cfg)
    return out


def _served_codec(task, cfg, folder: Path) -> text_model.TextCodec:
    """The codec of the text model, made as serving makes it: the card written as
    `model_logging.log_models` writes it, read back by `TextModel.load_context`."""
    card_file = folder / "card.json"
    card_file.write_text(json.dumps(task.kind.text_card(task, cfg), indent=1), encoding="utf-8")
    context = types.SimpleNamespace(artifacts={"card": str(card_file), "model": "unused"})
    served = text_model.TextModel()
    with pytest.MonkeyPatch.context() as patch:  # the card alone: no trained model needed
        patch.setattr(keras.saving, "load_model", lambda path, safe_mode: None)
        served.load_context(context)
    return served.codec


def _config(tokenizer) -> dict:
    """A tokenizer's config, without the layer name Keras numbers."""
    return {k: v for k, v in tokenizer.get_config().items() if k != "name"}


def _ids(row) -> list[int]:
    """A row of the task's inputs without its padding."""
    return [int(i) for i in row if int(i) != PAD]


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_served_codec_encodes_hostile_text_as_the_runner(built, name, tmp_path):
    task, cfg = built[name]
    served = _served_codec(task, cfg, tmp_path)
    # one tokenizer, its config through the card
    assert _config(served.input) == _config(task.tokenizer)
    for text in HOSTILE:
        ids = task.tokenizer.encode(text)[: task.max_input_tokens]  # what the model is fed
        assert served.encode(text) == ids, (name, text[:40])
        assert served.input_labels(ids) == [task.vocab.tokens[i] for i in ids]
    words = LONG if task.tokenizer.split == "chars" else LONG // 2
    assert len(served.encode("x " * (LONG // 2))) == min(words, task.max_input_tokens or words)
    if task.tokenizer.pad_to is None:  # else "" is a question of spaces
        assert served.encode("") == ([UNK] if task.tokenizer.empty_as_unknown else [])


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_runners_inputs_are_what_the_served_model_makes_of_their_text(built, name, tmp_path):
    task, cfg = built[name]
    served = _served_codec(task, cfg, tmp_path)
    # a stored training split (textcls) pads each batch to its own longest row
    parts = [s.take(slice(None)).x if hasattr(s, "store") else s.x for s in task.splits().values()]
    parts = parts[:3]  # train, val, test
    width = max(p.shape[1] for p in parts)
    rows = np.concatenate([np.pad(p, ((0, 0), (0, width - p.shape[1]))) for p in parts])
    checked = 0
    for row in rows:
        ids = _ids(row)
        if UNK in ids:  # `<unk>` decodes to nothing: its text is not known
            continue
        text = task.tokenizer.decode(row)  # the example texts of the card
        assert served.encode(text) == ids, (name, text)
        checked += 1
    assert checked >= len(rows) // 2, (name, checked)
    if task.name == "textcls":  # its rows are the hostile texts themselves, shuffled
        expected = pad([served.encode(t) for t in _dataset_texts()], rows.shape[1])
        assert sorted(map(tuple, expected.tolist())) == sorted(map(tuple, rows.tolist()))


@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_card_written_by_an_earlier_version_loads_and_encodes_alike(built, name):
    task, cfg = built[name]
    card = json.loads(json.dumps(task.kind.text_card(task, cfg)))
    card["input"] = {**task.vocab.to_dict(), **OLD_RULES[name]}
    old = text_model.TextCodec(card)
    assert old.input.vocabulary == task.tokenizer.vocabulary  # the rules: by their ids below
    for text in HOSTILE:
        fed = task.tokenizer.encode(text)[: task.max_input_tokens]
        assert old.encode(text) == fed, (name, text[:40])


def test_the_tokenizer_config_round_trips_through_json():
    tokenizer = Tokenizer(
        [*SPECIALS, "a", "\x00", "\U0001f600"],
        joiner=" ",
        split="regex",
        pattern=r"\w+|[^\w\s]",
        lowercase=True,
        pad_to=7,
        reverse=True,
        sequence_length=3,
        empty_as_unknown=True,
    )
    config = json.loads(json.dumps(tokenizers.serialize(tokenizer)))
    again = keras.saving.deserialize_keras_object(config, safe_mode=True)
    assert again.get_config() == tokenizer.get_config()
    for text in HOSTILE:
        assert again.encode(text) == tokenizer.encode(text)


def test_the_tokenizer_refuses_bad_arguments():
    cases = [
        ({"split": "words"}, "split must be one of 'chars', 'whitespace', 'regex'"),
        ({"split": "regex"}, "pattern must be given with split='regex'"),
        ({"pattern": "a"}, "pattern must be given with split='regex'"),
        ({"split": "regex", "pattern": "("}, "pattern must be a regular expression"),
        ({"pad_to": 0}, "Received: pad_to=0"),
        ({"sequence_length": True}, "Received: sequence_length=True"),
        ({"vocabulary": ["a", 3]}, r"vocabulary must hold strings. Received: vocabulary\[1\]=3"),
    ]
    for arguments, message in cases:
        with pytest.raises(ValueError, match=message):
            Tokenizer(**arguments)


def _imports(path: Path) -> set[str]:
    """The top-level names of the modules `path` imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_text_model_imports_no_runner_and_ships_what_it_imports():
    imported = _imports(ROOT / "experiments" / "tracking" / "text_model.py")
    assert "experiments" not in imported
    shipped = {path.stem for path in model_logging.CODE_PATHS}
    assert shipped == {"keras_attn_rnn"}
    requirements = {"keras", "mlflow", "numpy", "pandas"}  # pinned by `log_text_model`
    assert imported - set(sys.stdlib_module_names) - requirements == shipped
    # the tokenizers the card configures are the library's, shipped with it
    assert "keras_attn_rnn" in _imports(ROOT / "experiments" / "tracking" / "text_model.py")


@pytest.mark.slow
def test_the_logged_text_model_encodes_hostile_text_as_the_runner(built, tmp_path):
    """The pyfunc, loaded from the store: its own copy of the tokenizer, the runner's ids."""
    mlflow.set_tracking_uri(migrated_store(tmp_path))
    mlflow.set_experiment("tests")
    texts = [t for t in HOSTILE if t]  # the text model refuses empty strings
    for name in ("needle", "textcls", "addition", "lm"):  # every kind and split rule
        task, cfg = built[name]
        model = task.kind.build_model(cfg, task)
        model(task.train.take(slice(0, 2)).inputs)  # built, untrained: any weights will do
        card = task.kind.text_card(task, cfg)
        with tempfile.TemporaryDirectory() as tmp, mlflow.start_run():
            keras_file, card_file = Path(tmp) / "model.keras", Path(tmp) / "card.json"
            model.save(keras_file)
            card_file.write_text(json.dumps(card), encoding="utf-8")
            path = list(sys.path)
            try:
                uri = model_logging.log_text_model(keras_file, card_file, card)
                local = Path(mlflow.artifacts.download_artifacts(uri, dst_path=str(tmp_path)))
                loaded = mlflow.pyfunc.load_model(uri)
                # running the model over 100k tokens is not what this checks: a cut there
                # (nor is sending more than a request may hold: the text model's bound)
                cut = text_model.MAX_INPUT_CHARS if task.tokenizer.sequence_length else 300
                sent = [t[:cut] for t in texts]
                records = loaded.predict(sent)
            finally:
                sys.path[:] = path  # the model's code_paths
        shipped = local / "code" / "keras_attn_rnn" / "tokenizers" / "vocabulary_tokenizer.py"
        library = model_logging.LIBRARY_FOLDER / "tokenizers" / "vocabulary_tokenizer.py"
        assert shipped.read_bytes() == library.read_bytes()
        limit = card.get("max_input_tokens")  # where the runner cut inputs in training
        for text, record in zip(sent, records, strict=True):
            ids = task.tokenizer.encode(text)
            labels = [task.vocab.tokens[i] for i in ids[:limit]]
            got = record["tokens"] if "label" in record else record["attended_tokens"]
            assert got[: len(labels)] == labels, (name, text[:40])
            if "label" in record:
                assert len(got) == len(labels)
            if limit is not None:  # the served record says whether it was cut
                assert record["truncated"] == (len(ids) > limit), (name, text[:40])
