"""`run CONFIG [--set k=v ...]`: train and evaluate one model as one MLflow run."""

from __future__ import annotations

from experiments.commands import common


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("run", help="train and evaluate one model as one MLflow run")
    common.add_config_arguments(parser, "YAML config file or ready config name (see `list`)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    path = common.checked_config(args.config, args.overrides)  # before Keras is imported
    from experiments import config
    from experiments.training import run

    cfg = config.load_config(path, args.overrides)
    run_id = run.execute(run.validate(cfg))
    common.report(run_id)
    return 0
