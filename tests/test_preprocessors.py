"""The preprocessors: strings -> the arrays the ready models train on (start/end ids,
shifting, padding, truncation), configs through JSON, and their errors."""

import json

import keras
import numpy as np
import pytest

from keras_attn_rnn import preprocessors, tokenizers
from keras_attn_rnn.tokenizers import END, START

pytestmark = pytest.mark.layers


def words(*texts):
    tokenizer = tokenizers.WordTokenizer()
    tokenizer.adapt(texts or ["a b c d e", "c b a"])
    return tokenizer


def json_round_trip(layer):
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    return keras.saving.deserialize_keras_object(config)


def test_seq2seq_shifts_pads_and_cuts():
    tokenizer = words()
    a, b, c, d, e = (tokenizer.index[w] for w in "abcde")
    preprocessor = preprocessors.Seq2SeqPreprocessor(
        tokenizer, source_sequence_length=3, target_sequence_length=2
    )
    (source, target_in), target_out, weights = preprocessor(["a b c d", "e"], ["c b a", "d"], None)
    np.testing.assert_array_equal(source, [[a, b, c], [e, 0, 0]])
    np.testing.assert_array_equal(target_in, [[START, c, b], [START, d, 0]])
    np.testing.assert_array_equal(target_out, [[c, b, END], [d, END, 0]])
    assert weights is None and source.dtype == target_in.dtype == np.int32
    np.testing.assert_array_equal(preprocessor.last_truncated, [True, False])
    # sources alone, for generation
    np.testing.assert_array_equal(preprocessor.generate_preprocess("b a"), [[b, a]])
    assert preprocessor.generate_postprocess([[c, b, END, a], [d, 0, 0, 0]]) == ["c b", "d"]


def test_seq2seq_with_two_tokenizers_survives_json():
    source_tokenizer = words("a b c")
    target_tokenizer = tokenizers.CharTokenizer()
    target_tokenizer.adapt(["xyz"])
    preprocessor = preprocessors.Seq2SeqPreprocessor(source_tokenizer, target_tokenizer)
    clone = json_round_trip(preprocessor)
    assert clone.source_vocabulary_size == 7 and clone.target_vocabulary_size == 7
    assert not clone.shared and isinstance(clone.target_tokenizer, tokenizers.CharTokenizer)
    got, want = clone(["a c"], ["zy"]), preprocessor(["a c"], ["zy"])
    for g, w in zip(keras.tree.flatten(got[:2]), keras.tree.flatten(want[:2])):
        np.testing.assert_array_equal(g, w)
    shared = json_round_trip(preprocessors.Seq2SeqPreprocessor(source_tokenizer))
    assert shared.shared and shared.target_tokenizer is shared.tokenizer


def test_causal_lm_inputs_and_targets_are_shifted_by_one():
    tokenizer = words("a b c")
    a, b, c = (tokenizer.index[w] for w in "abc")
    preprocessor = preprocessors.CausalLMPreprocessor(tokenizer, sequence_length=3)
    x, y, _ = preprocessor(["a b c", "b"])
    np.testing.assert_array_equal(x, [[START, a, b], [START, b, 0]])
    np.testing.assert_array_equal(y, [[a, b, END], [b, END, 0]])
    np.testing.assert_array_equal(preprocessor.last_truncated, [True, False])
    np.testing.assert_array_equal(preprocessor.generate_preprocess(["a b"]), [[START, a, b]])
    assert json_round_trip(preprocessor).sequence_length == 3


def test_classifier_maps_labels_and_passes_integers():
    tokenizer = words("good film", "bad film")
    preprocessor = preprocessors.ClassifierPreprocessor(tokenizer, labels=["neg", "pos"])
    ids, labels, _ = preprocessor(["good film", "bad"], ["pos", "neg"])
    assert ids.shape == (2, 2) and labels.tolist() == [1, 0]
    plain = preprocessors.ClassifierPreprocessor(tokenizer, sequence_length=1)
    ids, labels, _ = plain(["good film"], [3])
    assert ids.shape == (1, 1) and labels.tolist() == [3]
    assert json_round_trip(preprocessor).labels == ["neg", "pos"]


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: preprocessors.Seq2SeqPreprocessor(words(), source_sequence_length=0),
            r"source_sequence_length must be a positive integer or None. Received: "
            r"source_sequence_length=0",
        ),
        (
            lambda: preprocessors.Seq2SeqPreprocessor("bpe"),
            r"tokenizer must be one of 'char', 'word', 'subword'",
        ),
        (
            lambda: preprocessors.Seq2SeqPreprocessor(words())(["a"], ["b", "c"]),
            r"as many texts. Received: 1 sources and 2 targets",
        ),
        (
            lambda: preprocessors.Seq2SeqPreprocessor(words())([1, 2]),
            r"sources must hold strings only. Received: sources\[0\]=1",
        ),
        (
            lambda: preprocessors.CausalLMPreprocessor(words())(["a"], ["b"]),
            r"pass the texts alone",
        ),
        (
            lambda: preprocessors.ClassifierPreprocessor(words(), labels=["x"]),
            r"at least two distinct class names",
        ),
        (
            lambda: preprocessors.ClassifierPreprocessor(words(), labels=["x", "y"])(["a"], ["z"]),
            r"labels\[0\] must be one of the preprocessor's labels \['x', 'y'\]. Received: 'z'",
        ),
        (
            lambda: preprocessors.ClassifierPreprocessor(words())(["a", "b"], [1]),
            r"one per text. Received: 2 texts and 1 labels",
        ),
    ],
)
def test_errors_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
