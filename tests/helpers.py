"""Shared test utilities: numeric conversion, config round trip, save/load checks."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def to_numpy(value):
    if isinstance(value, (list, tuple)):
        return [to_numpy(v) for v in value]
    return np.asarray(keras.ops.convert_to_numpy(value))


def assert_config_round_trip(layer):
    """`from_config(get_config())` rebuilds a layer with the same config."""
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    json.dumps(keras.saving.serialize_keras_object(layer))  # the config is JSON-able
    return clone


def _predict(model, inputs, call_kwargs):
    """`model.predict` (one compiled graph) unless call arguments are needed."""
    if call_kwargs:
        return model(inputs, **call_kwargs)
    return model.predict(inputs, verbose=0)


def save_and_reload_in_subprocess(model, inputs, tmp_path, call_kwargs=None, atol=0.0):
    """Saves `model` as `.keras`, loads it in a fresh Python process (safe mode)
    and asserts that its outputs on `inputs` equal the in-process outputs.

    `inputs` is an array or a list of arrays; outputs may be nested.
    """
    call_kwargs = call_kwargs or {}
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    inputs_list = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    expected = keras.tree.flatten(to_numpy(_predict(model, inputs, call_kwargs)))
    np.savez(
        os.path.join(tmp_path, "io.npz"),
        **{f"in{i}": np.asarray(x) for i, x in enumerate(inputs_list)},
        **{f"out{i}": y for i, y in enumerate(expected)},
    )
    script = textwrap.dedent(
        f"""
        import sys, numpy as np, keras
        import keras_attn_rnn  # registers the custom objects
        data = np.load({os.path.join(tmp_path, "io.npz")!r})
        model = keras.saving.load_model({path!r}, safe_mode=True)
        ins = [data[f"in{{i}}"] for i in range({len(inputs_list)})]
        ins = ins if {isinstance(inputs, (list, tuple))} else ins[0]
        kwargs = {call_kwargs!r}
        outs = model(ins, **kwargs) if kwargs else model.predict(ins, verbose=0)
        outs = keras.tree.flatten(outs)
        outs = [np.asarray(keras.ops.convert_to_numpy(o)) for o in outs]
        assert len(outs) == {len(expected)}, len(outs)
        for i, o in enumerate(outs):
            np.testing.assert_allclose(o, data[f"out{{i}}"], atol={atol}, rtol=0)
        print("RELOAD-OK")
        """
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0 and "RELOAD-OK" in result.stdout, result.stderr[-3000:]
    return expected


def gradient(fn, x):
    """`(d sum(fn(x) * w) / dx, w)` for a fixed random `w`, on the current backend."""
    backend = keras.backend.backend()
    w = np.random.default_rng(0).normal(size=np.shape(to_numpy(fn(x)))).astype(x.dtype)

    def objective(value):
        return keras.ops.sum(fn(value) * keras.ops.convert_to_tensor(w, value.dtype))

    if backend == "tensorflow":
        import tensorflow as tf

        value = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(value)
            out = objective(value)
        return to_numpy(tape.gradient(out, value)), w
    if backend == "jax":
        import jax

        return np.asarray(jax.grad(objective)(keras.ops.convert_to_tensor(x))), w
    import torch

    value = torch.tensor(x, requires_grad=True)
    objective(value).backward()
    return value.grad.numpy(), w


def pytest_with_plugin(tmp_path, plugin_source, *args):
    """pytest on `args` (test ids, options) in a fresh process from the project root, after
    it imports `plugin_source` as a pytest plugin (one that registers a new member, say;
    `tests/` is importable); return the completed process."""
    plugin = os.path.join(str(tmp_path), "suite_plugin.py")
    with open(plugin, "w", encoding="utf-8") as handle:
        handle.write(textwrap.dedent(plugin_source))
    path = [str(tmp_path), os.path.join(ROOT, "tests"), ROOT, os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0"]
    return subprocess.run(
        [*command, "-p", "suite_plugin", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def exported_subclasses(module, base):
    """The subclasses of `base` (itself left out) that `module` exports in its `__all__`."""
    members = [getattr(module, name) for name in module.__all__]
    return {m for m in members if isinstance(m, type) and issubclass(m, base) and m is not base}
