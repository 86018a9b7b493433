"""Rules of the code's shape that a reviewer would otherwise check by hand."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KIND_NAMES = ("lm", "seq2seq", "classification")
_NAMES = "|".join(KIND_NAMES)
COMPARED = re.compile(rf"""(==|!=|\bin)\s*\(?\s*["']({_NAMES})["']|["']({_NAMES})["']\s*(==|!=)""")


def test_no_task_kind_name_is_compared_outside_the_kinds():
    """The task kind answers kind-specific questions (through its methods and the card it
    writes); tracking, training and commands never branch on a kind's name."""
    offenders = []
    for path in sorted((ROOT / "experiments").rglob("*.py")):
        if "kinds" in path.relative_to(ROOT).parts:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if COMPARED.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_rule_sees_a_comparison():
    assert COMPARED.search('if card["kind"] == "lm":')
    assert COMPARED.search("if 'classification' != kind:")
    assert COMPARED.search('if kind in ("seq2seq", "lm"):')
    assert not COMPARED.search('"kind": "lm",')
