import base64
import io
import warnings

from keras_attn_rnn import _deprecation, serializable
from keras_attn_rnn.tokenizers.tokenizer import (
    END,
    PAD,
    SPECIALS,
    START,
    UNK,
    Tokenizer,
    check_texts,
)

MODEL_TYPES = ("unigram", "bpe")
# With byte fallback every UTF-8 byte has a piece: the vocabulary needs room for them.
_BYTE_PIECES = 256
# `adapt` warns when byte pieces are more than this share of the vocabulary learnt.
MOST_BYTES = 0.5


class MostlyBytesWarning(UserWarning):
    """`SentencePieceTokenizer.adapt` learnt a vocabulary mostly of byte pieces."""


@serializable.register
@_deprecation.renamed(old_order=("model_type", "byte_fallback", "max_sentence_length", "lowercase"))
class SentencePieceTokenizer(Tokenizer):
    """Subword units (BPE or unigram) learnt from your text by SentencePiece.

    Why SentencePiece (Kudo and Richardson, 2018): it is lossless by construction
    (spaces are a piece, `▁`, so `decode(encode(text)) == text` for any text made
    of characters seen in training; with `byte_fallback=True`, any text at all,
    accents, CJK and emoji included: a character never seen in training is spelt
    as its UTF-8 bytes instead of `<unk>`); it needs no
    pre-tokenizer, so it serves languages without spaces; its whole model is one
    serialized protocol buffer, which travels inside this layer's config (and so
    inside a `.keras` file and the runner's served model); and its trainer is fast
    C++ (the `sentencepiece` package, which this class imports on first use).

    Text is taken as it is (SentencePiece's `identity` normalization, spaces kept),
    so what is decoded is what was encoded.

    Args:
        proto: a trained model: its serialized bytes, or None until `adapt`.
        vocabulary_size: the size `adapt` aims at (special tokens and, with
            `byte_fallback`, the 256 byte pieces included); a small corpus may give
            fewer pieces.
        model_type: `"unigram"` (SentencePiece's default) or `"bpe"`.
        byte_fallback: spell characters outside the vocabulary as bytes rather
            than `<unk>`. Off by default: its 256 byte pieces count in
            `vocabulary_size`, so it needs a vocabulary well above 256 (say 1000 and
            more) to leave room for subwords; `adapt` warns when byte pieces take
            most of the vocabulary.
        max_sentence_length: the longest text, in bytes, `adapt` trains on
            (longer ones are skipped by SentencePiece).
        lowercase: lower-case texts before encoding (then decoding gives the
            lower-cased text).

    Examples:
        >>> from keras_attn_rnn.tokenizers import SentencePieceTokenizer
        >>> tokenizer = SentencePieceTokenizer(vocabulary_size=40, model_type="bpe")
        >>> tokenizer.adapt(["the cat sat on the mat", "a dog sat on a log"] * 20)
        >>> tokenizer.tokenize("the dog sat")
        ['▁the', '▁dog', '▁sat']
        >>> tokenizer.decode(tokenizer.encode("the dog sat  on a mat"))
        'the dog sat  on a mat'
    """

    def __init__(
        self,
        proto=None,
        vocabulary_size=8000,
        *,
        model_type="unigram",
        byte_fallback=False,
        max_sentence_length=16384,
        lowercase=False,
        **kwargs,
    ):
        if model_type not in MODEL_TYPES:
            raise ValueError(
                f"model_type must be one of {', '.join(repr(m) for m in MODEL_TYPES)}. "
                f"Received: model_type={model_type!r}"
            )
        smallest = len(SPECIALS) + (_BYTE_PIECES + 1 if byte_fallback else 1)
        if (
            isinstance(vocabulary_size, bool)
            or not isinstance(vocabulary_size, int)
            or vocabulary_size < smallest
        ):
            raise ValueError(
                f"vocabulary_size must be an integer >= {smallest} (the special tokens"
                + (", 256 byte pieces" if byte_fallback else "")
                + " and one piece). Received: "
                f"vocabulary_size={vocabulary_size!r}, byte_fallback={byte_fallback!r}"
            )
        if not isinstance(byte_fallback, bool):
            raise ValueError(
                f"byte_fallback must be True or False. Received: byte_fallback={byte_fallback!r}"
            )
        if (
            isinstance(max_sentence_length, bool)
            or not isinstance(max_sentence_length, int)
            or max_sentence_length < 1
        ):
            raise ValueError(
                "max_sentence_length must be a positive integer. "
                f"Received: max_sentence_length={max_sentence_length!r}"
            )
        super().__init__(**kwargs)
        self.vocabulary_size_target = vocabulary_size
        self.model_type = model_type
        self.byte_fallback = byte_fallback
        self.max_sentence_length = max_sentence_length
        self.lowercase = bool(lowercase)
        self._processor = None
        self._pieces = list(SPECIALS)
        if proto is not None:
            self.set_proto(proto)

    @property
    def proto(self):
        """The serialized model (bytes), or None before `adapt`."""
        return None if self._processor is None else self._processor.serialized_model_proto()

    def set_proto(self, proto):
        """Loads a trained model: bytes, or the base64 text `get_config` writes.

        A damaged model (cut short or corrupted, e.g. in a `.keras` file or a served
        model's text card) raises a `ValueError` naming this tokenizer, short: the model
        itself is not printed."""
        damaged = (
            f"the SentencePiece model saved with tokenizer {self.name!r} is damaged (cut short "
            "or corrupted): save the tokenizer again, or adapt it again"
        )
        if isinstance(proto, str):
            try:
                proto = base64.b64decode(proto.encode("ascii"), validate=True)
            except (ValueError, UnicodeError) as err:  # binascii.Error is a ValueError
                raise ValueError(
                    f"proto must be a SentencePiece model in base64; {damaged} ({err}). "
                    f"Received: proto of {len(proto)} characters"
                ) from None
        if not isinstance(proto, (bytes, bytearray)):
            raise ValueError(
                "proto must be the bytes of a trained SentencePiece model. "
                f"Received: proto of type {type(proto).__name__}"
            )
        processor = _sentencepiece().SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(bytes(proto))
        except (RuntimeError, OSError):
            raise ValueError(
                f"proto must be a serialized SentencePiece model; {damaged}. "
                f"Received: proto of {len(proto)} bytes that SentencePiece cannot parse"
            ) from None
        ids = (processor.pad_id(), processor.bos_id(), processor.eos_id(), processor.unk_id())
        if ids != (PAD, START, END, UNK):
            raise ValueError(
                "proto must use the ids <pad> 0, <s> 1, </s> 2, <unk> 3 (as `adapt` trains). "
                f"Received: a model with (pad, bos, eos, unk) ids {ids}"
            )
        self._processor = processor
        self._pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        self._pieces[:4] = SPECIALS
        self._vocabulary_changed()

    @property
    def vocabulary(self):
        return self._pieces

    def adapt(self, texts):
        texts = check_texts(texts)
        if not any(texts):
            raise ValueError(
                "adapt needs at least one non-empty text to learn subword units from. "
                f"Received: {len(texts)} text(s), all empty"
            )
        if self.lowercase:
            texts = [text.lower() for text in texts]
        model = io.BytesIO()
        try:
            self._train(texts, model)
        except RuntimeError as err:  # SentencePiece's own checks, e.g. a vocabulary too small
            raise ValueError(
                f"SentencePiece could not learn {self.vocabulary_size_target} units from these "
                f"{len(texts)} texts ({str(err).strip()[:300]}); a vocabulary must hold every "
                "character of the text, the byte pieces and the special tokens: raise "
                f"vocabulary_size. Received: vocabulary_size={self.vocabulary_size_target}"
            ) from None
        self.set_proto(model.getvalue())
        self._warn_if_mostly_bytes()

    def _warn_if_mostly_bytes(self):
        size = self.vocabulary_size
        if self.byte_fallback and _BYTE_PIECES / size > MOST_BYTES:
            warnings.warn(
                f"{_BYTE_PIECES} of this SentencePiece vocabulary's {size} pieces are byte "
                f"pieces (byte_fallback=True), which leaves {size - _BYTE_PIECES} for "
                "characters and subwords: text is mostly spelt one character at a time. "
                f"Raise vocabulary_size (above {2 * _BYTE_PIECES}; 1000 and more for "
                "subwords) or pass byte_fallback=False. Received: "
                f"vocabulary_size={self.vocabulary_size_target}, byte_fallback=True",
                MostlyBytesWarning,
                stacklevel=3,
            )

    def _train(self, texts, model):
        _sentencepiece().SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_writer=model,
            vocab_size=self.vocabulary_size_target,
            model_type=self.model_type,
            pad_id=PAD,
            bos_id=START,
            eos_id=END,
            unk_id=UNK,
            pad_piece=SPECIALS[PAD],
            bos_piece=SPECIALS[START],
            eos_piece=SPECIALS[END],
            unk_piece=SPECIALS[UNK],
            byte_fallback=self.byte_fallback,
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            character_coverage=1.0 if not self.byte_fallback else 0.9995,
            hard_vocab_limit=False,
            max_sentence_length=self.max_sentence_length,
            input_sentence_size=0,
            num_threads=2,
            minloglevel=2,
        )

    def tokenize(self, text):
        self.check_adapted()
        if self.lowercase:
            text = text.lower()
        return self._processor.encode(text, out_type=str)

    def token_ids(self, tokens):
        self.check_adapted()
        return [self._processor.piece_to_id(token) for token in tokens]

    def encode(self, text):
        self.check_adapted()
        if not isinstance(text, str):
            return super().encode(text)  # raises the text error
        return self._processor.encode(text.lower() if self.lowercase else text)

    def encode_batch(self, texts):
        """`[encode(text) for text in texts]`, in one call of SentencePiece's C++ encoder
        (on two threads)."""
        self.check_adapted()
        texts = check_texts(texts)
        if self.lowercase:
            texts = [text.lower() for text in texts]
        return self._processor.encode(texts, num_threads=2)

    def detokenize(self, tokens):
        return self._processor.decode_pieces(list(tokens)) if tokens else ""

    def check_adapted(self):
        if self._processor is None:
            raise ValueError(
                "SentencePieceTokenizer has no model yet: call adapt(texts) on the training "
                "texts first (or pass proto=). Received: proto=None"
            )

    def get_config(self):
        proto = self.proto
        return {
            **super().get_config(),
            "proto": None if proto is None else base64.b64encode(proto).decode("ascii"),
            "vocabulary_size": self.vocabulary_size_target,
            "model_type": self.model_type,
            "byte_fallback": self.byte_fallback,
            "max_sentence_length": self.max_sentence_length,
            "lowercase": self.lowercase,
        }


def _sentencepiece():
    try:
        import sentencepiece
    except ImportError:
        raise ImportError(
            "SentencePieceTokenizer needs the sentencepiece package: "
            "pip install 'keras-attn-rnn[text]' (or pip install sentencepiece)."
        ) from None
    return sentencepiece
