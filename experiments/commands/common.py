"""What several commands share: the `CONFIG [--set ...]` arguments and the run report."""

from __future__ import annotations


def add_config_arguments(parser, about: str) -> None:
    """The positional `config` (a file or a ready config's name) and repeatable `--set`."""
    parser.add_argument("config", help=about)
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a config value (YAML syntax), e.g. --set train.epochs=3",
    )


def report(run_id: str) -> None:
    """Where the run went, and how to look at it."""
    from experiments.tracking import store

    print(f"run id: {run_id}")
    print(f"tracking store: {store.tracking_uri()}")
    print("review it with: make ui   (or: python -m experiments ui)")
