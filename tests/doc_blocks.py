"""The python blocks of the project's Markdown (README.md, docs/, CONTRIBUTING.md), for the
tests that run them: `tests/test_docs_examples.py` runs the README's and the docs pages',
and each recipe of CONTRIBUTING.md is run by the test file its text names (a block is found
by its first line, the comment naming the file it goes in: `# sharp_attention.py`)."""

from __future__ import annotations

import inspect
import re
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRIBUTING = ROOT / "CONTRIBUTING.md"

_BLOCK = re.compile(r"^```python\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
# A marker right before the block (blank lines aside); its reason never spans another `-->`.
_NOT_RUN = re.compile(r"<!--\s*not run:\s*((?:(?!-->).)*?)\s*-->\s*\Z", re.DOTALL)


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """`(line, code, reason)` for each ```python block: its first line's number in the
    text, its code, and the reason of a `<!-- not run: ... -->` just before it (else None)."""
    blocks = []
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start(1)) + 1
        marker = _NOT_RUN.search(text[: match.start()])
        reason = " ".join(marker.group(1).split()) if marker else None
        blocks.append((line, match.group(1), reason))
    return blocks


def contributing_block(first_line: str) -> str:
    """The one python block of CONTRIBUTING.md whose first line is `first_line`."""
    return _contributing(first_line)[1]


def _contributing(first_line: str) -> tuple[int, str]:
    text = CONTRIBUTING.read_text(encoding="utf-8")
    found = [(n, code) for n, code, _ in python_blocks(text) if code.split("\n")[0] == first_line]
    assert len(found) == 1, f"CONTRIBUTING.md has {len(found)} python blocks {first_line!r}"
    return found[0]


def _compiled(first_line: str):
    """The block compiled so that a traceback names CONTRIBUTING.md's own lines."""
    line, code = _contributing(first_line)
    return compile("\n" * (line - 1) + code, str(CONTRIBUTING), "exec")


def recipe_module(first_line: str, monkeypatch, registry=None) -> types.ModuleType:
    """CONTRIBUTING.md's block `first_line` (`# sharp_attention.py`) imported as the module
    that file would be (`sharp_attention`): run whole, its registration included, and
    importable by its name until the test ends (`monkeypatch` restores `sys.modules`, and
    `registry`, the `keras_attn_rnn.registry.Registry` the module registers in)."""
    if registry is not None:
        monkeypatch.setattr(registry, "_members", dict(registry._members))
    name = first_line.removeprefix("# ").removesuffix(".py").replace("/", ".")
    module = types.ModuleType(name)
    module.__file__ = str(CONTRIBUTING)
    monkeypatch.setitem(sys.modules, name, module)
    exec(_compiled(first_line), module.__dict__)
    return module


def run_recipe_tests(first_line: str, **fixtures) -> list[str]:
    """Run the test functions of CONTRIBUTING.md's test block `first_line`
    (`# tests/test_sharp_attention.py`), each given the fixtures it names from `fixtures`;
    return their names (an assertion fails when the block defines none)."""
    namespace: dict = {"__name__": first_line.removeprefix("# ")}
    exec(_compiled(first_line), namespace)
    tests = {n: f for n, f in namespace.items() if n.startswith("test_") and callable(f)}
    assert tests, f"CONTRIBUTING.md's block {first_line!r} defines no test"
    for test in tests.values():
        test(**{name: fixtures[name] for name in inspect.signature(test).parameters})
    return sorted(tests)
