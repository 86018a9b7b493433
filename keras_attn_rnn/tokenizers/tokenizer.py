from typing import NamedTuple

import keras
import numpy as np

from keras_attn_rnn import _keras_compat

# The ids every vocabulary starts with.
PAD, START, END, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")


class Extended(NamedTuple):
    """A text encoded for copy attention (`Tokenizer.encode_extended`).

    `ids`: vocabulary ids, a token outside the vocabulary as `<unk>`;
    `extended`: the same, but the k-th distinct unknown token as
    `vocabulary_size + k`; `oov`: those unknown tokens, in order of first
    appearance (extended id `vocabulary_size + k` is `oov[k]`).
    """

    ids: list
    extended: list
    oov: list


class Tokenizer(keras.layers.Layer):
    """Base of the tokenizers: raw text <-> token ids, with the ids `<pad>` 0, `<s>` 1,
    `</s>` 2 and `<unk>` 3 first in every vocabulary.

    A subclass implements `tokenize(text)` (the text's tokens), `vocabulary` (the
    tokens in id order), `detokenize(tokens)` (a text from tokens), and `adapt(texts)`
    (learns the vocabulary from training texts, as Keras preprocessing layers do). The
    rest is shared: ids of tokens, encoding and decoding, batches, and the extended
    encoding of copy attention.

    A tokenizer is a Keras layer with no weights so that a model's preprocessor saves
    it, vocabulary included, in the model's `.keras` file; its config holds everything
    (`keras.saving.serialize_keras_object` gives it, `deserialize_keras_object` gives it
    back).
    """

    pad_id, start_id, end_id, unk_id = PAD, START, END, UNK

    def __init__(self, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        _keras_compat.accept_python_inputs(self)
        self._index = None

    def call(self, inputs):
        """`tokenizer(text)` is `encode(text)` (a list of ids); `tokenizer(texts)` is
        `encode_batch(texts)` (a list of id lists), as keras-hub's tokenizers are called."""
        if isinstance(inputs, (str, bytes)):
            return self.encode(check_texts(inputs, "inputs")[0])
        return self.encode_batch(check_texts(inputs, "inputs"))

    # ---------------------------------------------------------------- what a subclass gives

    @property
    def vocabulary(self):
        """The tokens in id order (the special tokens first)."""
        raise NotImplementedError

    def tokenize(self, text):
        """The tokens of `text`, before they become ids."""
        raise NotImplementedError

    def detokenize(self, tokens):
        """The text of `tokens` (special tokens already dropped)."""
        raise NotImplementedError

    def adapt(self, texts):
        """Learns the vocabulary from an iterable of training texts."""
        raise NotImplementedError

    # ---------------------------------------------------------------- shared

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    def __len__(self):
        return self.vocabulary_size

    def get_vocabulary(self):
        """The tokens in id order, a new list (keras-hub's name for `vocabulary`)."""
        return list(self.vocabulary)

    def id_to_token(self, id):
        """The token of id `id` (keras-hub's); raises for an id outside the vocabulary."""
        size = self.vocabulary_size
        if isinstance(id, bool) or not isinstance(id, (int, np.integer)) or not 0 <= id < size:
            raise ValueError(f"id must be an integer in [0, {size}). Received: id={id!r}")
        return self.vocabulary[int(id)]

    def token_to_id(self, token):
        """The id of `token` (keras-hub's); raises for a token outside the vocabulary."""
        if not isinstance(token, str) or token not in self.index:
            raise ValueError(
                f"token must be a token of the vocabulary ({self.vocabulary_size} tokens). "
                f"Received: token={_preview(token)}"
            )
        return self.index[token]

    @property
    def index(self):
        """Token -> id."""
        if self._index is None or len(self._index) != len(self.vocabulary):
            self._index = {token: i for i, token in enumerate(self.vocabulary)}
        return self._index

    def _vocabulary_changed(self):
        self._index = None

    @classmethod
    def from_config(cls, config):
        """`cls(**config)`. Keras's `Layer.from_config` would turn a damaged vocabulary's
        `ValueError` (which names the tokenizer and what is wrong) into a `TypeError`
        that prints the whole config: a SentencePiece model in base64, kilobytes long."""
        return cls(**config)

    def replace(self, **changes):
        """A copy with the constructor arguments in `changes` replaced (e.g. `vocabulary=`)."""
        return type(self).from_config({**self.get_config(), **changes})

    def check_adapted(self):
        """Raises unless the tokenizer has a vocabulary beyond the special tokens."""
        if self.vocabulary_size <= len(SPECIALS):
            raise ValueError(
                f"{type(self).__name__} has no vocabulary yet: call adapt(texts) on the "
                "training texts first (or pass a vocabulary). "
                f"Received: vocabulary_size={self.vocabulary_size}"
            )

    def token_ids(self, tokens):
        """Ids of tokens made by `tokenize`; a token outside the vocabulary is `<unk>`."""
        index = self.index
        return [index.get(token, UNK) for token in tokens]

    def encode(self, text):
        """Ids of `text`: `token_ids(tokenize(text))`."""
        return self.token_ids(self.tokenize(check_text(text)))

    def encode_batch(self, texts):
        """`[encode(text) for text in texts]`, each text checked."""
        return [self.encode(text) for text in check_texts(texts)]

    def label(self, i, oov=()):
        """The token of id `i`; an extended id `vocabulary_size + k` is `oov[k]`, or `<unk>`
        past the end of `oov`."""
        i, size = int(i), self.vocabulary_size
        if i < size:
            return self.vocabulary[i]
        return oov[i - size] if i - size < len(oov) else SPECIALS[UNK]

    def decode(self, ids):
        """The text of `ids` up to the first `</s>`, special tokens dropped."""
        return self._decode(ids, None)

    def decode_batch(self, rows):
        """`[decode(row) for row in rows]`."""
        return [self.decode(row) for row in rows]

    def decode_extended(self, ids, oov):
        """`decode` of extended ids: `vocabulary_size + k` is `oov[k]`; an extended id past
        the end of `oov` is dropped, as `<unk>` is."""
        return self._decode(ids, oov)

    def _decode(self, ids, oov):
        tokens, size, vocabulary = [], self.vocabulary_size, self.vocabulary
        for i in ids:
            i = int(i)
            if i == END:
                break
            if oov is not None and i >= size:
                if i - size < len(oov):
                    tokens.append(oov[i - size])
            elif i >= size or i < 0:
                raise ValueError(
                    f"ids must be in [0, {size}) (the vocabulary; copy attention's extended "
                    f"ids decode with decode_extended). Received: id {i}"
                )
            elif i >= len(SPECIALS):
                tokens.append(vocabulary[i])
        return self.detokenize(tokens)

    def encode_extended(self, text, max_oov=None):
        """`text` encoded for copy attention (`keras_attn_rnn.copying`): its ids, its
        extended ids and its unknown tokens (see `Extended`); with `max_oov`, unknown
        tokens past the first `max_oov` distinct ones stay `<unk>` in `extended` too."""
        if max_oov is not None and (
            isinstance(max_oov, bool) or not isinstance(max_oov, int) or max_oov < 0
        ):
            raise ValueError(
                f"max_oov must be an integer >= 0 or None. Received: max_oov={max_oov!r}"
            )
        tokens = self.tokenize(check_text(text))
        ids = self.token_ids(tokens)
        if not tokens:  # `ids` is [] or, with a tokenizer's empty_as_unknown, [<unk>]
            return Extended(ids, list(ids), [])
        oov, extended, index = {}, [], self.index
        for token, i in zip(tokens, ids):
            if i == UNK and token not in index:
                if token not in oov and (max_oov is None or len(oov) < max_oov):
                    oov[token] = self.vocabulary_size + len(oov)
                i = oov.get(token, UNK)
            extended.append(i)
        return Extended(ids, extended, list(oov))

    def encode_target(self, text, oov):
        """Extended ids of a target `text` against its source's unknown tokens `oov`: an
        unknown token that is `oov[k]` is `vocabulary_size + k`, any other one `<unk>`."""
        position = {token: self.vocabulary_size + k for k, token in enumerate(oov)}
        tokens = self.tokenize(check_text(text))
        if not tokens:
            return self.token_ids(tokens)
        index = self.index
        return [
            position.get(token, UNK) if i == UNK and token not in index else i
            for token, i in zip(tokens, self.token_ids(tokens))
        ]


def check_text(text):
    if not isinstance(text, str):
        raise ValueError(f"a text must be a str. Received: {type(text).__name__} {_preview(text)}")
    return text


def check_texts(texts, name="texts"):
    """`texts` (a str, or an iterable of str, NumPy string arrays included) as a list; bytes
    (what `tf.data` gives for strings) are read as UTF-8."""
    if isinstance(texts, bytes):
        texts = _utf8(texts, name)
    if isinstance(texts, str):
        return [texts]
    if isinstance(texts, dict) or not hasattr(texts, "__iter__"):
        raise ValueError(
            f"{name} must be a string or a list of strings. "
            f"Received: {name}={_preview(texts)} ({type(texts).__name__})"
        )
    result = []
    for i, text in enumerate(texts):
        if hasattr(text, "item") and not isinstance(text, str):  # NumPy str_ / 0-d array
            text = text.item()
        if isinstance(text, bytes):
            text = _utf8(text, f"{name}[{i}]")
        if not isinstance(text, str):
            raise ValueError(
                f"{name} must hold strings only. Received: {name}[{i}]={_preview(text)} "
                f"({type(text).__name__})"
            )
        result.append(text)
    return result


def is_text(value):
    """True for a str (or bytes), or a list/tuple/NumPy array whose first element is one."""
    if isinstance(value, (str, bytes)):
        return True
    if isinstance(value, (list, tuple)) and value:
        return isinstance(value[0], (str, bytes))
    dtype = getattr(value, "dtype", None)
    return (
        dtype is not None
        and getattr(dtype, "kind", "") in ("U", "O", "S")
        and getattr(value, "ndim", 0) >= 1
        and (len(value) == 0 or isinstance(value.reshape(-1)[0].item(), (str, bytes)))
    )


def _utf8(value, name):
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{name} must be text: bytes are read as UTF-8 ({err.reason}). "
            f"Received: {name}={_preview(value)}"
        ) from None


def _preview(value, limit=80):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
