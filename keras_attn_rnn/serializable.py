"""How the library's classes and functions are registered with Keras's serialization.

Keras finds a saved custom object by its registered name, `"package>Name"`, and
imports no module of a package outside Keras's own while loading: a `.keras` file
of this library loads after `import keras_attn_rnn` and, without it, fails with
Keras's "Could not locate class" message, which shows the object's
`registered_name`. So the package part is the fix itself, `PACKAGE =
"import keras_attn_rnn"`: the message names it.

Files saved before the library registered under `PACKAGE` name their objects
`"keras_attn_rnn>Name"` (`OLD_PACKAGE`); `register` adds that name to Keras's
custom objects too, so those files keep loading.
"""

import keras

PACKAGE = "import keras_attn_rnn"
OLD_PACKAGE = "keras_attn_rnn"


def register(obj):
    """Registers a class or function as `"import keras_attn_rnn>Name"` (what it is saved
    as) and `"keras_attn_rnn>Name"` (what files saved before name it); returns it."""
    keras.saving.register_keras_serializable(package=PACKAGE)(obj)
    keras.saving.get_custom_objects()[f"{OLD_PACKAGE}>{obj.__name__}"] = obj
    return obj
