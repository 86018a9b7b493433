"""The tokenizer's extended encoding for copy attention: unknown words get temporary ids past
the vocabulary (`Tokenizer.encode_extended`), a target is written against its source's unknown
words (`encode_target`), and extended ids decode back to those words (`decode_extended`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_attn_rnn.tokenizers import SPECIALS, UNK, Extended
from keras_attn_rnn.tokenizers import VocabularyTokenizer as Tokenizer

WORDS = ["meet", "at", "on", "friday"]
V = len(SPECIALS) + len(WORDS)  # 8: the first extended id


def words(**rules) -> Tokenizer:
    return Tokenizer([*SPECIALS, *WORDS], split="whitespace", joiner=" ", **rules)


def test_unknown_words_get_ids_past_the_vocabulary_in_order_of_first_appearance():
    got = words().encode_extended("meet Zoe at Oslo on friday with Zoe")
    assert got == Extended(
        ids=[4, UNK, 5, UNK, 6, 7, UNK, UNK],
        extended=[4, V, 5, V + 1, 6, 7, V + 2, V],  # Zoe twice: one id
        oov=["Zoe", "Oslo", "with"],
    )
    assert got.ids == words().encode("meet Zoe at Oslo on friday with Zoe")  # encode's ids


def test_a_source_without_unknown_words_is_its_own_extended_source():
    got = words().encode_extended("meet at friday")
    assert got.ids == got.extended == [4, 5, 7] and got.oov == []


def test_max_oov_keeps_the_later_unknown_words_unknown():
    got = words().encode_extended("Ann Bo Ann Cy Dee", max_oov=2)
    assert got.extended == [V, V + 1, V, UNK, UNK] and got.oov == ["Ann", "Bo"]
    assert words().encode_extended("Ann Bo", max_oov=0).extended == [UNK, UNK]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_max_oov_must_be_a_count(bad):
    with pytest.raises(ValueError, match=r"max_oov must be an integer >= 0 or None\. Received"):
        words().encode_extended("a b", max_oov=bad)


def test_the_unknown_token_written_out_is_not_an_unknown_word():
    got = words().encode_extended("<unk> Zoe <pad>")
    assert got.extended == [UNK, V, 0] and got.oov == ["Zoe"]


def test_the_rules_apply_before_the_extended_ids():
    lower = words(lowercase=True, sequence_length=3)
    assert lower.encode_extended("MEET Zoe AT Oslo") == Extended([4, UNK, 5], [4, V, 5], ["zoe"])
    chars = Tokenizer([*SPECIALS, "a", "b"], split="chars")
    assert chars.encode_extended("abxa") == Extended([4, 5, UNK, 4], [4, 5, 6, 4], ["x"])
    empty = words(empty_as_unknown=True).encode_extended("   ")
    assert empty == Extended([UNK], [UNK], [])


def test_a_target_is_written_against_its_sources_unknown_words():
    tokenizer = words()
    source = tokenizer.encode_extended("meet Zoe at Oslo")
    assert tokenizer.encode_target("on friday Oslo meets Zoe", source.oov) == [
        6,
        7,
        V + 1,  # Oslo: in the source
        UNK,  # meets: unknown, not in the source
        V,
    ]
    assert tokenizer.encode_target("", source.oov) == []
    assert words(empty_as_unknown=True).encode_target("", source.oov) == [UNK]


def test_extended_ids_decode_to_the_unknown_words():
    tokenizer = words()
    oov = ["Zoe", "Oslo"]
    assert tokenizer.decode_extended([6, 7, V + 1, V, 2, V], oov) == "on friday Oslo Zoe"
    assert tokenizer.decode_extended([V + 2, 4, UNK], oov) == "meet"  # past oov: as <unk>
    assert tokenizer.decode([6, 7, 2]) == "on friday"  # decode itself is unchanged
    with pytest.raises(
        ValueError, match=r"ids must be in \[0, 8\).*decode_extended\)\. Received: id 8"
    ):
        tokenizer.decode([V])  # an extended id means nothing without its words


_WORD = st.sampled_from([*WORDS, "Zoe", "Oslo", "Ann", "with", "<unk>", "x"])


@given(st.lists(_WORD, max_size=12), st.none() | st.integers(0, 4))
def test_extended_encoding_round_trips(tokens, max_oov):
    tokenizer = words()
    text = " ".join(tokens)
    got = tokenizer.encode_extended(text, max_oov)
    assert got.ids == tokenizer.encode(text)
    assert len(got.oov) == len(set(got.oov))
    assert max_oov is None or len(got.oov) <= max_oov
    assert all(word not in tokenizer.index for word in got.oov)
    assert all(0 <= i < V + len(got.oov) for i in got.extended)
    for i, e in zip(got.ids, got.extended):
        assert e == i or (i == UNK and e >= V)
    assert tokenizer.encode_target(text, got.oov) == got.extended  # the source as a target
    kept = [t for t in tokens if t in WORDS or t in got.oov]
    assert tokenizer.decode_extended(got.extended, got.oov) == " ".join(kept)
