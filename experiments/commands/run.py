"""`run CONFIG [--set k=v ...]`: train and evaluate one model as one MLflow run."""

from __future__ import annotations

from experiments import config
from experiments.commands import common
from experiments.training import run


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("run", help="train and evaluate one model as one MLflow run")
    common.add_config_arguments(parser, "YAML config file or ready config name (see `list`)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    cfg = config.load_config(config.resolve_config_path(args.config), args.overrides)
    run_id = run.execute(run.prepare(cfg))
    common.report(run_id)
    return 0
