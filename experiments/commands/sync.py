"""`sync RUN_ID`: upload what a run spooled locally while the tracking server was down."""

from __future__ import annotations

import sys


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
    parser.add_argument(
        "--skip-bad",
        action="store_true",
        help="upload the readable records and drop the unreadable ones from the spool "
        "(they are moved, with their files, to spool-skipped-TIME/ beside it, not deleted)",
    )
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from experiments.tracking import sync

    result = sync.sync_run(args.run_id, args.checkpoint_dir, echo=print, skip_bad=args.skip_bad)
    run = args.run_id
    if result.bad and not result.kept:
        print(
            f"error: run {run}: {result.bad} spooled record(s) are unreadable and were not "
            f"uploaded; they are listed in {result.bad_file} and the spool is kept. Review "
            f"them, then run `python -m experiments sync {run} --skip-bad` to upload the rest "
            "and move them, with their files, out of the spool",
            file=sys.stderr,
        )
        return 1
    if result.left:
        print(f"error: {result.left} record(s) still spooled for run {run}", file=sys.stderr)
        return 1
    if result.kept:
        print(
            f"run {run}: skipped {result.bad} unreadable record(s), kept with their files in "
            f"{result.kept} (delete it when you no longer need them)"
        )
    print(f"run {run}: uploaded {result.uploaded} spooled record(s); spool empty")
    return 0
