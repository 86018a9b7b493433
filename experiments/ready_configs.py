"""The ready configs shipped in `experiments/configs/`: where they are, and a name to a path.

Light on purpose (no Keras, no MLflow): `python -m experiments list` and `--help` use it.
"""

from __future__ import annotations

from pathlib import Path

from experiments import task_aliases


def directory() -> Path:
    """The folder of ready configs shipped with the package."""
    return Path(__file__).resolve().parent / "configs"


def resolve(name: str) -> Path:
    """A config file path, or the name of a ready config (`demo`, `reverse.yaml`)."""
    path = Path(name)
    if path.is_file():
        return path
    stem = name.removesuffix(".yaml")
    stem = task_aliases.ALIASES.get(stem, stem)  # a ready config named after its old task name
    ready = directory() / f"{stem}.yaml"
    return ready if ready.is_file() else path
