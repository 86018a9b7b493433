"""`tools/translation_pairs.py`: its `.mo` reader agrees with the standard library's
`gettext`, and it keeps only one-line, single-form, translated pairs."""

import gettext
import io
import struct

from tools import translation_pairs


def mo_bytes(messages: dict[str, str], big_endian=False) -> bytes:
    """A `.mo` file of `messages`, written as GNU msgfmt lays it out."""
    order = ">" if big_endian else "<"
    keys = sorted(messages)
    ids = [k.encode() for k in keys]
    strs = [messages[k].encode() for k in keys]
    start = 7 * 4 + 16 * len(keys)
    originals, translations, blob = [], [], b""
    for data in ids:
        originals.append((len(data), start + len(blob)))
        blob += data + b"\0"
    for data in strs:
        translations.append((len(data), start + len(blob)))
        blob += data + b"\0"
    header = struct.pack(order + "7I", 0x950412DE, 0, len(keys), 28, 28 + 8 * len(keys), 0, 0)
    tables = b"".join(struct.pack(order + "2I", *p) for p in originals + translations)
    return header + tables + blob


MESSAGES = {
    "": "Content-Type: text/plain; charset=UTF-8\n",
    "File not found": "Fichier introuvable",
    "%d file\x00%d files": "%d fichier\x00%d fichiers",  # plural: dropped
    "menu\x04Open": "Ouvrir",  # with a context: dropped
    "Same": "Same",  # untranslated: dropped
    "Two\nlines  here": "Deux\nlignes ici",
    "Élan vital": "Élan vital ✓",
}


def test_the_mo_reader_agrees_with_gettext_in_both_byte_orders():
    for big_endian in (False, True):
        data = mo_bytes(MESSAGES, big_endian)
        ours = translation_pairs.read_mo(data)
        theirs = gettext.GNUTranslations(io.BytesIO(data))
        assert ours["File not found"] == theirs.gettext("File not found") == "Fichier introuvable"
        assert ours["Élan vital"] == theirs.gettext("Élan vital")
        assert set(ours) == set(MESSAGES)


def test_only_one_line_translated_single_form_pairs_are_kept():
    kept = translation_pairs.pairs(translation_pairs.read_mo(mo_bytes(MESSAGES)), max_chars=200)
    assert kept == {
        "File not found": "Fichier introuvable",
        "Two lines here": "Deux lignes ici",
        "Élan vital": "Élan vital ✓",
    }
    assert translation_pairs.pairs({"a" * 30: "b" * 30}, max_chars=20) == {}
