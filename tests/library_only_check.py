"""Run by `test_library_only_install.py` inside a venv holding only `keras_attn_rnn`, Keras and JAX.

Imports the library, builds and calls every public layer and the three models,
trains one step, generates with every sampler, saves and reloads a `.keras`
file, and checks that no TensorFlow, MLflow or matplotlib was imported. Prints
`LIBRARY-ONLY-OK` at the end; any failure raises.
"""

import os
import sys
import tempfile

import keras
import numpy as np

import keras_attn_rnn
from keras_attn_rnn import (
    AttentionDecoder,
    AttentionPooling,
    SequenceAttention,
    generation,
    models,
    samplers,
    scores,
)

FORBIDDEN = ("tensorflow", "mlflow", "matplotlib", "experiments")


def main():
    assert keras.backend.backend() == os.environ["KERAS_BACKEND"], keras.backend.backend()
    here = os.path.dirname(os.path.abspath(keras_attn_rnn.__file__))
    assert here.startswith(sys.prefix), f"keras_attn_rnn imported from {here}, not the venv"

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 4)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    for name in scores.names():
        score = scores.get(name, **({"units": 3} if name == "additive" else {}))
        assert tuple(score(x, x).shape) == (2, 5, 5), name
    pooled, weights = AttentionPooling(score="additive")(x, mask=mask, return_attention_scores=True)
    assert tuple(pooled.shape) == (2, 4)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(weights)[1, 3:], 0.0)
    context = SequenceAttention(score="general", window=2)([x, x], use_causal_mask=True)
    assert tuple(context.shape) == (2, 5, 4)
    decoder = AttentionDecoder(keras.layers.GRUCell(3), score="additive", attention_layer_size=4)
    assert tuple(decoder([x, x], mask=[None, mask]).shape) == (2, 5, 4)

    tokens = rng.integers(1, 20, (4, 7)).astype("int32")
    classifier = models.AttentiveClassifier(20, 3, embedding_dim=6, units=5)
    classifier.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    loss = classifier.train_on_batch(tokens, np.array([0, 1, 2, 0]))
    assert np.isfinite(float(loss)), loss
    lm = models.AttentiveLanguageModel(13, embedding_dim=6, units=8)
    seq2seq = models.Seq2Seq(11, 9, embedding_dim=6, units=8, decoder="luong")
    assert tuple(lm(tokens % 13 + 0).shape) == (4, 7, 13)
    for name in samplers.names():
        options = {"k": 3} if name == "top_k" else {"p": 0.9} if name == "top_p" else {}
        sampler = samplers.get(name, **options)
        out = generation.generate(lm, [[3, 4], [5]], 4, sampler=sampler, seed=1)
        assert out.tokens.shape[-1] == 4 and out.tokens.min() > 0, (name, out.tokens)
        out = generation.generate(seq2seq, tokens[:2] % 11, 3, sampler=sampler, start_id=1, seed=1)
        assert out.tokens.shape[-1] == 3, (name, out.tokens)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "classifier.keras")
        classifier.save(path)
        again = keras.saving.load_model(path, safe_mode=True)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(again(tokens)),
            keras.ops.convert_to_numpy(classifier(tokens)),
            atol=1e-6,
        )

    imported = sorted(m for m in FORBIDDEN if m in sys.modules)
    assert not imported, f"the library imported {imported}"
    print("LIBRARY-ONLY-OK", keras.__version__, keras.backend.backend())


if __name__ == "__main__":
    main()
