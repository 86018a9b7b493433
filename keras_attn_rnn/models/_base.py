"""What the ready models share: their config plumbing, and strings in and out through an
attached preprocessor (`fit`, `evaluate`, `predict`, `generate`) with `compile` defaults,
as keras-hub's tasks."""

import keras

from keras_attn_rnn import generation, samplers
from keras_attn_rnn.models import _utils
from keras_attn_rnn.tokenizers.tokenizer import is_text


class AttentiveModel(keras.Model):
    """Base of the ready models: each stores every constructor argument under its own name
    (`attention` as the options dict) and lists them in `get_config`.

    With a `preprocessor` (`keras_attn_rnn.preprocessors`), `fit`, `evaluate` and
    `predict` also take strings (and `validation_data` of strings), which it turns into
    the model's id arrays first; `generate` takes strings and returns strings.
    `compile()` chooses the loss and metrics (`"auto"`) and the default sampler.
    """

    # A subclass sets: what `preprocessor=` must be, and whether it generates.
    preprocessor_class = None

    def base_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }
        if self.preprocessor is not None:  # only when set: older configs stay as they were
            config["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
        return config

    @classmethod
    def from_config(cls, config):
        config = _utils.config_with_attention(config)
        if isinstance(config.get("preprocessor"), dict):
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)

    @classmethod
    def sizes(cls, preprocessor, **sizes):
        """The model's vocabulary (and class) sizes: each given one, else the
        preprocessor's (`sizes` maps an argument to `(value, a function of the
        preprocessor giving its value)`); raises naming the argument when a size is
        missing or disagrees."""
        if preprocessor is not None and not isinstance(preprocessor, cls.preprocessor_class):
            raise ValueError(
                f"preprocessor must be a keras_attn_rnn.preprocessors."
                f"{cls.preprocessor_class.__name__} for {cls.__name__}. "
                f"Received: preprocessor={preprocessor!r}"
            )
        resolved = {}
        for name, (value, read) in sizes.items():
            own = None if preprocessor is None else read(preprocessor)
            if preprocessor is not None and value is not None and own is not None and value != own:
                raise ValueError(
                    f"{name} must match the preprocessor's ({own}) or be left out. "
                    f"Received: {name}={value!r}"
                )
            resolved[name] = value if value is not None else own
            if resolved[name] is None:
                raise ValueError(
                    f"{name} is required (or a preprocessor that gives it). Received: {name}=None"
                )
        return resolved.values() if len(resolved) > 1 else resolved[name]

    # ---------------------------------------------------------------- compile

    def default_loss(self):
        """The loss `compile(loss="auto")` picks: sparse cross-entropy from the logits (the
        outputs carry their padding mask, so padded steps are skipped)."""
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def compile(self, optimizer="adam", loss="auto", metrics="auto", *, sampler="greedy", **kwargs):
        """`keras.Model.compile` with defaults: `loss="auto"` picks the model's loss (sparse
        cross-entropy from logits; `PointerGeneratorLoss` for a copying `Seq2Seq`),
        `metrics="auto"` token (or class) accuracy with the auto loss (none with a
        loss of your own), and `sampler` (a name of
        `keras_attn_rnn.samplers.names()`, or a `Sampler`) is what `generate` uses by
        default."""
        self.sampler = samplers.get(sampler)
        auto_loss = isinstance(loss, str) and loss == "auto"
        if isinstance(metrics, str) and metrics == "auto":  # with your own loss: none
            metrics = self.default_metrics() if auto_loss else None
        if auto_loss:
            loss = self.default_loss()
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_compile_config(self):
        config = super().get_compile_config()
        if config is not None and getattr(self, "sampler", None) is not None:
            config = {**config, "sampler": samplers.serialize(self.sampler)}
        return config

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved (Keras's own, for this `compile`)."""
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    # ---------------------------------------------------------------- strings in

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """`(x, y, sample_weight)` with strings turned into ids by the preprocessor; ids (or
        anything else) pass through unchanged."""
        if self.preprocessor is None or not is_text(x):
            return x, y, sample_weight
        return keras.utils.unpack_x_y_sample_weight(self.preprocessor(x, y, sample_weight))

    def fit(self, x=None, y=None, *args, sample_weight=None, validation_data=None, **kwargs):
        x, y, sample_weight = self.preprocess_samples(x, y, sample_weight)
        if validation_data is not None and self.preprocessor is not None:
            validation_data = self._preprocess_validation(validation_data)
        return super().fit(
            x, y, *args, sample_weight=sample_weight, validation_data=validation_data, **kwargs
        )

    def evaluate(self, x=None, y=None, *args, sample_weight=None, **kwargs):
        x, y, sample_weight = self.preprocess_samples(x, y, sample_weight)
        return super().evaluate(x, y, *args, sample_weight=sample_weight, **kwargs)

    def predict(self, x, *args, **kwargs):
        x, _, _ = self.preprocess_samples(x)
        return super().predict(x, *args, **kwargs)

    def _preprocess_validation(self, data):
        if isinstance(data, tuple) and data and is_text(data[0]):
            x, y, sample_weight = self.preprocess_samples(*data)
            return (x, y) if sample_weight is None else (x, y, sample_weight)
        return data

    # ---------------------------------------------------------------- generation

    def generate(self, inputs, max_length=None, sampler=None, **options):
        """Generates from `inputs`: strings (with a preprocessor) give strings back; ids
        give the `generation.GenerationResult`.

        Args:
            inputs: a string or a list of strings (the sources of a `Seq2Seq`, the
                prompts of a language model: `generation.generate_text`), or int ids
                as `generation.generate` takes them.
            max_length: the most tokens generated; default the preprocessor's target
                (or sequence) length plus room for `</s>`, else 64.
            sampler: a name or a `Sampler`; default the one given to `compile`, else
                greedy.
            **options: `generation.generate`'s other arguments (`seed`, `eos_id`,
                `start_id`, `min_length`, `jit_compile`, ...); with strings,
                `start_id` and `eos_id` default to the tokenizer's.
        """
        sampler = sampler if sampler is not None else getattr(self, "sampler", None) or "greedy"
        if is_text(inputs):
            return generation.generate_text(
                self, self.preprocessor, inputs, max_length, sampler=sampler, **options
            )
        return generation.generate(self, inputs, max_length or 64, sampler=sampler, **options)
