import keras
from keras import ops

from keras_attn_rnn import _deprecation
from keras_attn_rnn.generators import _parts
from keras_attn_rnn.stepping import DecoderStep, _ops


@_deprecation.renamed(
    {"source_vocab_size": "source_vocabulary_size", "target_vocab_size": "target_vocabulary_size"},
    old_order=("preprocessor",),
    attributes={},  # the sizes are not kept under their names
)
class KerasAttentionGenerator:
    """Drives an encoder-decoder written with Keras's own layers alone.

    The model it decodes computes, in training (teacher forcing):
    `memory, *state = encoder(source)`,
    `h = decoder_rnn(target_embedding(target_in), initial_state=state)` (a
    `keras.layers.LSTM`, `GRU` or `SimpleRNN` with `return_sequences=True`),
    `context = attention([h, memory])` (`keras.layers.Attention`,
    `AdditiveAttention`, or any layer with that calling convention and
    `return_attention_scores`), `logits = head(concatenate([h, context]))`:
    the Luong arrangement the TensorFlow and Keras tutorials build. Generation
    runs the encoder once, then per token one step of the decoder's cell and one
    attention read over the memory (masked where the source is 0), so a plain
    Keras model decodes with every sampler of this library, beam search
    included, without re-running its prefix.

    Args:
        encoder: a layer or model mapping source ids `(B, S)` to
            `[memory, *initial_state]` (or the memory alone).
        target_embedding: the layer that embeds target ids.
        decoder_rnn: the decoder's RNN layer (trained, so built).
        attention: the attention layer over the memory.
        head: a layer, or a list of layers applied in order, from
            `concatenate([h, context])` to the logits `(B, V)`.
        source_vocabulary_size: by default the preprocessor's, else the
            `input_dim` of the encoder's first `Embedding`.
        target_vocabulary_size: by default the preprocessor's, else the
            `input_dim` of `target_embedding`.
        preprocessor: a `keras_attn_rnn.preprocessors.Seq2SeqPreprocessor`:
            `generate` then takes and returns strings.

    Examples:
        >>> from keras_attn_rnn.generators import KerasAttentionGenerator
        >>> src = keras.Input((None,), dtype="int32")
        >>> tin = keras.Input((None,), dtype="int32")
        >>> memory, h, c = keras.layers.LSTM(8, return_sequences=True, return_state=True)(
        ...     keras.layers.Embedding(20, 8, mask_zero=True)(src))
        >>> embed_target = keras.layers.Embedding(12, 8, mask_zero=True)
        >>> decoder_rnn = keras.layers.LSTM(8, return_sequences=True)
        >>> hidden = decoder_rnn(embed_target(tin), initial_state=[h, c])
        >>> attention = keras.layers.Attention()
        >>> head = keras.layers.Dense(12)
        >>> logits = head(keras.layers.Concatenate()([hidden, attention([hidden, memory])]))
        >>> model = keras.Model([src, tin], logits)  # train it with model.fit
        >>> generator = KerasAttentionGenerator(
        ...     keras.Model(src, [memory, h, c]), embed_target, decoder_rnn, attention, head)
        >>> generator.generate([[3, 4, 5], [6]], 5, start_id=1, eos_id=2).tokens.shape
        (2, 5)
    """

    is_seq2seq = True

    def __init__(
        self,
        encoder,
        target_embedding,
        decoder_rnn,
        attention,
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
        _parts.check_layer("attention", attention)
        if not isinstance(decoder_rnn, keras.layers.RNN) or decoder_rnn.go_backwards:
            raise ValueError(
                "decoder_rnn must be a left-to-right Keras RNN layer (keras.layers.LSTM, GRU, "
                f"SimpleRNN or RNN). Received: decoder_rnn={decoder_rnn!r}"
            )
        self.encoder = encoder
        self.target_embedding = target_embedding
        self.decoder_rnn = decoder_rnn
        self.attention = attention
        self.head = _parts.layer_list("head", head)
        self._step = DecoderStep(target_embedding, self, self._logits)

    @classmethod
    def from_model(
        cls,
        model,
        encoder="encoder",
        target_embedding="target_embedding",
        decoder_rnn="decoder",
        attention="attention",
        head=("attention_layer", "logits"),
        preprocessor=None,
    ):
        """The generator of a functional `model` whose layers carry these names: the source
        is its first input, the encoder is everything from it to the `encoder` layer's
        output (`[memory, *state]`), and `head` names the layers from `[h; context]` to the
        logits, in order. A model saved and loaded again works alike."""
        for name in (encoder, target_embedding, decoder_rnn, attention, *head):
            try:
                model.get_layer(name)
            except ValueError:
                raise ValueError(
                    f"model has no layer named {name!r}: name the generator's parts after your "
                    f"model's layers. Received: a model with the layers "
                    f"{[layer.name for layer in model.layers]}"
                ) from None
        encoder_model = keras.Model(model.inputs[0], model.get_layer(encoder).output)
        return cls(
            encoder_model,
            model.get_layer(target_embedding),
            model.get_layer(decoder_rnn),
            model.get_layer(attention),
            [model.get_layer(name) for name in head],
            preprocessor=preprocessor,
        )

    @property
    def variables(self):
        parts = [self.encoder, self.target_embedding, self.decoder_rnn, self.attention]
        return _parts.variables(parts + self.head)

    # the decoder of `DecoderStep`: a cell step, then attention over the memory

    # the entries of the cache that no step changes (beam search leaves them in place)
    fixed_entries = ("memory", "memory_mask")

    def initial_cache(self, memory, memory_mask, states):
        if states is None:
            batch = ops.shape(memory)[0]
            states = self.decoder_rnn.cell.get_initial_state(batch)
        return {"cell_state": list(states), "memory": memory, "memory_mask": memory_mask}

    def step(self, y, cache):
        hidden, states = _ops.cell_step(self.decoder_rnn.cell, y, cache["cell_state"])
        context, scores = self.attention(
            [ops.expand_dims(hidden, 1), cache["memory"]],
            mask=[None, cache["memory_mask"]],
            return_attention_scores=True,
        )
        features = ops.concatenate([hidden, ops.squeeze(context, 1)], axis=-1)
        alignments = ops.cast(ops.squeeze(scores, 1), "float32")
        return features, alignments, features, {**cache, "cell_state": states}

    def _logits(self, step):
        return _parts.apply(self.head, step.output)

    def init_cache(self, prompts, max_length=None, start_id=None):
        """Encodes the source and runs the first decoder step on `start_id`: `(logits (B, V)
        float32, alignments (B, S) float32, cache)`."""
        memory, mask, states = _parts.encode(
            type(self).__name__, self.encoder, prompts, start_id, self._built_parts()
        )
        return self._step.start(memory, mask, states, start_id)

    def _built_parts(self):
        return [
            ("encoder", self.encoder),
            ("target_embedding", self.target_embedding),
            ("decoder_rnn", self.decoder_rnn),
            ("attention", self.attention),
        ] + [("head", layer) for layer in self.head]

    def next_logits(self, token, cache):
        """One decoder step on `token` `(B,)`: `(logits (B, V), alignments (B, S), cache)`."""
        return self._step.next_logits(token, cache)

    def reorder_cache(self, cache, parents):
        """Beam search's reorder after choosing `parents` int `(B, num_beams)`: the decoder
        state follows the beams, the encoder memory stays where it is."""
        return self._step.reorder_cache(cache, parents)

    def generate(self, inputs, max_length=None, **options):
        """`generation.generate(self, inputs, max_length, **options)` for ids; for source
        strings (with a `preprocessor`), the generated strings."""
        return _parts.generate(self, inputs, max_length, options)
