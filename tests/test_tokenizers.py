"""The library's tokenizers: round trips on hostile text, configs through JSON, `adapt` and
errors. (The runner's tasks and the served text model use these classes:
tests/test_tokenizer_parity.py checks both sides on hostile text.)"""

import json

import keras
import pytest

from keras_attn_rnn import tokenizers

pytestmark = pytest.mark.layers

HOSTILE = [
    "café naïve façade Ærøskøbing",  # accents
    "東京へ行きます。北京欢迎你",  # CJK, no spaces
    "emoji 🙂🚀 and 👩‍👩‍👧 (a joined family)",
    "  several   spaces\tand a tab\nand a newline  ",
    "",
    "x" * 3000 + " a long text",
]
CORPUS = [
    "the cat sat on the mat",
    "a dog ran on a log",
    "le chat est sur le tapis",
    "die Katze sitzt auf der Matte",
] * 30


def json_round_trip(tokenizer):
    config = json.loads(json.dumps(tokenizers.serialize(tokenizer)))
    return keras.saving.deserialize_keras_object(config)


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_subword_units_decode_every_text_exactly(model_type):
    """Unseen accents, CJK, emoji (bytes), runs of spaces, tabs, newlines and a long text
    all come back unchanged, also after the config went through JSON."""
    tokenizer = tokenizers.SentencePieceTokenizer(vocabulary_size=320, model_type=model_type)
    tokenizer.adapt(CORPUS)
    clone = json_round_trip(tokenizer)
    for text in HOSTILE:
        ids = tokenizer.encode(text)
        assert all(0 <= i < tokenizer.vocabulary_size for i in ids)
        assert tokenizers.UNK not in ids  # byte fallback: nothing is unknown
        assert tokenizer.decode(ids) == text
        assert clone.encode(text) == ids and clone.decode(ids) == text
    # frequent words become single pieces: far fewer ids than characters
    assert len(tokenizer.encode("the cat sat on the mat")) < len("the cat sat on the mat")
    assert tokenizer.vocabulary[:4] == list(tokenizers.SPECIALS)
    # decoding stops at </s> and drops the other special ids
    ids = tokenizer.encode("the cat")
    assert tokenizer.decode([1, *ids, 0, 2, *ids]) == "the cat"


def test_subword_adapt_is_deterministic_and_sized():
    a = tokenizers.get("subword", vocabulary_size=300, model_type="bpe")
    b = tokenizers.get("subword", vocabulary_size=300, model_type="bpe")
    a.adapt(CORPUS)
    b.adapt(CORPUS)
    assert a.proto == b.proto
    assert 260 < a.vocabulary_size <= 300  # a small corpus may give fewer pieces
    small = tokenizers.SentencePieceTokenizer(vocabulary_size=40, byte_fallback=False)
    small.adapt(CORPUS)
    assert small.vocabulary_size <= 40
    # without byte fallback an unseen character is <unk>
    assert tokenizers.UNK in small.encode("東")


def test_lowercase_subwords_decode_lower_case():
    tokenizer = tokenizers.SentencePieceTokenizer(vocabulary_size=300, lowercase=True)
    tokenizer.adapt(CORPUS)
    assert tokenizer.encode("THE Cat") == tokenizer.encode("the cat")
    assert tokenizer.decode(tokenizer.encode("THE Cat")) == "the cat"


@pytest.mark.parametrize(
    "make, text, decoded",
    [
        (lambda: tokenizers.CharTokenizer(), "the mat", "the mat"),
        (lambda: tokenizers.CharTokenizer(), "the 東", "the "),  # unseen: <unk>, dropped
        (lambda: tokenizers.WordTokenizer(), "the  cat\tsat", "the cat sat"),
        (lambda: tokenizers.WordTokenizer(lowercase=True), "The CAT", "the cat"),
        (lambda: tokenizers.WordTokenizer(pattern=r"\w+|[^\w\s]"), "cat, dog!", "cat , dog"),
    ],
)
def test_vocabulary_tokenizers_round_trip_what_they_know(make, text, decoded):
    tokenizer = make()
    tokenizer.adapt(CORPUS + ["cat, mat"])
    clone = json_round_trip(tokenizer)
    assert type(clone) is type(tokenizer)
    assert clone.vocabulary == tokenizer.vocabulary
    assert tokenizer.decode(tokenizer.encode(text)) == decoded
    assert clone.encode(text) == tokenizer.encode(text)


def test_word_vocabulary_is_by_frequency_and_bounded():
    tokenizer = tokenizers.WordTokenizer(max_vocabulary=7, min_count=2)
    tokenizer.adapt(["b a a c", "a b d"])
    assert tokenizer.vocabulary == ["<pad>", "<s>", "</s>", "<unk>", "a", "b"]
    tokenizer = tokenizers.WordTokenizer(max_vocabulary=6)
    tokenizer.adapt(["b a a c", "a b d"])
    assert tokenizer.vocabulary[4:] == ["a", "b"]
    assert tokenizer.encode("c a") == [tokenizers.UNK, 4]


@pytest.mark.parametrize(
    "build, match",
    [
        (
            lambda: tokenizers.SentencePieceTokenizer(vocabulary_size=100),
            r"vocabulary_size must be an integer >= 261.*Received: vocabulary_size=100",
        ),
        (
            lambda: tokenizers.SentencePieceTokenizer(model_type="wordpiece"),
            r"model_type must be one of 'unigram', 'bpe'.*'wordpiece'",
        ),
        (
            lambda: tokenizers.SentencePieceTokenizer(proto=b"not a model"),
            r"proto is not a SentencePiece model",
        ),
        (
            lambda: tokenizers.SentencePieceTokenizer().encode("x"),
            r"no model yet: call adapt.*proto=None",
        ),
        (
            lambda: tokenizers.SentencePieceTokenizer().adapt(["", ""]),
            r"at least one non-empty text",
        ),
        (
            lambda: tokenizers.VocabularyTokenizer(split="bytes"),
            r"split must be one of.*Received: split='bytes'",
        ),
        (
            lambda: tokenizers.VocabularyTokenizer(split="regex"),
            r"pattern must be given with split='regex'",
        ),
        (lambda: tokenizers.WordTokenizer(pattern="("), r"pattern must be a regular expression"),
        (lambda: tokenizers.WordTokenizer(max_vocabulary=4), r"max_vocabulary must leave room"),
        (
            lambda: tokenizers.WordTokenizer(vocabulary="abc"),
            r"vocabulary must be a list of tokens",
        ),
        (
            lambda: tokenizers.WordTokenizer().encode(b"bytes"),
            r"a text must be a str. Received: bytes",
        ),
        (
            lambda: tokenizers.WordTokenizer().adapt(["ok", 3]),
            r"texts must hold strings only. Received: texts\[1\]=3",
        ),
        (lambda: tokenizers.get("bpe"), r"tokenizer must be one of 'char', 'word', 'subword'"),
    ],
)
def test_bad_arguments_are_refused_naming_them(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_a_vocabulary_too_small_for_the_text_is_a_clear_error():
    texts = ["".join(chr(0x4E00 + (i * 7 + j) % 900) for j in range(20)) for i in range(200)]
    tokenizer = tokenizers.SentencePieceTokenizer(vocabulary_size=300, byte_fallback=True)
    with pytest.raises(ValueError, match=r"could not learn 300 units.*raise vocabulary_size"):
        tokenizer.adapt(texts)
