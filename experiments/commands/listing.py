"""`list`: the ready configs, with the first comment line of each."""

from __future__ import annotations

from experiments import ready_configs


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("list", help="list the ready configs")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    for path in sorted(ready_configs.directory().glob("*.yaml")):
        first = path.read_text(encoding="utf-8").splitlines()[:1]
        about = first[0].lstrip("# ").strip() if first and first[0].startswith("#") else ""
        print(f"{path.stem:10s} {about}")
    return 0
