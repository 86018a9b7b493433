"""Prints `name==version` for every `>=` lower bound of the library and its extras.

`make test-oldest` installs with these as constraints, so the oldest versions
that `pyproject.toml` allows are the ones tested. Usage:
    python .ci/lower_bounds.py [EXTRA ...]   # default: the experiments and plotting extras
"""

import re
import sys
from pathlib import Path

import tomllib

project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
extras = sys.argv[1:] or ["experiments", "plotting"]
requirements = list(project["dependencies"])
for extra in extras:
    requirements += project["optional-dependencies"][extra]
pins = {}
for requirement in requirements:
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^]]*\])?\s*>=\s*([0-9][^,;\s]*)", requirement)
    if match is None:
        sys.exit(f"no plain `name>=version` lower bound in {requirement!r} (pyproject.toml)")
    name, version = match.group(1).lower(), match.group(3)
    pins[name] = max(pins.get(name, version), version, key=lambda v: [int(p) for p in v.split(".")])
print("\n".join(f"{name}=={version}" for name, version in sorted(pins.items())))
