"""`pip install .` (no extras) plus JAX, in a fresh venv without TensorFlow or MLflow.

The library needs only Keras and one backend: the venv gets this checkout and
`jax` (through the dev extra's `uv` when it is installed, else `venv` + pip),
and `library_only_check.py` then builds every layer and model there and
generates.
"""

import os
import shutil
import subprocess
import sys
import venv

import pytest
from helpers import ROOT

pytestmark = pytest.mark.slow


def _run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, args))}\n{result.stderr[-4000:]}"
    return result


def test_the_library_installs_and_runs_without_tensorflow_or_mlflow(tmp_path):
    # A copy of the sources: a stale `build/` in the checkout would leak into the wheel.
    source = tmp_path / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".*", "build", "dist", "*.egg-info", "mlruns", "checkpoints", "__pycache__"
        ),
    )
    env_dir = tmp_path / "venv"
    python = str(env_dir / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KERAS_BACKEND")}
    uv = shutil.which("uv", path=os.path.dirname(sys.executable))
    if uv:  # the dev extra's uv: the same install, in seconds instead of minutes
        _run([uv, "venv", "-q", "-p", sys.executable, str(env_dir)], env=env)
        install = [uv, "pip", "install", "-q", "-p", python]
        freeze = [uv, "pip", "freeze", "-p", python]
    else:
        venv.create(env_dir, with_pip=True)
        install = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        freeze = [python, "-m", "pip", "freeze"]
    _run([*install, str(source), "jax"], env=env, timeout=900)
    frozen = _run(freeze, env=env).stdout.lower()
    assert "keras-attn-rnn" in frozen and "jax" in frozen, frozen
    for absent in ("tensorflow", "mlflow", "matplotlib", "torch"):
        assert f"\n{absent}==" not in "\n" + frozen, f"{absent} was installed:\n{frozen}"

    # Outside the checkout, so the installed copy is the one imported.
    no_tf = subprocess.run(
        [python, "-c", "import tensorflow"], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert no_tf.returncode != 0 and "No module named 'tensorflow'" in no_tf.stderr, no_tf
    # The runner is not in the wheel (it runs from a checkout).
    no_runner = _run(
        [python, "-c", "import importlib.util as u; print(u.find_spec('experiments'))"],
        cwd=tmp_path,
        env=env,
    )
    assert no_runner.stdout.strip() == "None", no_runner.stdout
    script = os.path.join(ROOT, "tests", "library_only_check.py")
    checked = _run(
        [python, script],
        cwd=tmp_path,
        env=dict(env, KERAS_BACKEND="jax"),
        timeout=600,
    )
    assert "LIBRARY-ONLY-OK" in checked.stdout and " jax" in checked.stdout, checked.stdout
