"""What the ready models share: their config plumbing, and strings in and out through an
attached preprocessor (`fit`, `evaluate`, `predict`, `generate`) with `compile` defaults,
as keras-hub's tasks."""

import keras

from keras_attn_rnn import _compilation, generation, samplers
from keras_attn_rnn.models import _utils
from keras_attn_rnn.tokenizers.tokenizer import is_text


class AttentiveModel(keras.Model):
    """Base of the ready models: each stores every constructor argument under its own name
    (`attention` as the options dict) and lists them in `get_config`.

    With a `preprocessor` (`keras_attn_rnn.preprocessors`), `fit`, `evaluate` and
    `predict` also take strings (lists, NumPy string arrays, batched `tf.data` datasets
    of strings, and `validation_data` of strings), which it turns into the model's id
    arrays first; `predict` returns the logits of those ids (keras-hub's tasks do the
    same). `generate` takes strings and returns strings. Without a preprocessor, strings
    raise, naming the fix. `compile()` chooses the loss and metrics (`"auto"`) and the
    default sampler.
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

    def compile(self, optimizer="adam", loss="auto", metrics="auto", *, sampler=None, **kwargs):
        """`keras.Model.compile` with defaults: `loss="auto"` picks the model's loss (sparse
        cross-entropy from logits; `PointerGeneratorLoss` for a copying `Seq2Seq`),
        `metrics="auto"` token (or class) accuracy with the auto loss (none with a
        loss of your own), and `sampler` (a name of
        `keras_attn_rnn.samplers.names()`, or a `Sampler`; default greedy) is what
        `generate` uses by default. A model that does not generate
        (`AttentiveClassifier`) refuses a sampler."""
        if sampler is not None and not self.generates():
            raise ValueError(
                f"sampler is what generate decodes with, and {type(self).__name__} does not "
                f"generate: leave sampler out. Received: sampler={sampler!r}"
            )
        self.sampler = samplers.get("greedy" if sampler is None else sampler)
        if not self.generates():
            self.sampler = None
        auto_loss = isinstance(loss, str) and loss == "auto"
        if isinstance(metrics, str) and metrics == "auto":  # with your own loss: none
            metrics = self.default_metrics() if auto_loss else None
        if auto_loss:
            loss = self.default_loss()
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    @classmethod
    def generates(cls):
        """Whether the model generates (has the step API of `keras_attn_rnn.generation`)."""
        return hasattr(cls, "init_cache") and hasattr(cls, "next_logits")

    def get_compile_config(self):
        config = super().get_compile_config()
        if config is not None and getattr(self, "sampler", None) is not None:
            config = {**config, "sampler": samplers.serialize(self.sampler)}
        return config

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved (Keras's own, for this `compile`)."""
        config = keras.saving.deserialize_keras_object(config)
        if not self.generates():  # a classifier saved when compile gave it a sampler
            config.pop("sampler", None)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    # ---------------------------------------------------------------- strings in

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """`(x, y, sample_weight)` with strings turned into ids by the preprocessor; a
        `tf.data.Dataset` of strings is mapped through it; ids (or anything else) pass
        through unchanged. Strings without a preprocessor raise."""
        if _is_dataset(x):
            return self._preprocess_dataset(x), y, sample_weight
        if not is_text(x):
            return x, y, sample_weight
        self._check_preprocessor("x", x)
        return keras.utils.unpack_x_y_sample_weight(self.preprocessor(x, y, sample_weight))

    def _check_preprocessor(self, name, value):
        if self.preprocessor is None:
            raise ValueError(
                f"{type(self).__name__} takes strings only with a preprocessor: give the model "
                f"preprocessor=keras_attn_rnn.preprocessors.{self.preprocessor_class.__name__}"
                f"(...), or pass token ids. Received: {name}={preview(value)}"
            )

    def _preprocess_dataset(self, dataset):
        """A `tf.data.Dataset` whose elements hold strings (`x`, `(x,)`, `(x, y)` or
        `(x, y, sample_weight)`, batched), mapped through the preprocessor; any other
        dataset unchanged."""
        spec = dataset.element_spec
        parts = spec if isinstance(spec, tuple) else (spec,)
        if not any(is_string_spec(part) for part in keras.tree.flatten(parts)):
            return dataset
        self._check_preprocessor("x", dataset)
        for part in keras.tree.flatten(parts):
            if is_string_spec(part) and part.shape.rank != 1:
                raise ValueError(
                    "a dataset of strings must be batched (elements of shape (batch,)): "
                    f"call dataset.batch(n) first. Received: an element spec {spec}"
                )

        def preprocess(*arrays):
            return keras.utils.unpack_x_y_sample_weight(self.preprocessor(*arrays))

        return _compilation.map_dataset(dataset, preprocess)

    def _predict_inputs(self, x):
        """What `predict` feeds the model: `x` itself, or the preprocessor's ids of
        strings (a subclass may add pairs: `Seq2Seq`)."""
        x, _, _ = self.preprocess_samples(x)
        return x

    def fit(self, x=None, y=None, *args, sample_weight=None, validation_data=None, **kwargs):
        """`keras.Model.fit`; with a preprocessor, `x` and `y` (and `validation_data`'s)
        may also be strings, e.g. `model.fit(sources, targets)`."""
        x, y, sample_weight = self.preprocess_samples(x, y, sample_weight)
        if validation_data is not None:
            validation_data = self._preprocess_validation(validation_data)
        return super().fit(
            x, y, *args, sample_weight=sample_weight, validation_data=validation_data, **kwargs
        )

    def evaluate(self, x=None, y=None, *args, sample_weight=None, **kwargs):
        """`keras.Model.evaluate`; with a preprocessor, `x` and `y` may be strings."""
        x, y, sample_weight = self.preprocess_samples(x, y, sample_weight)
        return super().evaluate(x, y, *args, sample_weight=sample_weight, **kwargs)

    def predict(self, x, *args, **kwargs):
        """`keras.Model.predict`, with strings (or a `tf.data.Dataset` of strings) through
        the preprocessor: the logits of the preprocessed inputs, as keras-hub's tasks."""
        return super().predict(self._predict_inputs(x), *args, **kwargs)

    def _preprocess_validation(self, data):
        if _is_dataset(data):
            return self._preprocess_dataset(data)
        if isinstance(data, tuple) and data and is_text(data[0]):
            x, y, sample_weight = self.preprocess_samples(*data)
            return (x, y) if sample_weight is None else (x, y, sample_weight)
        return data

    # ---------------------------------------------------------------- generation

    def generate(
        self,
        inputs,
        max_length=None,
        sampler=None,
        *,
        stop_token_ids="auto",
        strip_prompt=False,
        **options,
    ):
        """Generates from `inputs`: strings (with a preprocessor) give strings back; ids
        give the `generation.GenerationResult`.

        Args:
            inputs: a string or a list of strings (the sources of a `Seq2Seq`, the
                prompts of a language model: `generation.generate_text`; bytes are
                read as UTF-8), or int ids as `generation.generate` takes them.
            max_length: the most tokens generated (an int >= 1); default the
                preprocessor's target (or sequence) length plus room for `</s>`,
                else 64.
            sampler: a name or a `Sampler`; default the one given to `compile`, else
                greedy.
            stop_token_ids: keras-hub's: `"auto"` stops at the preprocessor's end id
                (or `eos_id`), `None` never stops early, one id stops there.
            strip_prompt: a language model returns each prompt with its continuation,
                or with True the continuation alone (strings only).
            **options: `generation.generate`'s other arguments (`seed`, `eos_id`,
                `start_id`, `min_length`, `jit_compile`, ...); with a preprocessor,
                `start_id` and `eos_id` default to its tokenizer's, for ids too.
        """
        if not self.generates():
            raise ValueError(
                f"{type(self).__name__} does not generate: it has no decoder (predict gives "
                f"its class logits). Received: inputs={preview(inputs)}"
            )
        sampler = sampler if sampler is not None else getattr(self, "sampler", None) or "greedy"
        return generation.generate_any(
            self,
            self.preprocessor,
            inputs,
            max_length,
            stop_token_ids=stop_token_ids,
            strip_prompt=strip_prompt,
            default_max_length=64,
            sampler=sampler,
            **options,
        )


def _is_dataset(value):
    """True for a `tf.data.Dataset` (told by its `element_spec`, without importing
    TensorFlow)."""
    return hasattr(value, "element_spec") and hasattr(value, "map")


def is_string_spec(spec):
    return getattr(getattr(spec, "dtype", None), "name", None) == "string"


def preview(value, limit=80):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
