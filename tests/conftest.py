import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import gc  # noqa: E402
import sys  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# JAX compiles every op per new shape, so it gets fewer examples; TF runs the full set.
_EXAMPLES = 10 if os.environ["KERAS_BACKEND"] == "jax" else 25
settings.register_profile("ci", max_examples=_EXAMPLES, deadline=None, derandomize=True)
settings.load_profile("ci")

# The frameworks' import-time objects live for the whole session: keep them out of
# every garbage collection (a full collection over them costs ~1.4 s).
gc.freeze()


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Each test starts from float32, a fixed seed and a fresh name scope."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
    notices = sys.modules.get("experiments.training.notices")
    if notices is not None:  # the data notices a process prints once: each test is one
        notices.said.clear()
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session(free_memory=False)


@pytest.fixture(autouse=True)
def _data_cache(tmp_path_factory, monkeypatch):
    """Each test caches the corpora it reads in a folder of its own (not the user's)."""
    monkeypatch.setenv("ATTN_RNN_DATA_CACHE", str(tmp_path_factory.mktemp("corpora")))
