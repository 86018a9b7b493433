"""`Seq2Seq`'s decoder kinds are objects chosen once, by name, in its constructor
(`models/_seq2seq_decoders.KINDS`): no method branches on `decoder=`."""

import ast
import os

import pytest
from helpers import ROOT

from keras_attn_rnn.models import Seq2Seq, _seq2seq_decoders

MODELS = os.path.join(ROOT, "keras_attn_rnn", "models")


def branches_on_the_decoder(source):
    """`(line, text)` of each comparison in `source` that names a decoder kind or reads
    `.decoder` (`if self.decoder == "bahdanau":`, `decoder in ("luong",)`)."""
    names = set(_seq2seq_decoders.KINDS)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            parts = [
                part for operand in (node.left, *node.comparators) for part in ast.walk(operand)
            ]
            if any(_names_a_kind(part, names) or _reads_decoder(part) for part in parts):
                found.append((node.lineno, ast.unparse(node)))
    return found


def _names_a_kind(node, names):
    return isinstance(node, ast.Constant) and node.value in names


def _reads_decoder(node):
    return (isinstance(node, ast.Attribute) and node.attr == "decoder") or (
        isinstance(node, ast.Name) and node.id == "decoder"
    )


def test_no_model_method_branches_on_the_decoder_kind():
    offenders = []
    for name in sorted(os.listdir(MODELS)):
        if name.endswith(".py"):
            with open(os.path.join(MODELS, name), encoding="utf-8") as f:
                offenders += [
                    f"{name}:{line}: {text}" for line, text in branches_on_the_decoder(f.read())
                ]
    assert not offenders, "\n".join(offenders)


def test_the_rule_sees_a_branch():
    assert branches_on_the_decoder('if self.decoder == "bahdanau":\n    pass\n')
    assert branches_on_the_decoder('x = decoder in ("luong",)\n')
    assert not branches_on_the_decoder('KINDS = {"bahdanau": A}\nx = KINDS[decoder]\n')


@pytest.mark.parametrize("decoder", sorted(_seq2seq_decoders.KINDS))
def test_each_kind_owns_its_layers_under_their_old_attribute_names(decoder):
    model = Seq2Seq(11, 9, embedding_dim=6, units=8, decoder=decoder)
    owned = {
        "bahdanau": ["attention_decoder"],
        "luong": ["decoder_rnn", "cross_attention", "attention_layer"],
    }[decoder]
    assert list(model._decoding.layers) == owned
    for attribute in owned:
        assert getattr(model, attribute) is model._decoding.layers[attribute]
        assert any(layer is getattr(model, attribute) for layer in model.layers)
