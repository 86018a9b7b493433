"""The token encoder the ready models share: embedding, then a stack of RNN layers."""

import keras
from keras import ops

from keras_attn_rnn.models import _utils


class TokenEncoder(keras.layers.Layer):
    """`tokens -> Embedding(mask_zero) -> dropout -> RNN -> (dropout -> RNN)...`.

    Args:
        vocabulary_size, embedding_dim: of the embedding (id 0 is padding).
        rnn: `"lstm"` or `"gru"`.
        units: RNN size (per direction when bidirectional).
        num_layers: number of stacked RNN layers.
        bidirectional: wrap each RNN layer in `keras.layers.Bidirectional`.
        return_state: also return each layer's final states.
        dropout: rate on the embeddings and between RNN layers.
        embedding_name: name of the embedding layer.

    Call returns `(sequence (B, T, d), mask (B, T), states)`: `states` is one
    list per layer (forward then backward states when bidirectional), or
    `[]` without `return_state`.
    """

    def __init__(
        self,
        vocabulary_size,
        embedding_dim,
        rnn,
        units,
        num_layers=1,
        bidirectional=False,
        return_state=False,
        dropout=0.0,
        embedding_name="embedding",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.return_state = return_state
        dtype = self.dtype_policy
        self.embedding = keras.layers.Embedding(
            vocabulary_size, embedding_dim, mask_zero=True, dtype=dtype, name=embedding_name
        )
        self.rnn_layers = []
        for i in range(num_layers):
            layer = _utils.make_rnn(
                rnn, units, f"rnn_{i}", dtype, return_sequences=True, return_state=return_state
            )
            if bidirectional:
                layer = keras.layers.Bidirectional(layer, dtype=dtype, name=f"bidirectional_{i}")
            self.rnn_layers.append(layer)
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=dtype, name="dropout")

    def call(self, tokens, training=None):
        mask = ops.not_equal(tokens, 0)
        x = self.dropout_layer(self.embedding(tokens), training=training)
        states = []
        for i, layer in enumerate(self.rnn_layers):
            if i:
                x = self.dropout_layer(x, training=training)
            x = layer(x, mask=mask, training=training)
            if self.return_state:
                x, *layer_states = x
                states.append(list(layer_states))
        return x, mask, states

    def compute_mask(self, tokens, mask=None):
        return None
