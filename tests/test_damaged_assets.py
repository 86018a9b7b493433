"""A damaged asset says which one it is (issue 49, item 4): a `.keras` file whose
SentencePiece model was cut short, a served model's text card cut short or whose
tokenizer's model is corrupted. Each is a short `ValueError` naming the asset, in the
"Received:" style, never a dump of the base64 model."""

from __future__ import annotations

import json
import types
import zipfile

import keras
import pytest

from experiments.tracking import text_model
from keras_attn_rnn import models, preprocessors, tokenizers

TEXTS = ["the cat sat on the mat", "a dog ran on a log", "le chat est sur le tapis"] * 10


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tiny `Seq2Seq` with a SentencePiece preprocessor, saved; and its tokenizer."""
    tokenizer = tokenizers.SentencePieceTokenizer(vocabulary_size=60, name="pieces")
    tokenizer.adapt(TEXTS)
    preprocessor = preprocessors.Seq2SeqPreprocessor(tokenizer, target_length=6)
    model = models.Seq2Seq(units=4, embedding_dim=4, preprocessor=preprocessor)
    model(preprocessor(TEXTS[:2], TEXTS[:2])[0])
    path = tmp_path_factory.mktemp("saved") / "model.keras"
    model.save(path)
    return path, tokenizer


def _with_config(source, target, change):
    """A copy of the `.keras` file `source` at `target` with `change(config)` applied to
    its config.json."""
    with zipfile.ZipFile(source) as z:
        files = {name: z.read(name) for name in z.namelist()}
    config = json.loads(files["config.json"])
    change(config)
    files["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(target, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return target


def _cut_proto(config):
    tokenizer = config["config"]["preprocessor"]["config"]["tokenizer"]["config"]
    tokenizer["proto"] = tokenizer["proto"][: len(tokenizer["proto"]) // 3]


def _check_short(message, *names):
    for name in names:
        assert name in message
    assert "Received:" in message
    assert len(message) < 400
    assert "AAAA" not in message  # no base64 model in it


def test_a_keras_file_with_a_damaged_sentencepiece_model_names_the_tokenizer(saved, tmp_path):
    source, _ = saved
    keras.saving.load_model(source)  # the undamaged file loads
    damaged = _with_config(source, tmp_path / "damaged.keras", _cut_proto)
    with pytest.raises(ValueError) as caught:
        keras.saving.load_model(damaged)
    _check_short(str(caught.value), "tokenizer 'pieces' is damaged")


def test_a_text_card_cut_short_names_card_json(saved, tmp_path):
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"input": {"a": "b" * 50}, "end_id": 2})[:30])
    context = types.SimpleNamespace(artifacts={"card": str(card), "model": str(saved[0])})
    with pytest.raises(ValueError) as caught:
        text_model.TextModel().load_context(context)
    _check_short(str(caught.value), "card.json is damaged", "cut short", str(card))
    card.write_text("[1, 2]")
    with pytest.raises(ValueError, match="card.json is damaged.*a JSON list, not an object"):
        text_model.read_card(card)
    card.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ValueError, match="card.json is damaged.*UnicodeDecodeError"):
        text_model.read_card(card)


def test_a_text_card_whose_tokenizer_is_corrupted_names_the_tokenizer(saved):
    _, tokenizer = saved
    entry = json.loads(json.dumps(tokenizers.serialize(tokenizer)))
    entry["config"]["proto"] = entry["config"]["proto"][:-7]
    with pytest.raises(ValueError) as caught:
        text_model.TextCodec({"input": entry})
    _check_short(str(caught.value), "tokenizer 'pieces' is damaged")
    codec = text_model.TextCodec({"input": tokenizers.serialize(tokenizer)})  # undamaged
    assert codec.input.encode("the cat") == tokenizer.encode("the cat")
