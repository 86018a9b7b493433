from keras_attn_rnn import _deprecation
from keras_attn_rnn.generators import _parts
from keras_attn_rnn.layers import AttentionDecoder
from keras_attn_rnn.stepping import AttentionDecoderStep, DecoderStep


@_deprecation.renamed(
    {"source_vocab_size": "source_vocabulary_size", "target_vocab_size": "target_vocabulary_size"},
    old_order=("preprocessor",),
    attributes={},  # the sizes are not kept under their names
)
class Seq2SeqGenerator:
    """Drives your own encoder-decoder built around an `AttentionDecoder`.

    The model it decodes computes, in training (teacher forcing):
    `memory, *state = encoder(source)`,
    `outputs = decoder([target_embedding(target_in), memory],
    initial_state=state)` (the memory masked where `source` is 0),
    `logits = head(outputs)`. Generation runs the encoder once, then per
    token one `decoder.step` (one cell step plus one attention read over
    keys prepared once) and the head.

    Args:
        encoder: a Keras layer or model mapping source ids `(B, S)` to the
            memory `(B, S, d_m)`, or to `[memory, *initial_state]` (the
            decoder cell's initial state, e.g. an LSTM's `[h, c]`). Id 0 is
            padding: those memory positions are masked.
        target_embedding: the layer that embeds target ids (an `Embedding`).
        decoder: the `AttentionDecoder` (trained, so built).
        head: a layer, or a list of layers applied in order, from the
            decoder's output to the logits `(B, V)`.
        source_vocabulary_size: the source vocabulary; by default the
            preprocessor's, else the `input_dim` of the encoder's first
            `Embedding`.
        target_vocabulary_size: the target vocabulary; by default the
            preprocessor's, else the `input_dim` of `target_embedding`.
        preprocessor: a `keras_attn_rnn.preprocessors.Seq2SeqPreprocessor` (the
            one your model was trained through): `generate` then takes and
            returns strings.

    Generation: `generator.generate(source, max_length, start_id=...,
    eos_id=..., sampler=...)` is `generation.generate(generator, ...)`: any
    sampler, beam search included (the decoder state is tiled and reordered
    with the beams). With several mechanisms, `attention` reports the first
    one's alignments.

    Examples:
        >>> from keras_attn_rnn import AttentionDecoder
        >>> from keras_attn_rnn.generators import Seq2SeqGenerator
        >>> src = keras.Input((None,), dtype="int32")
        >>> tin = keras.Input((None,), dtype="int32")
        >>> embed_source = keras.layers.Embedding(20, 8, mask_zero=True)
        >>> memory, h, c = keras.layers.LSTM(16, return_sequences=True, return_state=True)(
        ...     embed_source(src))
        >>> embed_target = keras.layers.Embedding(12, 8, mask_zero=True)
        >>> decoder = AttentionDecoder(keras.layers.LSTMCell(16), attention_layer_size=16)
        >>> head = keras.layers.Dense(12)
        >>> logits = head(decoder([embed_target(tin), memory], initial_state=[h, c]))
        >>> model = keras.Model([src, tin], logits)  # train it with model.fit
        >>> encoder = keras.Model(src, [memory, h, c])  # the same layers
        >>> generator = Seq2SeqGenerator(encoder, embed_target, decoder, head)
        >>> generator.generate([[3, 4, 5], [6, 7]], 5, start_id=1, eos_id=2).tokens.shape
        (2, 5)
    """

    is_seq2seq = True

    def __init__(
        self,
        encoder,
        target_embedding,
        decoder,
        head,
        source_vocabulary_size=None,
        target_vocabulary_size=None,
        *,
        preprocessor=None,
    ):
        _parts.seq2seq_parts(
            self,
            encoder,
            target_embedding,
            preprocessor,
            source_vocabulary_size,
            target_vocabulary_size,
        )
        if not isinstance(decoder, AttentionDecoder):
            raise ValueError(
                f"decoder must be a keras_attn_rnn.AttentionDecoder. Received: decoder={decoder!r}"
            )
        self.encoder = encoder
        self.target_embedding = target_embedding
        self.decoder = decoder
        self.head = _parts.layer_list("head", head)
        self._step = DecoderStep(target_embedding, AttentionDecoderStep(decoder), self._logits)

    @property
    def variables(self):
        return _parts.variables([self.encoder, self.target_embedding, self.decoder, *self.head])

    def _logits(self, step):
        return _parts.apply(self.head, step.output)

    def init_cache(self, prompts, max_length=None, start_id=None):
        """Encodes the source and runs the first decoder step on `start_id`.

        Returns:
            logits: float32 `(B, V)`, of the first target token.
            alignments: float32 `(B, S)`.
            cache: the decoder's step state (a dict, batch first).
        """
        memory, mask, states = _parts.encode(
            type(self).__name__,
            self.encoder,
            prompts,
            start_id,
            [("encoder", self.encoder), ("target_embedding", self.target_embedding)]
            + [("decoder", self.decoder)]
            + [("head", layer) for layer in self.head],
        )
        return self._step.start(memory, mask, states, start_id)

    def next_logits(self, token, cache):
        """One decoder step on `token` `(B,)`: `(logits (B, V), alignments (B, S), cache)`."""
        return self._step.next_logits(token, cache)

    def reorder_cache(self, cache, parents):
        """Beam search's reorder after choosing `parents` int `(B, num_beams)`: the decoder
        state follows the beams, the encoder memory stays where it is."""
        return self._step.reorder_cache(cache, parents)

    def generate(self, inputs, max_length=None, **options):
        """`generation.generate(self, inputs, max_length, **options)` for ids; for
        source strings (with a `preprocessor`), the generated strings
        (`generation.generate_text`)."""
        return _parts.generate(self, inputs, max_length, options)
