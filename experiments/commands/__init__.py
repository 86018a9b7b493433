"""Command line: `python -m experiments COMMAND ...`, run from a checkout (no script is
installed: the wheel holds the library only).

Each command is one module of this package with `add_parser(subparsers)`,
which adds its parser and sets `handler=<function(args) -> int>`; `COMMANDS`
lists them, in the order `--help` shows them. Errors of the runner become
exit codes through `errors.EXITS` (what each code means: `errors.EXIT_CODES`, listed by
`--help`). SIGTERM is handled like Ctrl+C: it raises `errors.Terminated` (a
`KeyboardInterrupt`) in the main thread, once (a second SIGTERM while the command winds
down is ignored), and `main` returns 143; Ctrl+C propagates from `main` (a run ended
KILLED first), and `python -m experiments` exits 130 on it.

`--help`, `list` and argument errors are instant: command modules import only light
modules at the top, and each handler imports the runner parts it needs (TensorFlow,
MLflow) when it runs. While a command runs, TensorFlow's C++ log lines are kept off
stderr (`native_logs`), and so are the Python log lines of MLflow and TensorFlow a user
cannot act on (`library_logs`: progress bars, system-metrics INFO, spurious retracing).
"""

from __future__ import annotations

import argparse
import re
import sys

from experiments import config_precheck, errors, interrupts, library_logs, native_logs
from experiments.commands import (
    bench,
    export,
    listing,
    prune,
    resume,
    run,
    serve,
    sweep,
    sync,
    tune,
    ui,
)

COMMANDS = (run, sweep, tune, resume, ui, serve, listing, bench, sync, export, prune)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of a choice (a command, an option's value) names the
    choice closest to the one given (`rnu`: did you mean 'run'?)."""

    def error(self, message: str):
        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if found:
            choices = re.findall(r"'([^']*)'", found.group(2))
            message += config_precheck.suggestion(found.group(1), choices)
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser: one sub-command per module in `COMMANDS`."""
    parser = _Parser(
        prog="python -m experiments",
        description="Train attention RNNs on ready tasks, tracked in MLflow.",
        epilog=exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subparsers)
    for sub in subparsers.choices.values():  # every command's --help lists them too
        sub.epilog = "\n\n".join(filter(None, [sub.epilog, exit_codes_help()]))
        sub.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def exit_codes_help() -> str:
    """The exit codes, as `--help` lists them (`errors.EXIT_CODES`)."""
    lines = [f"  {code:>3}  {meaning}" for code, meaning in errors.EXIT_CODES.items()]
    return "exit codes:\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (2 for bad input, before anything is created)."""
    args = build_parser().parse_args(argv)
    try:
        with (
            native_logs.filtered_stderr(),
            library_logs.quiet(),
            interrupts.sigterm_as_interrupt(),
        ):
            return args.handler(args) or 0
    except tuple(errors.EXITS) as err:
        exit_ = errors.exit_for(err)
        print(f"{exit_.prefix}: {err}", file=sys.stderr)
        return exit_.code
    except errors.Terminated:
        print("stopped by SIGTERM", file=sys.stderr)
        return errors.EXIT_TERMINATED
