from keras_attn_rnn import _deprecation, serializable
from keras_attn_rnn.preprocessors import preprocessor
from keras_attn_rnn.preprocessors.preprocessor import Preprocessor


@serializable.register
@_deprecation.renamed(
    {"source_length": "source_sequence_length", "target_length": "target_sequence_length"},
    old_order=("source_sequence_length", "target_sequence_length"),
)
class Seq2SeqPreprocessor(Preprocessor):
    """Source and target strings -> what `Seq2Seq` trains on.

    `preprocessor(sources, targets)` returns `([source, target_in], target_out, None)`:
    int32 arrays right-padded with 0, `target_in = <s> target` (teacher forcing) and
    `target_out = target </s>`; `preprocessor(sources)` returns `source` alone. A source
    is cut to `source_sequence_length` tokens and a target to `target_sequence_length`
    (`</s>` and `<s>`
    not counted); `last_truncated` says which sources the last call cut.

    Args:
        tokenizer: the source tokenizer (an instance, a name of
            `keras_attn_rnn.tokenizers.names()`, or a config), adapted.
        target_tokenizer: the target's, or None to share `tokenizer` (one
            vocabulary for both sides).
        source_sequence_length: the most source tokens kept, or None.
        target_sequence_length: the most target tokens kept, or None; also the default
            `max_length` of `Seq2Seq.generate` (plus one for `</s>`).

    Examples:
        >>> from keras_attn_rnn.preprocessors import Seq2SeqPreprocessor
        >>> from keras_attn_rnn.tokenizers import WordTokenizer
        >>> tokenizer = WordTokenizer()
        >>> tokenizer.adapt(["a b c", "c b a"])
        >>> (source, target_in), target_out, _ = Seq2SeqPreprocessor(tokenizer)(["a b"], ["b a"])
        >>> source.tolist(), target_in.tolist(), target_out.tolist()
        ([[4, 5]], [[1, 5, 4]], [[5, 4, 2]])
    """

    def __init__(
        self,
        tokenizer,
        target_tokenizer=None,
        *,
        source_sequence_length=None,
        target_sequence_length=None,
        **kwargs,
    ):
        preprocessor.check_length("source_sequence_length", source_sequence_length)
        preprocessor.check_length("target_sequence_length", target_sequence_length)
        tokenizer = preprocessor.tokenizer_argument("tokenizer", tokenizer)
        if target_tokenizer is not None:
            target_tokenizer = preprocessor.tokenizer_argument("target_tokenizer", target_tokenizer)
        super().__init__(**kwargs)
        self.tokenizer = tokenizer
        self.shared = target_tokenizer is None
        self.target_tokenizer = tokenizer if target_tokenizer is None else target_tokenizer
        self.source_sequence_length = source_sequence_length
        self.target_sequence_length = target_sequence_length

    @property
    def source_vocabulary_size(self):
        return self.tokenizer.vocabulary_size

    @property
    def target_vocabulary_size(self):
        return self.target_tokenizer.vocabulary_size

    def call(self, x, y=None, sample_weight=None):
        source, self.last_truncated = self.encode(
            self.tokenizer, x, self.source_sequence_length, name="sources"
        )
        if y is None:
            return source
        target_in, _ = self.encode(
            self.target_tokenizer, y, self.target_sequence_length, start=True, name="targets"
        )
        target_out, _ = self.encode(
            self.target_tokenizer, y, self.target_sequence_length, end=True, name="targets"
        )
        if len(target_in) != len(source):
            raise ValueError(
                "sources and targets must have as many texts. "
                f"Received: {len(source)} sources and {len(target_in)} targets"
            )
        return [source, target_in], target_out, sample_weight

    def generate_preprocess(self, x):
        """Source strings -> source ids `(B, S)` (see `last_truncated`)."""
        return self(x)

    def generate_postprocess(self, ids, prompts=None):
        """Target ids `(B, T)` -> strings, each up to its first `</s>` (`prompts`, the
        sources, are not part of the answer)."""
        return self.target_tokenizer.decode_batch(ids)

    def generation_options(self):
        """What generation starts from and stops at: the target's `<s>` and `</s>`."""
        return {"start_id": self.target_tokenizer.start_id, "eos_id": self.target_tokenizer.end_id}

    def default_max_length(self):
        """`target_sequence_length + 1` (room for `</s>`), or 64 without a target length."""
        return 64 if self.target_sequence_length is None else self.target_sequence_length + 1

    def get_config(self):
        return {
            **super().get_config(),
            "tokenizer": preprocessor.serialize(self.tokenizer),
            "target_tokenizer": None
            if self.shared
            else preprocessor.serialize(self.target_tokenizer),
            "source_sequence_length": self.source_sequence_length,
            "target_sequence_length": self.target_sequence_length,
        }
