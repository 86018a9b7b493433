"""Every docstring example in `keras_attn_rnn/` and every README python block runs.

Docstring examples (`>>>`) run with doctest, module by module. Each example
starts from the namespace a reader of Keras's own docs has, `keras` and
`numpy as np`, and imports what else it uses itself, so it can be pasted as
it is.

The README's ```python blocks run in order, in one namespace, in a temporary
directory, on TensorFlow only (`make test-tf`): the docstring examples and the
layer suite already run on every backend. A block preceded by
`<!-- not run: REASON -->` is skipped; the skipped blocks and their reasons
are printed by the test and pinned in `README_NOT_RUN`, so a new exclusion is
a visible change to this file.
"""

import doctest
import importlib
import os
import pkgutil
import re

import keras
import numpy as np
import pytest

import keras_attn_rnn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

# The README blocks that are not run: (first line of the block, reason given in the README).
README_NOT_RUN = [
    (
        "import mlflow",
        "loads the text_model of a finished run (run_id); "
        "tests/test_experiments_serving.py runs it",
    ),
    (
        "# my_tasks/majority.py",
        "a module of a package of your own; "
        "tests/test_new_task_kind.py imports this block as one and builds its task",
    ),
    (
        "import mlflow",
        "loads the champion of a finished study; tests/test_scaleout_tune.py does",
    ),
]


def _module_names():
    names = [keras_attn_rnn.__name__]
    for info in pkgutil.walk_packages(keras_attn_rnn.__path__, keras_attn_rnn.__name__ + "."):
        names.append(info.name)
    return sorted(names)


def _doctests(module_name):
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    # globs: a reader's namespace, not the module's own globals.
    return [
        test
        for test in finder.find(module, module_name, globs={"keras": keras, "np": np})
        if test.examples
    ]


def _modules_with_examples():
    return [name for name in _module_names() if _doctests(name)]


@pytest.mark.layers
def test_every_module_with_examples_is_collected():
    found = _modules_with_examples()
    # the families whose examples rotted before this test existed
    for name in ("losses", "generation", "samplers.sampler", "samplers.beam_sampler"):
        assert f"keras_attn_rnn.{name}" in found
    assert len(found) >= 20, found


@pytest.mark.layers
def test_every_example_section_is_a_doctest():
    """An `Example:` written without `>>>` would not run: there is none."""
    plain = []
    for name in _module_names():
        module = importlib.import_module(name)
        for test in doctest.DocTestFinder(exclude_empty=False).find(module, name):
            if re.search(r"^\s*Example:", test.docstring or "", re.MULTILINE) and not test.examples:
                plain.append(test.name)
    assert not plain


@pytest.mark.layers
@pytest.mark.parametrize("module_name", _modules_with_examples())
def test_docstring_examples_run(module_name):
    if module_name == "keras_attn_rnn.plotting":
        pytest.importorskip("matplotlib")  # the `plotting` extra
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    failures = []
    for test in _doctests(module_name):
        output = []
        result = runner.run(test, out=output.append, clear_globs=True)
        if result.failed:
            failures.append("".join(output))
    assert not failures, "\n".join(failures)


_BLOCK = re.compile(r"^```python\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
# A marker right before the block (blank lines aside); its reason never spans another `-->`.
_NOT_RUN = re.compile(r"<!--\s*not run:\s*((?:(?!-->).)*?)\s*-->\s*\Z", re.DOTALL)


def readme_blocks(text):
    """`(line, code, reason)` for each ```python block: its first line's number in the
    README, its code, and the reason of a `<!-- not run: ... -->` just before it (else None)."""
    blocks = []
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start(1)) + 1
        marker = _NOT_RUN.search(text[: match.start()])
        reason = " ".join(marker.group(1).split()) if marker else None
        blocks.append((line, match.group(1), reason))
    return blocks


def test_readme_blocks_are_found_and_markers_read():
    text = "a\n```python\nx = 1\n```\n<!-- not run: needs\n a server -->\n```python\ny\n```\n"
    assert readme_blocks(text) == [(3, "x = 1\n", None), (8, "y\n", "needs a server")]
    # a marker counts only right before its block, not across later text or comments
    text = "<!-- not run: a -->\n```python\nx\n```\nprose\n<!-- b -->\n```python\ny\n```\n"
    assert [reason for _, _, reason in readme_blocks(text)] == ["a", None]


def test_readme_python_blocks_run_in_order(tmp_path, monkeypatch, capsys):
    with open(README, encoding="utf-8") as f:
        blocks = readme_blocks(f.read())
    skipped = [(code.splitlines()[0], reason) for _, code, reason in blocks if reason]
    with capsys.disabled():
        for first, reason in skipped:
            print(f"\nREADME block not run: {first!r}: {reason}")
    assert skipped == README_NOT_RUN
    run = [(line, code) for line, code, reason in blocks if not reason]
    assert len(run) >= 4

    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__readme__"}
    for line, code in run:
        # Padded so that a traceback names the README's own line numbers.
        exec(compile("\n" * (line - 1) + code, README, "exec"), namespace)
