"""`resume RUN_ID`: continue an interrupted run from its last checkpoint, in the same run."""

from __future__ import annotations

from experiments.commands import common


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("resume", help="continue an interrupted run from its checkpoint")
    parser.add_argument("run_id")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from experiments.training import resume

    common.report(resume.resume_run(args.run_id))
    return 0
