"""`sweep CONFIG --grid k=v1,v2 ...`: one nested run per grid point under a parent run."""

from __future__ import annotations

from experiments.commands import common


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("sweep", help="one nested run per grid point under a parent run")
    common.add_config_arguments(parser, "YAML config file or ready config name")
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="values to try for one key; several --grid flags form a product",
    )
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    points = [
        [f"{spec.partition('=')[0]}={value}"]
        for spec in args.grid
        if "=" in spec
        for value in spec.partition("=")[2].split(",")
        if value.strip()
    ]
    path = common.checked_config(args.config, args.overrides, points=points)  # before Keras
    from experiments.tracking import results
    from experiments.training import sweep

    outcome = sweep.run_sweep(path, args.grid, args.overrides)
    print("sweep results (test split, whole; comparison.csv on the parent run):")
    print("\n".join("  " + line for line in results.test_table(outcome.rows, "point")))
    common.report(outcome.parent_run_id, result=False, label="parent run id")
    return 0
