"""What the generators share: checking the parts, calling a head, collecting variables."""

import keras
from keras import ops

from keras_attn_rnn import generation
from keras_attn_rnn.preprocessors import Seq2SeqPreprocessor


def check_layer(name, value):
    if not isinstance(value, keras.layers.Layer):
        raise ValueError(
            f"{name} must be a Keras layer or model (the one your model was trained with). "
            f"Received: {name}={value!r}"
        )


def layer_list(name, value):
    """`value` (a layer or a non-empty list of layers) as a list, checked."""
    layers = list(value) if isinstance(value, (list, tuple)) else [value]
    if not layers:
        raise ValueError(f"{name} must be a layer or a non-empty list of layers. Received: []")
    for layer in layers:
        check_layer(name, layer)
    return layers


def check_built(parts):
    """Raises naming the first part (a `(name, layer)` pair) that has no weights yet."""
    for name, layer in parts:
        if not layer.built:
            raise ValueError(
                f"{name} is not built: build or train your model before generating "
                f"(a functional model builds its layers when it is created). "
                f"Received: {name}={layer.name!r} with built=False"
            )


def apply(layers, x):
    for layer in layers:
        x = layer(x)
    return x


def vocabulary_size(name, layer, given):
    """`given`, else the `input_dim` of an `Embedding` layer."""
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or given < 2:
            raise ValueError(f"{name} must be an integer >= 2. Received: {name}={given!r}")
        return given
    if isinstance(layer, keras.layers.Embedding):
        return int(layer.input_dim)
    embeddings = [
        inner for inner in getattr(layer, "layers", []) if isinstance(inner, keras.layers.Embedding)
    ]
    if embeddings:
        return int(embeddings[0].input_dim)
    raise ValueError(
        f"{name} is needed: it cannot be read from an Embedding layer. Received: {name}=None"
    )


def variables(parts):
    """The parts' variables, each once (`jax.jit` passes them in as arguments)."""
    seen, result = set(), []
    for part in parts:
        for variable in part.variables:
            if id(variable) not in seen:
                seen.add(id(variable))
                result.append(variable)
    return result


def check_preprocessor(value, kind):
    """`value` (None, or a preprocessor of class `kind`), checked."""
    if value is not None and not isinstance(value, kind):
        raise ValueError(
            f"preprocessor must be a keras_attn_rnn.preprocessors.{kind.__name__}. "
            f"Received: preprocessor={value!r}"
        )
    return value


def generate(generator, inputs, max_length, options):
    """A generator's `generate`: strings through its preprocessor, ids through
    `generation.generate` (`generation.generate_any`: keras-hub's `stop_token_ids` and
    `strip_prompt` too; with a preprocessor its start and end ids are the defaults, for
    ids as for strings)."""
    return generation.generate_any(generator, generator.preprocessor, inputs, max_length, **options)


def encode(owner, encoder, prompts, start_id, parts):
    """`(memory, memory_mask, states or None)` of the source ids `prompts` through
    `encoder` (its outputs: the memory, or `[memory, *states]`), after checking that
    `start_id` is given and every `(name, layer)` of `parts` is built."""
    if start_id is None:
        raise ValueError(
            f"{owner} needs start_id, the first decoder input. Received: start_id=None"
        )
    check_built(parts)
    source = ops.cast(prompts, "int32")
    encoded = encoder(source, training=False)
    if isinstance(encoded, (list, tuple)):
        memory, states = encoded[0], list(encoded[1:]) or None
    else:
        memory, states = encoded, None
    return memory, ops.not_equal(source, 0), states


def seq2seq_parts(generator, encoder, target_embedding, preprocessor, source_size, target_size):
    """What an encoder-decoder generator sets first: its preprocessor (checked), and its
    vocabulary sizes (given, else the preprocessor's, else the embeddings'), the encoder and
    the target embedding checked."""
    generator.preprocessor = check_preprocessor(preprocessor, Seq2SeqPreprocessor)
    if preprocessor is not None:
        source_size = source_size or preprocessor.source_vocabulary_size
        target_size = target_size or preprocessor.target_vocabulary_size
    check_layer("encoder", encoder)
    check_layer("target_embedding", target_embedding)
    generator.prompt_vocab_size = vocabulary_size("source_vocabulary_size", encoder, source_size)
    generator.output_vocab_size = vocabulary_size(
        "target_vocabulary_size", target_embedding, target_size
    )
