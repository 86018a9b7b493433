"""A `.keras` file of the library's layers loads after `import keras_attn_rnn`, and the
layers guide says so where Keras' own error sends a user (TensorFlow run only: it starts
Python processes)."""

import os
import subprocess
import sys

import keras

from keras_attn_rnn import AttentionDecoder

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_loading_without_importing_the_library_fails_and_the_guide_says_why(tmp_path):
    """Keras imports only its own packages' modules while loading: the layers guide's loading line
    says to import keras_attn_rnn first, and with that import the same file loads."""
    inputs, memory = keras.Input((3, 4)), keras.Input((5, 6))
    model = keras.Model(
        [inputs, memory], AttentionDecoder(keras.layers.LSTMCell(8))([inputs, memory])
    )
    path = str(tmp_path / "decoder.keras")
    model.save(path)
    load = f"import keras; keras.saving.load_model({path!r})"
    bare = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True)
    assert bare.returncode != 0
    assert "AttentionDecoder" in bare.stderr
    imported = subprocess.run(
        [sys.executable, "-c", "import keras_attn_rnn; " + load], capture_output=True, text=True
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    with open(os.path.join(ROOT, "docs", "guides", "layers.md"), encoding="utf-8") as f:
        guide = f.read()
    assert "Could not locate class 'AttentionDecoder'" in guide
    assert "import keras_attn_rnn" in guide
