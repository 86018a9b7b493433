import keras
from keras import ops

from keras_attn_rnn import _deprecation
from keras_attn_rnn.generators import _parts
from keras_attn_rnn.layers import SequenceAttention
from keras_attn_rnn.preprocessors import CausalLMPreprocessor
from keras_attn_rnn.stepping import CausalAttentionStep, _ops, causal_attention_step


@_deprecation.renamed(old_order=("preprocessor",))
class CausalLMGenerator:
    """Drives your own RNN language model with causal `SequenceAttention`.

    The model it decodes computes, for tokens `(B, T)` (0 pads):
    `h = rnn(embedding(tokens))` (through each RNN layer in turn),
    `context = attention([h, h], use_causal_mask=True)`,
    `logits = head(concatenate([h, context]))`. Generation runs the prompts
    once, then per token one step of each RNN's cell and one cached
    attention read (keys prepared once, as keras-hub's
    `CachedMultiHeadAttention`), never a re-run of the prefix.

    Args:
        embedding: the layer that embeds token ids (an `Embedding`).
        rnn: a `keras.layers.LSTM`, `GRU` or `SimpleRNN` with
            `return_sequences=True`, or a list of them (stacked in order).
        attention: the `SequenceAttention` of the causal self-attention.
        head: a layer, or a list of layers applied in order, from
            `concatenate([h, context])` to the logits `(B, V)`.
        vocabulary_size: by default the preprocessor's, else the embedding's
            `input_dim`.
        preprocessor: a `keras_attn_rnn.preprocessors.CausalLMPreprocessor`:
            `generate` then takes prompt strings and returns each prompt with
            its continuation.

    Prompts may have different lengths (a list of id lists, or rows
    right-padded with 0): each row continues from its own last token.

    Examples:
        >>> from keras_attn_rnn import SequenceAttention
        >>> from keras_attn_rnn.generators import CausalLMGenerator
        >>> tokens = keras.Input((None,), dtype="int32")
        >>> embedding = keras.layers.Embedding(30, 8, mask_zero=True)
        >>> rnn = keras.layers.GRU(16, return_sequences=True)
        >>> attention = SequenceAttention(score="general")
        >>> head = keras.layers.Dense(30)
        >>> h = rnn(embedding(tokens))
        >>> context = attention([h, h], use_causal_mask=True)
        >>> model = keras.Model(tokens, head(keras.layers.Concatenate()([h, context])))
        >>> generator = CausalLMGenerator(embedding, rnn, attention, head)
        >>> generator.generate([[3, 4, 5], [6]], 4).tokens.shape
        (2, 4)
    """

    is_seq2seq = False

    def __init__(self, embedding, rnn, attention, head, vocabulary_size=None, *, preprocessor=None):
        self.preprocessor = _parts.check_preprocessor(preprocessor, CausalLMPreprocessor)
        if preprocessor is not None:
            vocabulary_size = vocabulary_size or preprocessor.tokenizer.vocabulary_size
        _parts.check_layer("embedding", embedding)
        rnns = _parts.layer_list("rnn", rnn)
        for layer in rnns:
            if not isinstance(layer, keras.layers.RNN) or not layer.return_sequences:
                raise ValueError(
                    "rnn must be one-directional RNN layers (keras.layers.LSTM, GRU, "
                    "SimpleRNN or RNN) with return_sequences=True: a language model reads "
                    f"left to right. Received: rnn={layer!r}"
                )
            if layer.go_backwards:
                raise ValueError(
                    "rnn must read left to right. Received: rnn with go_backwards=True"
                )
        if not isinstance(attention, SequenceAttention):
            raise ValueError(
                "attention must be a keras_attn_rnn.SequenceAttention. "
                f"Received: attention={attention!r}"
            )
        self.embedding = embedding
        self.rnns = rnns
        self.attention = attention
        self.head = _parts.layer_list("head", head)
        self.output_vocab_size = _parts.vocabulary_size(
            "vocabulary_size", embedding, vocabulary_size
        )
        self._step = CausalAttentionStep(
            embedding, [layer.cell for layer in rnns], attention, self._logits
        )

    @property
    def variables(self):
        return _parts.variables([self.embedding, *self.rnns, self.attention, *self.head])

    def _logits(self, hidden, context):
        return _parts.apply(self.head, ops.concatenate([hidden, context], axis=-1))

    def init_cache(self, prompts, max_length, start_id=None):
        """Runs the prompts once and preallocates the attention cache.

        Args:
            prompts: int `(B, P)`, each row a non-empty prefix right-padded
                with 0.
            max_length: number of tokens that will be generated.
            start_id: if set, prepended to every prompt.

        Returns:
            logits: float32 `(B, V)`, after each prompt's last token.
            weights: float32 `(B, L)`, that position's weights over the cache
                (`L = P + max_length`, plus 1 with `start_id`).
            cache: a dict: `states` (per RNN layer), `attention` and `position`
                `(B,)`.
        """
        _parts.check_built(
            [("embedding", self.embedding)]
            + [("rnn", layer) for layer in self.rnns]
            + [("attention", self.attention)]
            + [("head", layer) for layer in self.head]
        )
        prompts = causal_attention_step.with_start(prompts, start_id)
        mask = ops.not_equal(prompts, 0)
        x = self.embedding(prompts)
        states = []
        for layer in self.rnns:
            x, layer_states = _ops.run_cell(layer.cell, x, mask)
            states.append(layer_states)
        return self._step.start(x, mask, states, max_length)

    def next_logits(self, token, cache):
        """One token `(B,)`: `(logits (B, V) float32, weights (B, L) float32, cache)`."""
        return self._step.next_logits(token, cache)

    def generate(self, inputs, max_length=None, **options):
        """`generation.generate(self, inputs, max_length, **options)` for ids; for
        prompt strings (with a `preprocessor`), the generated strings
        (`generation.generate_text`)."""
        return _parts.generate(self, inputs, max_length, options)
