import keras
from keras import ops

from keras_attn_rnn import _compilation, _deprecation, checks, copying, losses, serializable
from keras_attn_rnn.models import _base, _seq2seq_decoders, _utils
from keras_attn_rnn.models._base import AttentiveModel
from keras_attn_rnn.models._encoder import TokenEncoder
from keras_attn_rnn.preprocessors import Seq2SeqPreprocessor
from keras_attn_rnn.samplers.sampler import IMPOSSIBLE
from keras_attn_rnn.stepping import DecoderStep
from keras_attn_rnn.tokenizers.tokenizer import is_text

DECODERS = tuple(_seq2seq_decoders.KINDS)
_TINY = 1e-38  # below it a float32 probability is denormal; its log is still finite
# The keys every attention dict has; the chosen mechanism's own options (its constructor
# arguments: `filters`, `mode`, `window`, ...) come beside them.
_ATTENTION_DEFAULTS = {
    "mechanism": "content",
    "score": "additive",
    "units": None,
    "normalizer": "softmax",
}


@serializable.register
@_deprecation.renamed(
    {"source_vocab": "source_vocabulary_size", "target_vocab": "target_vocabulary_size"},
    old_order=(
        "embedding_dim",
        "units",
        "rnn",
        "bidirectional",
        "decoder",
        "attention",
        "attention_layer_size",
        "dropout",
        "copy",
        "max_oov",
        "unk_id",
        "preprocessor",
    ),
)
class Seq2Seq(AttentiveModel):
    """Encoder-decoder with attention, in Bahdanau's or Luong's arrangement.

    The encoder embeds the source (id 0 is padding) and runs an RNN
    (optionally bidirectional: its final states are then concatenated and
    projected by `tanh` Dense layers named `bridge_*` to initialise the
    decoder). The decoder starts from the encoder's final state and reads
    the encoder outputs (the memory):

    - `decoder="bahdanau"`: an `AttentionDecoder` with input feeding:
      attention is taken at every step from the new cell output, and the
      previous attention vector is fed back into the cell's input;
    - `decoder="luong"`: a decoder RNN runs over the whole target, then a
      `SequenceAttention` over the memory and `tanh(W [h_t; context_t])`
      (a bias-free Dense named `attention_layer`) — parallel over time in
      training.

    Args:
        source_vocabulary_size: number of source token ids; id 0 is padding (default: the
            preprocessor's source tokenizer's).
        target_vocabulary_size: number of target token ids; id 0 is padding (default: the
            preprocessor's target tokenizer's).
        embedding_dim: size of both embeddings.
        units: RNN size (per direction in a bidirectional encoder).
        rnn: `"lstm"` or `"gru"`.
        bidirectional: bidirectional encoder.
        decoder: `"bahdanau"` or `"luong"`.
        attention: a mechanism name, a `keras_attn_rnn.mechanisms.Mechanism`
            (its configuration), or a dict with `mechanism` (`"content"` (default),
            `"monotonic"`, `"location"`, `"coverage"`, `"local_p"`, `"gmm"`,
            `"dca"`, `"relative_location"` or another name of
            `keras_attn_rnn.mechanisms.names()`), `score` (default
            `"additive"`), `units` (hidden size of `score="additive"`, or of
            the location, coverage, GMM, DCA and relative_location
            mechanisms: default the RNN size), `normalizer` (default
            `"softmax"`), and the chosen mechanism's own options (`mode`,
            `sigmoid_noise`, `score_bias_init`; `filters`, `kernel_size`,
            `location_features`, `cumulative`; `window`; `num_mixtures`,
            `version`; `static_filters`, `static_kernel_size`,
            `dynamic_filters`, `dynamic_kernel_size`, `prior_length`,
            `prior_alpha`, `prior_beta`; `min_width`, `initial_width`).
            `"luong"` takes content attention only.
        attention_layer_size: width of the attention layer `tanh(W [s_t; c_t])`
            whose output feeds the logits; `"auto"` (the default): `units`.
            For `"bahdanau"`, `None` has no attention layer: the context
            alone feeds the logits (tfa's `AttentionWrapper` default, and
            this model's before "auto"; files saved then reload as they
            were), which learns far less: on real English-French pairs it
            reached test chrF 18.9 where `units` reached the figures of
            docs/results/real-text.md. For `"luong"`, `None` means `units`.
        dropout: dropout rate on the embeddings and before the output layer.
        copy: copy attention, the pointer-generator of See et al. (2017): each
            step also computes `p_gen = sigmoid(w · [s_t; c_t; x_t] + b)` (a
            float32 `Dense(1)` named `p_gen` over the decoder output, the
            context and the input embedding) and the model returns
            `p_gen P_vocab + (1 - p_gen) P_copy` over the extended vocabulary
            (see `keras_attn_rnn.copying`). With `decoder="bahdanau"` the
            decoder then outputs `[cell_output; attention]` (its
            `output_attention="both"`), which the output layer reads, as See
            et al.'s `V [s_t; h*_t]`; with `"luong"` `s_t` is the decoder RNN's
            output. Any mechanism.
        max_oov: with `copy`, the number of extended ids beyond `target_vocabulary_size`
            (a static size: the output has `target_vocabulary_size + max_oov` columns).
            Default: `max(0, source_vocabulary_size - target_vocabulary_size)`, so that every
            source id of a shared vocabulary can be copied.
        unk_id: with `copy`, the target id the decoder reads in place of a word
            outside the target vocabulary (See et al. feed `<unk>`): ids `>=
            target_vocabulary_size` in `target_in` become `unk_id`, and so does a copied
            extended id fed back during generation (which needs it when
            `max_oov > 0`). Default None: `target_in` is taken as it is.
        preprocessor: a `keras_attn_rnn.preprocessors.Seq2SeqPreprocessor`,
            saved with the model: `fit` and `evaluate` then take source and
            target strings, and `generate` source strings (it returns strings).

    Call arguments:
        - inputs: `[source (B, S), target_in (B, T)]` int ids, 0-padded
              (teacher forcing: `target_in` is the target shifted right behind
              a start token). With `copy`, optionally a third tensor
              `source_ext (B, S)`: the source in extended target ids (in-vocabulary
              words by their target id, each example's other words `target_vocabulary_size,
              target_vocabulary_size + 1, ...`); without it the source ids are taken to be
              target ids already (one shared vocabulary: `source_ext = source`).
              `target_in` holds target-vocabulary ids, or extended ids when
              `unk_id` is set (they are read as `unk_id`).
        - training: whether dropout is active.
        - return_attention_scores: also return the alignments (and, with
              `copy`, `p_gen`).

    Returns:
        logits: `(B, T, target_vocabulary_size)`; with `copy`, float32 probabilities (not
            logits) `(B, T, target_vocabulary_size + max_oov)`, to train with
            `keras_attn_rnn.losses.PointerGeneratorLoss` on extended target ids.
        alignments: float32 `(B, T, S)`, only when `return_attention_scores=True`.
        p_gen: float32 `(B, T)`, last, only with `copy` and
            `return_attention_scores=True`.

    Padded source positions get attention weight exactly 0 (and are never
    copied); padded target positions are masked in the decoder.

    Generation carries state (see `keras_attn_rnn.generation.generate`):
    `logits, alignments, cache = model.init_cache(source, max_length,
    start_id)` encodes the source, prepares the memory keys once and runs
    the first decoder step; `logits, alignments, cache =
    model.next_logits(token, cache)` is one decoder step. With `copy` the
    step's "logits" are the log of the mixture over the extended vocabulary
    (`-1e30` where it is exactly 0), so every sampler, beam search included,
    decodes over `target_vocabulary_size + max_oov` ids: `generate(model, source, ...,
    source_ext=...)` may emit a source word outside the target vocabulary
    by its extended id.

    Examples:
        >>> from keras_attn_rnn.models import Seq2Seq
        >>> model = Seq2Seq(source_vocabulary_size=20, target_vocabulary_size=12, units=8)
        >>> source = keras.ops.ones((2, 6), "int32")
        >>> target = keras.ops.ones((2, 4), "int32")
        >>> keras.ops.shape(model([source, target]))
        (2, 4, 12)
        >>> copier = Seq2Seq(source_vocabulary_size=20, target_vocabulary_size=12, units=8, copy=True)
        >>> keras.ops.shape(copier([source, target]))  # source ids 12..19 are copy-only
        (2, 4, 20)

    Reference:
        Bahdanau et al., 2015, "Neural Machine Translation by Jointly Learning
        to Align and Translate"; Luong et al., 2015, "Effective Approaches to
        Attention-based Neural Machine Translation".
    """

    is_seq2seq = True
    preprocessor_class = Seq2SeqPreprocessor

    def __init__(
        self,
        source_vocabulary_size=None,
        target_vocabulary_size=None,
        *,
        embedding_dim=64,
        units=64,
        rnn="lstm",
        bidirectional=False,
        decoder="bahdanau",
        attention=None,
        attention_layer_size="auto",
        dropout=0.0,
        copy=False,
        max_oov=None,
        unk_id=None,
        preprocessor=None,
        **kwargs,
    ):
        source_vocabulary_size, target_vocabulary_size = self.sizes(
            preprocessor,
            source_vocabulary_size=(source_vocabulary_size, lambda p: p.source_vocabulary_size),
            target_vocabulary_size=(target_vocabulary_size, lambda p: p.target_vocabulary_size),
        )
        _utils.check_sizes(
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            embedding_dim=embedding_dim,
            units=units,
        )
        checks.check_choice("rnn", rnn, _utils.RNN_KINDS)
        _utils.check_bool("bidirectional", bidirectional)
        checks.check_choice("decoder", decoder, DECODERS)
        if attention_layer_size == "auto":
            attention_layer_size = units
        checks.check_positive_int("attention_layer_size", attention_layer_size)
        checks.check_dropout(dropout)
        _utils.check_bool("copy", copy)
        if max_oov is not None and (
            isinstance(max_oov, bool) or not isinstance(max_oov, int) or max_oov < 0
        ):
            raise ValueError(
                f"max_oov must be None or an integer >= 0. Received: max_oov={max_oov!r}"
            )
        if max_oov is not None and not copy:
            raise ValueError(
                "max_oov sizes the extended vocabulary of copy attention: it needs "
                f"copy=True. Received: max_oov={max_oov!r}, copy={copy!r}"
            )
        if unk_id is not None and not copy:
            raise ValueError(
                "unk_id is the id copy attention reads in place of an extended id: it "
                f"needs copy=True. Received: unk_id={unk_id!r}, copy={copy!r}"
            )
        if unk_id is not None and (
            isinstance(unk_id, bool)
            or not isinstance(unk_id, int)
            or not 0 < unk_id < target_vocabulary_size
        ):
            raise ValueError(
                f"unk_id must be None or a target id in [1, target_vocabulary_size={target_vocabulary_size}). "
                f"Received: unk_id={unk_id!r}"
            )
        options = _utils.attention_options(
            _utils.attention_dict(attention), _ATTENTION_DEFAULTS, mechanism_options=True
        )
        kind = _seq2seq_decoders.KINDS[decoder]
        kind.check_options(options)
        super().__init__(**kwargs)
        self.preprocessor = preprocessor
        self.source_vocabulary_size = source_vocabulary_size
        self.target_vocabulary_size = target_vocabulary_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.rnn = rnn
        self.bidirectional = bidirectional
        self.decoder = decoder
        self.attention = options
        self.attention_layer_size = attention_layer_size
        self.dropout = dropout
        self.copy = copy
        self.max_oov = max_oov
        self.unk_id = unk_id
        self.num_oov = 0  # extended ids beyond target_vocabulary_size
        if copy:
            self.num_oov = (
                max(0, source_vocabulary_size - target_vocabulary_size)
                if max_oov is None
                else max_oov
            )
        self.prompt_vocab_size, self.output_vocab_size = (
            source_vocabulary_size,
            target_vocabulary_size,
        )
        dtype = self.dtype_policy
        self.encoder = TokenEncoder(
            source_vocabulary_size,
            embedding_dim,
            rnn,
            units,
            bidirectional=bidirectional,
            return_state=True,
            dropout=dropout,
            embedding_name="source_embedding",
            dtype=dtype,
            name="encoder",
        )
        self.target_embedding = keras.layers.Embedding(
            target_vocabulary_size,
            embedding_dim,
            mask_zero=True,
            dtype=dtype,
            name="target_embedding",
        )
        self.bridges = []
        if bidirectional:
            self.bridges = [
                keras.layers.Dense(units, activation="tanh", dtype=dtype, name=f"bridge_{part}")
                for part in (("h", "c") if rnn == "lstm" else ("h",))
            ]
        self._decoding = kind(
            rnn, units, options, _ATTENTION_DEFAULTS, attention_layer_size, dtype, copy=copy
        )
        for attribute, layer in self._decoding.layers.items():
            setattr(self, attribute, layer)  # tracked, and saved under this name
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=dtype, name="dropout")
        self.output_layer = keras.layers.Dense(
            target_vocabulary_size, dtype=_utils.logits_dtype(dtype), name="logits"
        )
        if copy:
            self.p_gen = keras.layers.Dense(
                1, activation="sigmoid", dtype=_utils.logits_dtype(dtype), name="p_gen"
            )
        self._step = DecoderStep(
            self.target_embedding,
            self._decoding,
            self._step_logits,
            self._in_vocabulary,
            fixed_entries=("source_ext",),
        )

    def encode(self, source, training=None):
        """`(memory (B, S, d_m), memory_mask (B, S), initial decoder state list)`."""
        memory, mask, (states,) = self.encoder(source, training=training)
        if self.bidirectional:
            half = len(states) // 2
            states = [
                bridge(ops.concatenate([forward, backward], axis=-1))
                for bridge, forward, backward in zip(self.bridges, states[:half], states[half:])
            ]
        return memory, mask, list(states)

    def call(self, inputs, training=None, return_attention_scores=False):
        source, target, source_ext = self._split(inputs)
        if self.copy:
            self._check_extended(source_ext, given=len(inputs) == 3)
        logits, alignments, memory_mask, p_gen = self._forward(source, target, training)
        # the outputs carry the target's padding mask: Keras losses and metrics skip it
        target_mask = ops.not_equal(target, 0)
        if not self.copy:
            logits = _utils.with_mask(logits, target_mask)
            return (logits, alignments) if return_attention_scores else logits
        probabilities = copying.pointer_generator_mixture(
            ops.softmax(ops.cast(logits, "float32"), axis=-1),
            alignments,
            p_gen,
            source_ext,
            self.num_oov,
            source_mask=memory_mask,
        )
        probabilities = _utils.with_mask(probabilities, target_mask)
        if return_attention_scores:
            return probabilities, alignments, ops.squeeze(ops.cast(p_gen, "float32"), -1)
        return probabilities

    def default_loss(self):
        """`PointerGeneratorLoss` for copy attention (its outputs are probabilities), else
        sparse cross-entropy from the logits."""
        return losses.PointerGeneratorLoss() if self.copy else super().default_loss()

    def _predict_inputs(self, x):
        """`predict` scores targets: `(sources, targets)` strings (or a `tf.data.Dataset`
        of such pairs) give the logits of each target given its source, teacher-forced
        (keras-hub's `Seq2SeqLM.predict`); sources alone have nothing to score."""
        pair = (
            isinstance(x, tuple)
            and len(x) == 2
            and all(is_text(part) and not isinstance(part, (str, bytes)) for part in x)
        )
        if pair:
            self._check_preprocessor("x", x)
            return self.preprocessor(x[0], x[1])[0]
        spec = getattr(x, "element_spec", None)
        strings_alone = is_text(x) or (
            spec is not None and not (isinstance(spec, tuple) and len(spec) >= 2)
        )
        if strings_alone and (is_text(x) or _base.is_string_spec(spec)):
            raise ValueError(
                "Seq2Seq.predict scores targets: pass x=(sources, targets) (or a dataset of "
                "(source, target) pairs) for the logits of each target given its source, or "
                "call generate(sources) for the generated strings. "
                f"Received: x={_base.preview(x)}"
            )
        return super()._predict_inputs(x)

    def _forward(self, source, target, training=None):
        """Teacher forcing: `(logits, alignments, memory_mask, p_gen)`; `p_gen` (B, T, 1)
        with `copy`, else None."""
        memory, memory_mask, states = self.encode(source, training)
        target_mask = ops.not_equal(target, 0)
        y = self.dropout_layer(
            self.target_embedding(self._in_vocabulary(target)), training=training
        )
        outputs, alignments, features = self._decoding.decode(
            y, target_mask, memory, memory_mask, states, training
        )
        logits = self.output_layer(self.dropout_layer(outputs, training=training))
        p_gen = None
        if self.copy:
            features = self.dropout_layer(features, training=training)
            p_gen = self.p_gen(ops.concatenate([features, y], axis=-1))
        return logits, alignments, memory_mask, p_gen

    def _check_extended(self, source_ext, given):
        """Refuses extended ids beyond `target_vocabulary_size + max_oov` where their values exist
        here (an eager call; a compiled one cannot raise on values, and its rows still sum
        to 1 over the ids in range)."""
        values = _compilation.concrete_values(source_ext)
        if values is not None:
            copying.check_extended_ids(
                values,
                self.target_vocabulary_size + self.num_oov,
                note="" if given else copying.SOURCE_AS_EXTENDED,
            )

    def _in_vocabulary(self, ids):
        """Target ids with the extended ones (`>= target_vocabulary_size`) read as `unk_id`."""
        if self.unk_id is None:
            return ids
        ids = ops.cast(ids, "int32")
        return ops.where(ops.greater_equal(ids, self.target_vocabulary_size), self.unk_id, ids)

    def _split(self, inputs):
        """`(source, target_in, source_ext)`; `source_ext` is `source` unless given."""
        parts = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if len(parts) == 3 and self.copy:
            source, target, source_ext = parts
            if not _same_shape(source_ext.shape, source.shape):
                raise ValueError(
                    "source_ext must have the source's shape (B, S). Received: "
                    f"source.shape={tuple(source.shape)}, source_ext.shape="
                    f"{tuple(source_ext.shape)}"
                )
            return source, target, source_ext
        if len(parts) != 2:
            expected = "[source, target_in(, source_ext)]" if self.copy else "[source, target_in]"
            hint = "" if self.copy else " (source_ext needs copy=True)"
            raise ValueError(
                f"Seq2Seq expects inputs={expected}{hint}. "
                f"Received: inputs={checks.describe(inputs)}"
            )
        return parts[0], parts[1], parts[0]

    def init_cache(self, prompts, max_length=None, start_id=None):
        """Encodes the source and runs the first decoder step on `start_id`.

        Args:
            prompts: source ids `(B, S)`, 0-padded. With `copy`, also
                `(B, 2, S)`: the source and `source_ext` stacked (what
                `generate(..., source_ext=...)` passes); a `(B, S)` source is
                its own `source_ext`.
            max_length: unused (the cache does not grow); for the common API.
            start_id: the first decoder input, an id of the target vocabulary.

        Returns:
            logits: float32 `(B, V)`, of the first target token (with `copy`:
                log-probabilities `(B, V + max_oov)`).
            alignments: float32 `(B, S)`.
            cache: a dict of tensors with the batch first: the decoder state, the
                memory, its prepared keys and its mask; with monotonic attention
                also `initial_alignments`, where beam search's coverage starts;
                with `copy` also `source_ext`.
        """
        if start_id is None:
            raise ValueError(
                "Seq2Seq.init_cache needs start_id, the first decoder input. "
                "Received: start_id=None"
            )
        source, source_ext = self._generation_source(prompts)
        if not self.built:
            self([source, ops.ones((ops.shape(source)[0], 1), "int32")])
        memory, memory_mask, states = self.encode(source, training=False)
        entries = {"source_ext": source_ext} if self.copy else None  # read by _step_logits
        return self._step.start(memory, memory_mask, states, start_id, entries)

    def _generation_source(self, prompts):
        """`(source, source_ext)` int32 from `(B, S)` or, with `copy`, `(B, 2, S)` prompts."""
        prompts = ops.cast(prompts, "int32")
        if len(prompts.shape) == 3 and self.copy and prompts.shape[1] == 2:
            source, source_ext = prompts[:, 0], prompts[:, 1]
        elif len(prompts.shape) == 2:
            source = source_ext = prompts
        else:
            expected = "(B, S), or (B, 2, S) source and source_ext" if self.copy else "(B, S)"
            raise ValueError(
                f"Seq2Seq generation expects source ids of shape {expected}. "
                f"Received: prompts of shape {tuple(prompts.shape)}"
            )
        if self.copy:
            self._check_extended(source_ext, given=len(prompts.shape) == 3)
        if self.copy and self.num_oov and self.unk_id is None:
            raise ValueError(
                "generation with copy attention feeds a copied extended id back as unk_id, "
                f"which is not set: build the Seq2Seq with unk_id (the target vocabulary's "
                f"unknown-word id). Received: unk_id=None, max_oov={self.num_oov}"
            )
        return source, source_ext

    def next_logits(self, token, cache):
        """One decoder step on `token` `(B,)`: `(logits (B, V), alignments (B, S), cache)`;
        with `copy`, the log of the mixture `(B, V + max_oov)` in place of the logits."""
        return self._step.next_logits(token, cache)

    def reorder_cache(self, cache, parents):
        """Beam search's reorder of the cache after choosing `parents` int `(B, num_beams)`:
        the decoder state follows the beams, the encoder memory stays (the same for every
        beam of a source)."""
        return self._step.reorder_cache(cache, parents)

    def _step_logits(self, step):
        """A decoder step's logits (`step`: a `stepping.DecoderStepOutputs`); with `copy`,
        the log of the mixture."""
        logits = ops.cast(self.output_layer(step.output), "float32")
        if not self.copy:
            return logits
        p_gen = self.p_gen(ops.concatenate([step.features, step.inputs], axis=-1))
        probabilities = copying.pointer_generator_mixture(
            ops.expand_dims(ops.softmax(logits, axis=-1), 1),
            ops.expand_dims(step.alignments, 1),
            ops.expand_dims(p_gen, 1),
            step.cache["source_ext"],
            self.num_oov,
            source_mask=step.cache["memory_mask"],
        )
        probabilities = ops.squeeze(probabilities, 1)
        # log 0 (an extended id this row lacks) is the samplers' impossible score, not -inf
        return ops.where(
            ops.greater(probabilities, 0.0),
            ops.log(ops.maximum(probabilities, _TINY)),
            IMPOSSIBLE,
        )

    def copy_probabilities(self, source, tokens, start_id):
        """`p_gen` behind each generated token: float32 `(B, T)`, 0 at padding.

        `tokens` `(B, T)` are generated ids (extended ids included, 0 after the
        end); the decoder reads `[start_id, tokens[:-1]]` by teacher forcing, the
        same computation as the decoding steps that chose them, so for beam
        search these are each returned beam's own `p_gen`. (`p_gen` reads the
        decoder and the source, not `source_ext`.)
        """
        if not self.copy:
            raise ValueError(
                f"copy_probabilities needs a Seq2Seq with copy=True. Received: copy={self.copy!r}"
            )
        tokens = ops.cast(tokens, "int32")
        start = ops.full((ops.shape(tokens)[0], 1), start_id, dtype="int32")
        # after the end the decoder reads padding (masked); those steps' p_gen is dropped
        target_in = ops.concatenate([start, tokens[:, :-1]], axis=1)
        if not self.built:
            self([source, target_in, ops.zeros_like(source)])
        *_, p_gen = self._forward(ops.cast(source, "int32"), target_in, training=False)
        p_gen = ops.squeeze(ops.cast(p_gen, "float32"), -1)
        return ops.where(ops.equal(tokens, 0), 0.0, p_gen)

    def get_config(self):
        return {
            **self.base_config(),
            "source_vocabulary_size": self.source_vocabulary_size,
            "target_vocabulary_size": self.target_vocabulary_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "rnn": self.rnn,
            "bidirectional": self.bidirectional,
            "decoder": self.decoder,
            "attention": _utils.serialize_attention(self.attention),
            "attention_layer_size": self.attention_layer_size,
            "dropout": self.dropout,
            # only when set: a model without copy attention keeps the config it had before
            **({"copy": True, "max_oov": self.max_oov} if self.copy else {}),
            **({"unk_id": self.unk_id} if self.unk_id is not None else {}),
        }


def _same_shape(a, b):
    """Static shapes that may be equal (an unknown size matches any)."""
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))
