"""`.keras` files saved by an earlier commit load with the code under test and give the
same outputs: weights keep their names, shapes and order (`tests/data/saved_models/`,
written by `tests/data/make_saved_models.py`)."""

import json
import os
import warnings

import keras
import numpy as np
import pytest
from saved_models_cases import CASES, outputs

pytestmark = pytest.mark.layers

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "saved_models")


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_model_saved_before_loads_with_the_same_outputs(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Keras warns when a saved weight is left unloaded
        model = keras.saving.load_model(os.path.join(HERE, f"{name}.keras"))
    expected = np.load(os.path.join(HERE, "expected.npz"))
    found = outputs(model)
    assert len(found) == len([key for key in expected.files if key.startswith(f"{name}/")])
    for i, array in enumerate(found):
        # saved on TensorFlow; the other backends agree to float32 rounding
        np.testing.assert_allclose(array, expected[f"{name}/{i}"], atol=1e-5, rtol=1e-5)
    # the loaded model and a fresh one list their weights as the saving commit did
    with open(os.path.join(HERE, "weights.json")) as f:
        saved = json.load(f)[name]
    fresh = CASES[name]()
    outputs(fresh)
    for built in (model, fresh):
        assert [f"{w.name} {tuple(w.shape)}" for w in built.weights] == saved
