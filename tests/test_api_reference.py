"""The API reference as a reader sees it (issue 49, item 6): the site is built and the HTML
of the layers' and models' pages parsed. A multi-line `Returns:` gives one entry per
documented return (not a table row per line), `Call arguments:` is a list, and the ready
models' pages show what they inherit from their private base class (`generate`,
`compile(sampler=)`, `fit` on strings). Needs the docs extra (`make test-slow` installs it)."""

from __future__ import annotations

import os
import subprocess
import sys
from html.parser import HTMLParser

import pytest

# one worker builds the site (`--dist loadgroup`)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("api_reference")]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOID = {"br", "hr", "img", "input", "meta", "link", "source", "wbr", "col", "area", "base"}


class Element:
    def __init__(self, tag, attrs):
        self.tag, self.attrs, self.children = tag, dict(attrs), []

    @property
    def classes(self):
        return (self.attrs.get("class") or "").split()

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def elements(self):
        return [c for c in self.children if isinstance(c, Element)]

    def find_all(self, predicate):
        for child in self.elements():
            if predicate(child):
                yield child
            yield from child.find_all(predicate)


class TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        element = Element(tag, attrs)
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return out


def page(site, name):
    builder = TreeBuilder()
    builder.feed((site / "api" / name / "index.html").read_text(encoding="utf-8"))
    return builder.root


def own_contents(root, object_id):
    """The direct children of the documented object's contents: its own docstring's
    sections, without its members'."""
    (heading,) = root.find_all(lambda e: e.attrs.get("id") == object_id)
    (holder,) = root.find_all(lambda e: heading in e.children)
    (contents,) = [e for e in holder.elements() if "doc-contents" in e.classes]
    return contents.elements()


def returns_entries(children):
    """The names of the Returns table's rows (one row per entry)."""
    for i, element in enumerate(children):
        if element.tag == "p" and element.text().strip() == "Returns:":
            table = children[i + 1]
            assert table.tag == "table"
            rows = list(table.find_all(lambda e: "doc-section-item" in e.classes))
            return [row.elements()[0].text().strip() for row in rows]
    raise AssertionError("no Returns section")


def call_arguments(children):
    """The names of the items of the Call arguments list."""
    (details,) = [e for e in children if "call-arguments" in e.classes]
    (listing,) = [e for e in details.elements() if e.tag == "ul"]
    return [li.text().split(":")[0].strip() for li in listing.elements() if li.tag == "li"]


@pytest.mark.parametrize(
    "page_name, object_id, returns, arguments",
    [
        (
            "layers",
            "keras_attn_rnn.layers.AttentionDecoder",
            ["outputs", "states", "attention", "alignments"],
            [
                "inputs",
                "mask",
                "initial_state",
                "training",
                "return_attention_scores",
                "inputs_mask",
            ],
        ),  # fmt: skip
        (
            "models",
            "keras_attn_rnn.models.Seq2Seq",
            ["logits", "alignments", "p_gen"],
            ["inputs", "training", "return_attention_scores"],
        ),
    ],
)
def test_returns_are_one_entry_each_and_call_arguments_a_list(
    site, page_name, object_id, returns, arguments
):
    children = own_contents(page(site, page_name), object_id)
    assert returns_entries(children) == returns
    assert call_arguments(children) == arguments


def test_the_models_pages_show_what_they_inherit(site):
    root = page(site, "models")
    ids = {e.attrs["id"] for e in root.find_all(lambda e: "id" in e.attrs)}
    for model in ("Seq2Seq", "AttentiveLanguageModel", "AttentiveClassifier"):
        for method in ("compile", "fit", "predict"):
            assert f"keras_attn_rnn.models.{model}.{method}" in ids
    for model in ("Seq2Seq", "AttentiveLanguageModel"):
        assert f"keras_attn_rnn.models.{model}.generate" in ids
    (compile_heading,) = root.find_all(
        lambda e: e.attrs.get("id") == "keras_attn_rnn.models.Seq2Seq.compile"
    )
    assert "sampler" in compile_heading.text()  # its signature: compile(..., sampler=...)


def test_examples_are_code_not_quotes(site):
    """`>>>` examples render as highlighted code, never as nested blockquotes."""
    for name in ("layers", "models", "tokenizers"):
        root = page(site, name)
        assert not list(root.find_all(lambda e: e.tag == "blockquote"))
        assert list(root.find_all(lambda e: e.tag == "span" and "gp" in e.classes))  # >>>
