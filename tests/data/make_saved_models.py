"""Writes `saved_models/`: small `.keras` files and their outputs, for
`tests/test_saved_models.py` (files saved before a change must load after it, with the
same outputs).

Run it only to add a model, at the commit whose files must keep loading (the files in
the repository were saved before the additive core moved into `scores` and `Seq2Seq`'s
decoder kinds became objects, issue 23):

    KERAS_BACKEND=tensorflow python tests/data/make_saved_models.py [NAME ...]

(with names, only those cases are written; the other files and their entries in
`expected.npz` and `weights.json` are kept)
with the oldest Keras `pyproject.toml` allows (the `.venv-oldest` of `make test-oldest`):
Keras loads files an older Keras saved, not newer ones (a 3.15 file names initializer
arguments 3.10 lacks). The files in the repository: Keras 3.10.0, TensorFlow 2.18, git
fbdcee4 (with this script and `saved_models_cases.py` copied in), except `classifier`,
`language_model` and `seq2seq_text`: Keras 3.12.0, TensorFlow 2.18, git 2e48398 (before
the arguments took one spelling per concept, issue 49).
"""

import json
import os
import sys

import keras
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from saved_models_cases import CASES, outputs  # noqa: E402

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "saved_models")


def main(names=()):
    os.makedirs(HERE, exist_ok=True)
    expected, weights = {}, {}
    if names:
        unknown = sorted(set(names) - set(CASES))
        if unknown:
            raise SystemExit(f"no such case: {unknown}; the cases: {sorted(CASES)}")
        with np.load(os.path.join(HERE, "expected.npz")) as kept:
            expected = {key: kept[key] for key in kept.files if key.split("/")[0] not in names}
        with open(os.path.join(HERE, "weights.json")) as f:
            weights = {key: value for key, value in json.load(f).items() if key not in names}
    for name, make in CASES.items():
        if names and name not in names:
            continue
        keras.utils.set_random_seed(1)
        model = make()
        for i, array in enumerate(outputs(model)):
            expected[f"{name}/{i}"] = array
        weights[name] = [f"{w.name} {tuple(w.shape)}" for w in model.weights]
        model.save(os.path.join(HERE, f"{name}.keras"))
    np.savez(os.path.join(HERE, "expected.npz"), **expected)
    with open(os.path.join(HERE, "weights.json"), "w") as f:
        json.dump(weights, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
