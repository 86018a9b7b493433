"""The library's tokenizers: round trips on hostile text, configs through JSON, `adapt` and
errors. (The runner's tasks and the served text model use these classes:
tests/test_tokenizer_parity.py checks both sides on hostile text.)"""

import base64
import json
import warnings

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
    tokenizer = tokenizers.SentencePieceTokenizer(
        vocabulary_size=320, model_type=model_type, byte_fallback=True
    )
    with pytest.warns(UserWarning, match="byte pieces"):  # 256 of 320: a small vocabulary
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
    a = tokenizers.get("subword", vocabulary_size=60, model_type="bpe")
    b = tokenizers.get("subword", vocabulary_size=60, model_type="bpe")
    a.adapt(CORPUS)
    b.adapt(CORPUS)
    assert a.proto == b.proto
    assert 40 < a.vocabulary_size <= 60
    small = tokenizers.SentencePieceTokenizer(vocabulary_size=40, byte_fallback=False)
    small.adapt(CORPUS)
    assert small.vocabulary_size <= 40
    # without byte fallback an unseen character is <unk>
    assert tokenizers.UNK in small.encode("東")


def test_lowercase_subwords_decode_lower_case():
    tokenizer = tokenizers.SentencePieceTokenizer(vocabulary_size=60, lowercase=True)
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
    tokenizer = tokenizers.WordTokenizer(vocabulary_size=7, min_count=2)
    tokenizer.adapt(["b a a c", "a b d"])
    assert tokenizer.vocabulary == ["<pad>", "<s>", "</s>", "<unk>", "a", "b"]
    tokenizer = tokenizers.WordTokenizer(vocabulary_size=6)
    tokenizer.adapt(["b a a c", "a b d"])
    assert tokenizer.vocabulary[4:] == ["a", "b"]
    assert tokenizer.encode("c a") == [tokenizers.UNK, 4]


@pytest.mark.parametrize(
    "build, match",
    [
        (
            lambda: tokenizers.SentencePieceTokenizer(vocabulary_size=100, byte_fallback=True),
            r"vocabulary_size must be an integer >= 261.*Received: vocabulary_size=100",
        ),
        (
            lambda: tokenizers.SentencePieceTokenizer(model_type="wordpiece"),
            r"model_type must be one of 'unigram', 'bpe'.*'wordpiece'",
        ),
        (
            lambda: tokenizers.SentencePieceTokenizer(proto=b"not a model"),
            r"proto must be a serialized SentencePiece model; the SentencePiece model saved "
            r"with tokenizer '.*' is damaged.*Received: proto of 11 bytes",
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
        (lambda: tokenizers.WordTokenizer(vocabulary_size=4), r"vocabulary_size must leave room"),
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


def test_default_subwords_are_subwords_not_bytes():
    """Without byte fallback (the default) a small vocabulary holds real subwords: whole
    frequent words, no byte pieces."""
    tokenizer = tokenizers.SentencePieceTokenizer(vocabulary_size=100, model_type="bpe")
    tokenizer.adapt(CORPUS)
    assert tokenizer.tokenize("the cat sat on the mat") == [
        "▁the", "▁cat", "▁sat", "▁on", "▁the", "▁mat"
    ]  # fmt: skip
    assert not [piece for piece in tokenizer.vocabulary if piece.startswith("<0x")]


def test_a_vocabulary_mostly_of_byte_pieces_warns_naming_the_numbers_and_the_fix():
    tokenizer = tokenizers.SentencePieceTokenizer(vocabulary_size=300, byte_fallback=True)
    with pytest.warns(UserWarning) as caught:
        tokenizer.adapt(CORPUS)
    (warning,) = [w for w in caught if "byte pieces" in str(w.message)]
    message = str(warning.message)
    assert f"256 of this SentencePiece vocabulary's {tokenizer.vocabulary_size} pieces" in message
    assert "Raise vocabulary_size" in message and "byte_fallback=False" in message
    assert message.endswith("Received: vocabulary_size=300, byte_fallback=True")
    assert warning.filename == __file__  # it points at the adapt call
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no byte pieces: no warning
        tokenizers.SentencePieceTokenizer(vocabulary_size=300).adapt(CORPUS)


@pytest.mark.parametrize("damage", ["cut short", "corrupted"])
def test_a_damaged_saved_model_names_the_tokenizer_in_a_short_error(damage):
    """A proto cut short (its base64 text) or corrupted (its bytes), as a damaged `.keras`
    file or text card holds it, gives a short ValueError naming the tokenizer: not
    Keras's TypeError printing the whole config, base64 model and all."""
    tokenizer = tokenizers.SentencePieceTokenizer(vocabulary_size=60, name="source_pieces")
    tokenizer.adapt(CORPUS)
    config = tokenizers.serialize(tokenizer)
    proto = config["config"]["proto"]
    if damage == "cut short":
        config["config"]["proto"] = proto[: len(proto) // 2 + 1]
    else:
        raw = bytearray(base64.b64decode(proto))
        raw[8:40] = b"\xff" * 32
        config["config"]["proto"] = base64.b64encode(bytes(raw)).decode("ascii")
    with pytest.raises(ValueError) as caught:
        keras.saving.deserialize_keras_object(json.loads(json.dumps(config)))
    message = str(caught.value)
    assert "tokenizer 'source_pieces' is damaged" in message
    assert "Received: proto of" in message
    assert len(message) < 400 and config["config"]["proto"][:40] not in message


def test_the_runner_says_a_vocabulary_mostly_of_bytes_in_its_own_terms(capsys):
    """The runner keeps byte fallback, so the library's advice (`byte_fallback=False`) is not
    the user's to take: it says which config key to raise instead, and no UserWarning."""
    import warnings

    from experiments.data import units

    texts = [f"the {word} file was not found on line {n}" for n, word in enumerate("abcdefgh")]
    tokenizer = units.tokenizer("subword", 300)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        units.adapt(tokenizer, texts * 20, "task.vocabulary_size", 300)
    assert not [w for w in caught if "byte" in str(w.message)]
    err = capsys.readouterr().err
    assert "task.vocabulary_size: 300 subword units, 256 of them byte pieces" in err
    assert "raise task.vocabulary_size to 1000 or more" in err
