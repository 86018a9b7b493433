import keras

from keras_attn_rnn import _deprecation, checks, serializable
from keras_attn_rnn.layers import AttentionPooling
from keras_attn_rnn.models import _utils
from keras_attn_rnn.models._base import AttentiveModel
from keras_attn_rnn.models._encoder import TokenEncoder
from keras_attn_rnn.preprocessors import ClassifierPreprocessor

_ATTENTION_DEFAULTS = {
    "score": "tanh_dot",
    "query": "learned",
    "units": None,
    "query_value": None,
    "normalizer": "softmax",
}


@serializable.register
@_deprecation.renamed(
    {"vocab_size": "vocabulary_size"},
    old_order=(
        "embedding_dim",
        "rnn",
        "units",
        "bidirectional",
        "num_layers",
        "attention",
        "dropout",
        "preprocessor",
    ),
)
class AttentiveClassifier(AttentiveModel):
    """Sequence classifier: embedding, (bi)RNN stack, attention pooling, logits.

    Args:
        vocabulary_size: number of token ids; id 0 is padding (default: the
            preprocessor's tokenizer's).
        num_classes: number of classes (default: the preprocessor's labels).
        embedding_dim: size of the token embeddings.
        rnn: `"lstm"` or `"gru"`.
        units: RNN size (per direction when bidirectional).
        bidirectional: wrap each RNN layer in `keras.layers.Bidirectional`.
        num_layers: number of stacked RNN layers.
        attention: dict with `score` (default `"tanh_dot"`), `query`
            (`"learned"` or `"fixed"`), `units` (size of the query) and
            `query_value` (the constant query for `query="fixed"`) and
            `normalizer` (default `"softmax"`), passed to `AttentionPooling`.
        dropout: dropout rate on the embeddings, between RNN layers and on
            the pooled vector.
        preprocessor: a `keras_attn_rnn.preprocessors.ClassifierPreprocessor`,
            saved with the model: `fit`, `evaluate` and `predict` then take
            texts (and class names).

    Call arguments:
        - tokens: int `(B, T)`, padded with 0.
        - training: whether dropout is active.
        - return_attention_scores: also return the pooling weights.

    Returns:
        logits: `(B, num_classes)` (no softmax).
        weights: float32 attention weights `(B, T)`, only when
            `return_attention_scores=True`.

    Padding positions (id 0) are masked in the RNNs and get attention weight
    exactly 0.

    Examples:
        >>> from keras_attn_rnn.models import AttentiveClassifier
        >>> model = AttentiveClassifier(vocabulary_size=30, num_classes=3, units=8)
        >>> keras.ops.shape(model(keras.ops.ones((2, 5), "int32")))
        (2, 3)

    Reference:
        Yang et al., 2016, "Hierarchical Attention Networks for Document
        Classification".
    """

    preprocessor_class = ClassifierPreprocessor

    def __init__(
        self,
        vocabulary_size=None,
        num_classes=None,
        *,
        embedding_dim=64,
        rnn="lstm",
        units=64,
        bidirectional=True,
        num_layers=1,
        attention=None,
        dropout=0.0,
        preprocessor=None,
        **kwargs,
    ):
        vocabulary_size, num_classes = self.sizes(
            preprocessor,
            vocabulary_size=(vocabulary_size, lambda p: p.tokenizer.vocabulary_size),
            num_classes=(num_classes, lambda p: None if p.labels is None else len(p.labels)),
        )
        _utils.check_sizes(
            vocabulary_size=vocabulary_size,
            num_classes=num_classes,
            embedding_dim=embedding_dim,
            units=units,
            num_layers=num_layers,
        )
        checks.check_choice("rnn", rnn, _utils.RNN_KINDS)
        _utils.check_bool("bidirectional", bidirectional)
        checks.check_dropout(dropout)
        options = _utils.attention_options(attention, _ATTENTION_DEFAULTS)
        super().__init__(**kwargs)
        self.preprocessor = preprocessor
        self.vocabulary_size = vocabulary_size
        self.num_classes = num_classes
        self.embedding_dim = embedding_dim
        self.rnn = rnn
        self.units = units
        self.bidirectional = bidirectional
        self.num_layers = num_layers
        self.attention = options
        self.dropout = dropout
        dtype = self.dtype_policy
        self.encoder = TokenEncoder(
            vocabulary_size,
            embedding_dim,
            rnn,
            units,
            num_layers,
            bidirectional=bidirectional,
            dropout=dropout,
            dtype=dtype,
            name="encoder",
        )
        self.pooling = AttentionPooling(
            score=options["score"],
            units=options["units"],
            query=options["query"],
            query_value=options["query_value"],
            normalizer=options["normalizer"],
            dtype=dtype,
            name="attention_pooling",
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=dtype, name="dropout")
        self.output_layer = keras.layers.Dense(
            num_classes, dtype=_utils.logits_dtype(dtype), name="logits"
        )

    def call(self, tokens, training=None, return_attention_scores=False):
        x, mask, _ = self.encoder(tokens, training=training)
        pooled, weights = self.pooling(
            x, mask=mask, training=training, return_attention_scores=True
        )
        logits = self.output_layer(self.dropout_layer(pooled, training=training))
        if return_attention_scores:
            return logits, weights
        return logits

    def attention_weights(self, tokens):
        """The float32 attention weights `(B, T)` of `tokens` (inference mode)."""
        return self(tokens, training=False, return_attention_scores=True)[1]

    def get_config(self):
        return {
            **self.base_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_classes": self.num_classes,
            "embedding_dim": self.embedding_dim,
            "rnn": self.rnn,
            "units": self.units,
            "bidirectional": self.bidirectional,
            "num_layers": self.num_layers,
            "attention": _utils.serialize_attention(self.attention),
            "dropout": self.dropout,
        }
