"""`experiments.training.memory`: a run's peak, and the training step let go once it has
trained (its end then has that memory for test scores, samples and the logged model)."""

import gc
import weakref

import keras
import numpy as np
import pytest

from experiments.bench import timing
from experiments.training import memory


def _trained_model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    x, y = np.ones((8, 3), "float32"), np.zeros((8, 1), "float32")
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    return model, x, y


def test_the_released_steps_are_collected_and_the_model_still_serves():
    model, x, y = _trained_model()
    predicted = model.predict(x, verbose=0)
    loss = model.evaluate(x, y, verbose=0)
    steps = [weakref.ref(model.train_function), weakref.ref(model.test_function)]

    memory.release_training_step(model)
    gc.collect()

    assert model.train_function is model.test_function is None
    assert [step() for step in steps] == [None, None]  # nothing else holds the traced steps
    np.testing.assert_array_equal(model.predict(x, verbose=0), predicted)
    assert model.evaluate(x, y, verbose=0) == loss
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # made again where training resumes
    assert model.train_function is not None


def test_the_peak_is_a_high_water_mark_that_a_reset_starts_again():
    memory.reset_peak_memory()  # from here: an earlier peak of this process could hide the block
    before = memory.peak_memory_mb()
    block = np.ones(64 * 2**20, "uint8")  # 64 MB touched
    raised = memory.peak_memory_mb()
    del block
    memory.reset_peak_memory()
    assert raised >= before + 60
    assert memory.peak_memory_mb() < raised - 30  # the freed block no longer counts


def test_give_back_returns_the_freed_pages_a_live_block_kept_resident():
    if timing.rss_bytes() is None:
        pytest.skip("no /proc/self/status: the resident set cannot be read here")
    blocks = [bytearray(4000) for _ in range(25_000)]  # 100 MB of C heap, past pymalloc's sizes
    last = blocks[-1]  # holds the top of the heap: glibc's free cannot shrink it past it
    del blocks
    held = timing.rss_bytes()
    memory.give_back()
    assert timing.rss_bytes() < held - 60 * 2**20, (
        "the 100 MB freed below a live block stayed resident"
    )
    assert len(last) == 4000
