"""`list`: the ready configs, each with the first sentence of its leading comment."""

from __future__ import annotations

import re

from experiments import ready_configs

# A sentence ends at . ! or ? followed by the end, or by a space and a capital letter or a
# quote (so "et al. 2018" and "e.g. the" go on).
SENTENCE_END = re.compile(r"[.!?](?=$|\s+[A-Z\"'(])")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("list", help="list the ready configs")
    parser.set_defaults(handler=handle)


def describe(text: str) -> str:
    """The first sentence of a config's leading comment lines (all of them when none ends)."""
    comment = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        comment.append(line.lstrip("#").strip())
    words = " ".join(line for line in comment if line)
    end = SENTENCE_END.search(words)
    return words[: end.end()] if end else words


def handle(args) -> int:
    paths = sorted(ready_configs.directory().glob("*.yaml"))
    width = max(len(p.stem) for p in paths) + 2
    for path in paths:  # one line a config (the terminal wraps a long one)
        print(path.stem.ljust(width) + describe(path.read_text(encoding="utf-8")))
    return 0
