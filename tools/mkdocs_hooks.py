"""mkdocs hooks (`hooks:` in mkdocs.yml): the pages generated from the code when the site is
built, never written by hand.

- `reference/configuration.md`: the configuration reference (`tools.config_reference`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `mkdocs` run as a script: the project is importable too
    sys.path.insert(0, str(ROOT))
# The schema needs Keras but no framework: its NumPy backend imports in a moment.
os.environ.setdefault("KERAS_BACKEND", "numpy")

from tools import config_reference  # noqa: E402

CONFIGURATION = "reference/configuration.md"


def on_files(files, config):
    """Add the generated pages to the site's files."""
    files.append(File.generated(config, CONFIGURATION, content=config_reference.render()))
    return files
