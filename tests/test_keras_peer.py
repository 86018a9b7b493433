"""The plain-Keras peer translator: Keras's own layers only, loads without this library,
decodes through `KerasAttentionGenerator` as re-running it does."""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from helpers import ROOT

from experiments.peers import keras_seq2seq
from keras_attn_rnn.generation import generate

SOURCE = np.array([[3, 4, 5, 0], [6, 7, 0, 0]])
TARGET_IN = np.array([[1, 5, 6, 0], [1, 7, 0, 0]])
TARGET_OUT = np.array([[5, 6, 2, 0], [7, 2, 0, 0]])


def trained():
    keras.utils.set_random_seed(0)
    model = keras_seq2seq.build(20, 15, embedding_dim=8, units=16)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit([SOURCE, TARGET_IN], TARGET_OUT, epochs=2, verbose=0)
    return model


def test_the_peer_is_keras_layers_only_and_decodes_as_rerunning_it():
    model = trained()
    modules = {type(layer).__module__.split(".")[0] for layer in model.layers}
    assert modules == {"keras"}
    result = generate(keras_seq2seq.generator(model), SOURCE, 4, start_id=1)
    for b in range(2):
        target = [1]
        for _ in range(4):
            logits = keras.ops.convert_to_numpy(model([SOURCE[b : b + 1], np.array([target])]))
            logits[0, -1, 0] = -np.inf  # padding is never generated
            target.append(int(np.argmax(logits[0, -1])))
        assert result.tokens[b].tolist() == target[1:]
    # the mask flows through Keras's layers: a padded step costs nothing in the loss
    padded = model.evaluate([SOURCE, TARGET_IN], TARGET_OUT, verbose=0)
    wider = [np.pad(SOURCE, ((0, 0), (0, 3))), np.pad(TARGET_IN, ((0, 0), (0, 3)))]
    np.testing.assert_allclose(
        model.evaluate(wider, np.pad(TARGET_OUT, ((0, 0), (0, 3))), verbose=0), padded, rtol=1e-5
    )


@pytest.mark.slow  # a fresh process
def test_the_peer_loads_in_a_process_that_never_imports_this_library(tmp_path):
    model = trained()
    model.save(tmp_path / "peer.keras")
    expected = keras.ops.convert_to_numpy(model([SOURCE, TARGET_IN]))
    np.save(tmp_path / "expected.npy", expected)
    script = textwrap.dedent(
        f"""
        import sys, numpy as np, keras
        model = keras.saving.load_model({str(tmp_path / "peer.keras")!r}, safe_mode=True)
        got = keras.ops.convert_to_numpy(model([np.array({SOURCE.tolist()}),
                                                np.array({TARGET_IN.tolist()})]))
        np.testing.assert_allclose(got, np.load({str(tmp_path / "expected.npy")!r}), atol=1e-6)
        assert not any(name.startswith("keras_attn_rnn") for name in sys.modules)
        print("LOADED")
        """
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "LOADED" in out.stdout, out.stderr[-2000:]
