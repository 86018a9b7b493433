"""Command line: `python -m experiments {run,sweep,resume,ui,list} ...` (also `attn-rnn`).

Sub-commands living in other modules plug in through `OPTIONAL_COMMANDS`:
each such module defines `add_parser(subparsers)`, which adds its parser and
sets `handler=<function(args) -> int>` with `set_defaults`.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

from experiments.config import ConfigError
from experiments.resilient import EXIT_TRACKING_UNAVAILABLE, RunFailed, TrackingUnavailable

OPTIONAL_COMMANDS = ("experiments.bench", "experiments.sync")


def configs_dir() -> Path:
    """The folder of ready configs shipped with the package."""
    return Path(__file__).resolve().parent / "configs"


def resolve_config_path(name: str) -> Path:
    """A config file path, or the name of a ready config (`demo`, `reverse.yaml`)."""
    path = Path(name)
    if path.is_file():
        return path
    ready = configs_dir() / (name if name.endswith(".yaml") else f"{name}.yaml")
    return ready if ready.is_file() else path


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, including optional plug-in sub-commands."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments",
        description="Train attention RNNs on ready tasks, tracked in MLflow.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="train and evaluate one model as one MLflow run")
    run.add_argument("config", help="YAML config file or ready config name (see `list`)")
    _add_set(run)
    run.set_defaults(handler=cmd_run)

    sweep = sub.add_parser("sweep", help="one nested run per grid point under a parent run")
    sweep.add_argument("config", help="YAML config file or ready config name")
    sweep.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="values to try for one key; several --grid flags form a product",
    )
    _add_set(sweep)
    sweep.set_defaults(handler=cmd_sweep)

    resume = sub.add_parser("resume", help="continue an interrupted run from its checkpoint")
    resume.add_argument("run_id")
    resume.set_defaults(handler=cmd_resume)

    ui = sub.add_parser("ui", help="open the tracking store in the MLflow UI on 127.0.0.1")
    ui.add_argument("--port", type=int, default=5000)
    ui.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to bind (default 127.0.0.1; 0.0.0.0 exposes the store to the network)",
    )
    ui.add_argument("--dry-run", action="store_true", help="print the command only")
    ui.set_defaults(handler=cmd_ui)

    listing = sub.add_parser("list", help="list the ready configs")
    listing.set_defaults(handler=cmd_list)

    for name in OPTIONAL_COMMANDS:
        add_parser = getattr(_optional_module(name), "add_parser", None)
        if add_parser is not None:
            add_parser(sub)
    return parser


def _add_set(parser) -> None:
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a config value (YAML syntax), e.g. --set train.epochs=3",
    )


def _optional_module(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name == name:
            return None
        raise


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (2 for bad input, before anything is created)."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args) or 0
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except TrackingUnavailable as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_TRACKING_UNAVAILABLE
    except RunFailed as err:
        print(f"error: run failed: {err}", file=sys.stderr)
        return 1


def cmd_run(args) -> int:
    """`run CONFIG [--set k=v ...]`."""
    from experiments import config, training

    cfg = config.load_config(resolve_config_path(args.config), args.overrides)
    prepared = training.prepare(cfg)
    run_id = training.execute(prepared)
    _report(run_id)
    return 0


def cmd_sweep(args) -> int:
    """`sweep CONFIG --grid k=v1,v2 ...`."""
    from experiments import sweep

    run_id = sweep.run_sweep(resolve_config_path(args.config), args.grid, args.overrides)
    _report(run_id)
    return 0


def cmd_resume(args) -> int:
    """`resume RUN_ID`."""
    from experiments import resume

    run_id = resume.resume_run(args.run_id)
    _report(run_id)
    return 0


def ui_command(port: int, host: str = "127.0.0.1") -> list[str]:
    """The `mlflow ui` command line for the project's store, bound to 127.0.0.1 by default."""
    from experiments import tracking

    return [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        tracking.tracking_uri(),
        "--host",
        host,
        "--port",
        str(port),
    ]


def cmd_ui(args) -> int:
    """`ui [--port P]`: serve the store until interrupted."""
    from experiments import tracking

    command = ui_command(args.port, args.host)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: the MLflow UI will accept connections on {args.host}", file=sys.stderr)
    print(" ".join(command))
    if args.dry_run:
        return 0
    folder = tracking.local_store_dir(tracking.tracking_uri())
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    print(f"MLflow UI on http://{args.host}:{args.port} (Ctrl+C to stop)")
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 0


def cmd_list(args) -> int:
    """`list`: ready configs and the first comment line of each."""
    for path in sorted(configs_dir().glob("*.yaml")):
        first = path.read_text(encoding="utf-8").splitlines()[:1]
        about = first[0].lstrip("# ").strip() if first and first[0].startswith("#") else ""
        print(f"{path.stem:10s} {about}")
    return 0


def _report(run_id: str) -> None:
    from experiments import tracking

    print(f"run id: {run_id}")
    print(f"tracking store: {tracking.tracking_uri()}")
    print("review it with: make ui   (or: python -m experiments ui)")
