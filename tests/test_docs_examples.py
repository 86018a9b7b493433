"""Every docstring example in `keras_attn_rnn/` and every python block of the README, of
the documentation site's pages and of CONTRIBUTING.md runs.

Docstring examples (`>>>`) run with doctest, module by module. Each example
starts from the namespace a reader of Keras's own docs has, `keras` and
`numpy as np`, and imports what else it uses itself, so it can be pasted as
it is.

The ```python blocks of the README, and of each page under `docs/`, run in
order, one namespace a page, in a temporary directory, on TensorFlow only
(`make test-tf`): the docstring examples and the layer suite already run on every
backend. A block preceded by `<!-- not run: REASON -->` is skipped; the skipped
blocks and their reasons are printed by the test and pinned in `NOT_RUN`, so a
new exclusion is a visible change to this file. CONTRIBUTING.md's blocks are its
recipes: each is run by the test file pinned in `RECIPES`.
"""

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import keras
import numpy as np
import pytest
from doc_blocks import CONTRIBUTING, ROOT, python_blocks

import keras_attn_rnn

DOCS = ROOT / "docs"
# The README first, then every page of the site.
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

# The blocks that are not run: (page, first line of the block, reason given on the page).
NOT_RUN = [
    (
        "docs/guides/serving.md",
        "import mlflow",
        "loads the text_model of a finished run (run_id); "
        "tests/test_experiments_serving.py runs it",
    ),
    (
        "docs/guides/tuning.md",
        "import mlflow",
        "loads the champion of a finished study; tests/test_scaleout_tune.py does",
    ),
]

# CONTRIBUTING.md's blocks (by their first line, the file each goes in) and the test file
# that runs each of them.
RECIPES = {
    "# sharp_attention.py": "tests/test_new_mechanism.py",
    "# tests/test_sharp_attention.py": "tests/test_new_mechanism.py",
    "# margin_sampler.py": "tests/test_new_sampler.py",
    "# tests/test_margin_sampler.py": "tests/test_new_sampler.py",
    "# my_tasks/majority.py": "tests/test_new_task_kind.py",
    "# tests/test_majority.py": "tests/test_new_task_kind.py",
}


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
    """An `Examples:` section written without `>>>` would not run: there is none."""
    plain = []
    for name in _module_names():
        module = importlib.import_module(name)
        for test in doctest.DocTestFinder(exclude_empty=False).find(module, name):
            if (
                re.search(r"^\s*Examples?:", test.docstring or "", re.MULTILINE)
                and not test.examples
            ):
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


def _page(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_readme_is_short_and_leaves_the_rest_to_the_docs():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, len(lines)


def test_blocks_are_found_and_markers_read():
    text = "a\n```python\nx = 1\n```\n<!-- not run: needs\n a server -->\n```python\ny\n```\n"
    assert python_blocks(text) == [(3, "x = 1\n", None), (8, "y\n", "needs a server")]
    # a marker counts only right before its block, not across later text or comments
    text = "<!-- not run: a -->\n```python\nx\n```\nprose\n<!-- b -->\n```python\ny\n```\n"
    assert [reason for _, _, reason in python_blocks(text)] == ["a", None]


def test_the_skipped_blocks_are_the_pinned_ones(capsys):
    skipped = []
    for path in PAGES:
        for _, code, reason in python_blocks(path.read_text(encoding="utf-8")):
            if reason:
                skipped.append((_page(path), code.splitlines()[0], reason))
    with capsys.disabled():
        for page, first, reason in skipped:
            print(f"\n{page}: block not run: {first!r}: {reason}")
    assert skipped == NOT_RUN


def _runnable(path: Path) -> list[tuple[int, str]]:
    blocks = python_blocks(path.read_text(encoding="utf-8"))
    return [(line, code) for line, code, reason in blocks if not reason]


RUNNABLE = [path for path in PAGES if _runnable(path)]


def test_the_pages_that_teach_by_example_have_blocks_to_run():
    """A page whose blocks all went (or were all marked not run) would drop out silently."""
    pages = {_page(path) for path in RUNNABLE}
    guides = ["layers", "decoder", "generation", "text", "own-model", "copy-attention"]
    assert {"README.md", *(f"docs/guides/{guide}.md" for guide in guides)} <= pages


@pytest.mark.parametrize("path", RUNNABLE, ids=_page)
def test_python_blocks_run_in_order(path, tmp_path, monkeypatch):
    """A page's blocks, in order, in one namespace of their own (a reader's session)."""
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    for line, code in _runnable(path):
        # Padded so that a traceback names the page's own line numbers.
        exec(compile("\n" * (line - 1) + code, str(path), "exec"), namespace)


def test_every_contributing_block_is_a_recipe_its_test_file_runs():
    """Each python block of CONTRIBUTING.md is pinned to the test file that runs it, and that
    file names the block (`doc_blocks.recipe_module`, `run_recipe_tests` or
    `contributing_block` find a block by its first line)."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    firsts = [code.splitlines()[0] for _, code, _ in python_blocks(text)]
    assert sorted(firsts) == sorted(RECIPES)
    for first, test_file in RECIPES.items():
        assert f'"{first}"' in (ROOT / test_file).read_text(encoding="utf-8"), test_file
