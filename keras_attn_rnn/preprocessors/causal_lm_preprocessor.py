import numpy as np

from keras_attn_rnn import _deprecation, serializable
from keras_attn_rnn.preprocessors import preprocessor
from keras_attn_rnn.preprocessors.preprocessor import Preprocessor
from keras_attn_rnn.tokenizers.tokenizer import check_texts


@serializable.register
@_deprecation.renamed(old_order=("sequence_length",))
class CausalLMPreprocessor(Preprocessor):
    """Texts -> what `AttentiveLanguageModel` trains on: next-token prediction.

    `preprocessor(texts)` returns `(x, y, None)`: each text as `<s> ids </s>` cut to
    `sequence_length + 1` ids, `x` all but its last id and `y` all but its first
    (int32, right-padded with 0). `generate_preprocess(prompts)` gives `<s> ids` (no
    `</s>`: generation continues the prompt).

    Args:
        tokenizer: an adapted tokenizer (an instance, a name or a config).
        sequence_length: the most ids of `x` per text (with `<s>`), or None.

    Examples:
        >>> from keras_attn_rnn.preprocessors import CausalLMPreprocessor
        >>> from keras_attn_rnn.tokenizers import CharTokenizer
        >>> tokenizer = CharTokenizer()
        >>> tokenizer.adapt(["abc"])
        >>> x, y, _ = CausalLMPreprocessor(tokenizer)(["ab"])
        >>> x.tolist(), y.tolist()
        ([[1, 4, 5]], [[4, 5, 2]])
    """

    def __init__(self, tokenizer, *, sequence_length=None, **kwargs):
        preprocessor.check_length("sequence_length", sequence_length)
        tokenizer = preprocessor.tokenizer_argument("tokenizer", tokenizer)
        super().__init__(**kwargs)
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length

    @property
    def vocabulary_size(self):
        return self.tokenizer.vocabulary_size

    def call(self, x, y=None, sample_weight=None):
        if y is not None:
            raise ValueError(
                "a language model's targets are its texts shifted by one: pass the texts "
                f"alone. Received: y of type {type(y).__name__}"
            )
        length = None if self.sequence_length is None else self.sequence_length - 1
        ids, self.last_truncated = self.encode(self.tokenizer, x, length, start=True, end=True)
        inputs = np.where(ids[:, :-1] == self.tokenizer.end_id, 0, ids[:, :-1])
        return inputs, ids[:, 1:], sample_weight

    def generate_preprocess(self, x):
        """Prompt strings -> `<s> ids`, right-padded `(B, P)` (see `last_truncated`)."""
        prompts = check_texts(x, "prompts")
        ids, self.last_truncated = self.encode(
            self.tokenizer, prompts, self.sequence_length, start=True, name="prompts"
        )
        return ids

    def generate_postprocess(self, ids, prompts=None):
        """Generated ids `(B, T)` -> strings, each up to its first `</s>`; with `prompts`
        (the `generate_preprocess` ids), each string is its prompt and its continuation."""
        if prompts is None:
            return self.tokenizer.decode_batch(ids)
        return self.tokenizer.decode_batch(
            [
                [int(i) for i in prompt[1:] if i != 0] + list(row)
                for prompt, row in zip(prompts, ids)
            ]
        )

    def generation_options(self):
        """Generation stops at `</s>` (the prompts already start with `<s>`)."""
        return {"eos_id": self.tokenizer.end_id}

    def default_max_length(self):
        """`sequence_length`, or 64 without one."""
        return 64 if self.sequence_length is None else self.sequence_length

    def get_config(self):
        return {
            **super().get_config(),
            "tokenizer": preprocessor.serialize(self.tokenizer),
            "sequence_length": self.sequence_length,
        }
