"""`sync RUN_ID`: upload what a run spooled locally while the tracking server was down."""

from __future__ import annotations

import sys

from experiments.tracking import sync


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "sync", help="upload metrics and artifacts a run spooled during a tracking outage"
    )
    parser.add_argument("run_id")
    parser.add_argument(
        "--checkpoint-dir",
        default=None,
        help="the run's checkpoint folder (default: the run's checkpoint_dir tag)",
    )
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    count, left = sync.sync_run(args.run_id, args.checkpoint_dir, echo=print)
    if left:
        print(f"error: {left} record(s) still spooled for run {args.run_id}", file=sys.stderr)
        return 1
    print(f"run {args.run_id}: uploaded {count} spooled record(s); spool empty")
    return 0
