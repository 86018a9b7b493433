"""What the ready models share: their config plumbing."""

import keras

from keras_attn_rnn.models import _utils


class AttentiveModel(keras.Model):
    """Base of the ready models: each stores every constructor argument under its own name
    (`attention` as the options dict) and lists them in `get_config`."""

    def base_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**_utils.config_with_attention(config))
