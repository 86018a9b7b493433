import keras
from keras import ops

from keras_attn_rnn import _deprecation, checks, serializable
from keras_attn_rnn.layers import SequenceAttention
from keras_attn_rnn.models import _utils
from keras_attn_rnn.models._base import AttentiveModel
from keras_attn_rnn.models._encoder import TokenEncoder
from keras_attn_rnn.preprocessors import CausalLMPreprocessor
from keras_attn_rnn.stepping import CausalAttentionStep, causal_attention_step

_ATTENTION_DEFAULTS = {"score": "dot", "units": None, "window": None, "normalizer": "softmax"}


@serializable.register
@_deprecation.renamed(
    {"vocab_size": "vocabulary_size"},
    old_order=(
        "embedding_dim",
        "units",
        "rnn",
        "num_layers",
        "attention",
        "dropout",
        "preprocessor",
    ),
)
class AttentiveLanguageModel(AttentiveModel):
    """RNN language model that attends over its own past hidden states.

    `tokens -> Embedding -> RNN stack -> h`; a causal `SequenceAttention`
    reads `context_t` from `h_1..h_t`; `tanh(W [h_t; context_t])` (a bias-free
    Dense named `attention_layer`) feeds the next-token logits.

    Args:
        vocabulary_size: number of token ids; id 0 is padding (default: the
            preprocessor's tokenizer's).
        embedding_dim: size of the token embeddings.
        units: size of the RNN states (and of the combined vector).
        rnn: `"lstm"` or `"gru"`.
        num_layers: number of stacked RNN layers.
        attention: dict with `score` (any score name or instance, default
            `"dot"`), `units` (hidden size of `score="additive"`) and
            `window` (attend only to the last `window + 1` positions) and
            `normalizer` (default `"softmax"`).
        dropout: dropout rate on the embeddings, between RNN layers and
            before the output layer.
        preprocessor: a `keras_attn_rnn.preprocessors.CausalLMPreprocessor`,
            saved with the model: `fit` then takes texts and `generate` prompts
            as strings (it returns each prompt with its continuation).

    Call arguments:
        - tokens: int `(B, T)`, right-padded with 0.
        - training: whether dropout is active.
        - return_attention_scores: also return the attention weights.

    Returns:
        logits: `(B, T, vocabulary_size)`, for the token after each position.
        weights: float32 `(B, T, T)`, only when `return_attention_scores=True`.

    Padding positions (id 0) are masked in the RNN and are never attended.

    Generation carries state (see `keras_attn_rnn.generation.generate`):
    `logits, weights, cache = model.init_cache(prompts, max_length)` runs the
    prompts once and preallocates the self-attention's cache of
    `(B, P + max_length, .)` hidden states and prepared keys; `logits,
    weights, cache = model.next_logits(token, cache)` is then one RNN step
    plus one cached attention step of `SequenceAttention`.

    Examples:
        >>> from keras_attn_rnn.models import AttentiveLanguageModel
        >>> model = AttentiveLanguageModel(vocabulary_size=30, units=16)
        >>> keras.ops.shape(model(keras.ops.ones((2, 5), "int32")))
        (2, 5, 30)

    Reference:
        Daniluk et al., 2017, "Frustratingly Short Attention Spans in Neural
        Language Modeling"; Cheng et al., 2016, "Long Short-Term
        Memory-Networks for Machine Reading".
    """

    preprocessor_class = CausalLMPreprocessor

    def __init__(
        self,
        vocabulary_size=None,
        *,
        embedding_dim=64,
        units=64,
        rnn="lstm",
        num_layers=1,
        attention=None,
        dropout=0.0,
        preprocessor=None,
        **kwargs,
    ):
        vocabulary_size = self.sizes(
            preprocessor,
            vocabulary_size=(vocabulary_size, lambda p: p.tokenizer.vocabulary_size),
        )
        _utils.check_sizes(
            vocabulary_size=vocabulary_size,
            embedding_dim=embedding_dim,
            units=units,
            num_layers=num_layers,
        )
        checks.check_choice("rnn", rnn, _utils.RNN_KINDS)
        checks.check_dropout(dropout)
        options = _utils.attention_options(attention, _ATTENTION_DEFAULTS)
        checks.check_positive_int("attention['window']", options["window"])
        super().__init__(**kwargs)
        self.preprocessor = preprocessor
        self.vocabulary_size = vocabulary_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.rnn = rnn
        self.num_layers = num_layers
        self.attention = options
        self.dropout = dropout
        self.prompt_vocab_size = self.output_vocab_size = vocabulary_size
        dtype = self.dtype_policy
        self.encoder = TokenEncoder(
            vocabulary_size,
            embedding_dim,
            rnn,
            units,
            num_layers,
            return_state=True,
            dropout=dropout,
            dtype=dtype,
            name="encoder",
        )
        attention_kwargs = {"units": options["units"]} if options["units"] else {}
        self.self_attention = SequenceAttention(
            score=options["score"],
            window=options["window"],
            normalizer=options["normalizer"],
            dtype=dtype,
            name="self_attention",
            **attention_kwargs,
        )
        self.attention_layer = keras.layers.Dense(
            units, activation="tanh", use_bias=False, dtype=dtype, name="attention_layer"
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=dtype, name="dropout")
        self.output_layer = keras.layers.Dense(
            vocabulary_size, dtype=_utils.logits_dtype(dtype), name="logits"
        )
        self._step = CausalAttentionStep(
            self.encoder.embedding,
            [layer.cell for layer in self.encoder.rnn_layers],
            self.self_attention,
            self._head,
        )

    def _forward(self, tokens, training=None):
        x, mask, _ = self.encoder(tokens, training=training)
        context, weights = self.self_attention(
            [x, x],
            mask=[mask, mask],
            use_causal_mask=True,
            return_attention_scores=True,
            training=training,
        )
        return self._head(x, context, training), weights

    def _head(self, hidden, context, training=None):
        combined = self.attention_layer(ops.concatenate([hidden, context], axis=-1))
        return self.output_layer(self.dropout_layer(combined, training=training))

    def call(self, tokens, training=None, return_attention_scores=False):
        logits, weights = self._forward(tokens, training)
        # the logits carry the tokens' padding mask: Keras losses and metrics skip it
        logits = _utils.with_mask(logits, ops.not_equal(tokens, 0))
        if return_attention_scores:
            return logits, weights
        return logits

    def init_cache(self, prompts, max_length, start_id=None):
        """Runs the prompts once and preallocates the decoding cache.

        Args:
            prompts: int `(B, P)`, each row a non-empty prefix right-padded
                with 0 (no 0 inside a prefix).
            max_length: number of tokens that will be generated.
            start_id: if set, prepended to every prompt.

        Returns:
            logits: float32 `(B, V)`, of the token after each prompt.
            weights: float32 `(B, L)`, of that position over the cache
                (`L = P + max_length`, plus 1 with `start_id`).
            cache: a dict: `states` (per RNN layer), `attention` (the
                self-attention's cache of prepared keys and values `(B, L, .)`)
                and `position` `(B,)` (where the next token goes).
        """
        prompts = causal_attention_step.with_start(prompts, start_id)
        if not self.built:
            self(prompts)
        hidden, mask, states = self.encoder(prompts, training=False)
        return self._step.start(hidden, mask, states, max_length)

    def next_logits(self, token, cache):
        """One decoding step: feeds `token` `(B,)` and attends over the cache.

        Returns:
            `(logits (B, V) float32, weights (B, L) float32, new cache)`.
        """
        return self._step.next_logits(token, cache)

    def get_config(self):
        return {
            **self.base_config(),
            "vocabulary_size": self.vocabulary_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "rnn": self.rnn,
            "num_layers": self.num_layers,
            "attention": _utils.serialize_attention(self.attention),
            "dropout": self.dropout,
        }
