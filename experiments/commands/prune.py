"""`prune [--checkpoint-dir DIR] [--dry-run]`: delete the checkpoint folders of finished runs."""

from __future__ import annotations

from pathlib import Path

from experiments import errors


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "prune",
        help="delete the checkpoint folders of finished runs (killed and failed runs keep theirs)",
    )
    parser.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="the folder holding the runs' checkpoint folders (default: checkpoints/ beside "
        "the tracking store, where runs without train.checkpoint_dir write them)",
    )
    parser.add_argument("--dry-run", action="store_true", help="say what would go; delete nothing")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from experiments.tracking import prune, store

    root = Path(args.checkpoint_dir) if args.checkpoint_dir else store.default_checkpoint_root()
    if not root.is_dir():
        raise errors.ConfigError(
            f"--checkpoint-dir: expected a folder of checkpoint folders. Received: {str(root)!r} "
            "(no such folder)"
        )
    outcomes = prune.prune(store.connect(), root, dry_run=args.dry_run)
    gone = [o for o in outcomes if o.kept is None]
    verb = "would delete" if args.dry_run else "deleted"
    for outcome in outcomes:
        if outcome.kept is None:
            print(f"{verb} {outcome.folder} ({_megabytes(outcome.size)})")
        else:
            print(f"kept {outcome.folder}: {outcome.kept}")
    freed = _megabytes(sum(o.size for o in gone))
    print(f"{verb} {len(gone)} folder(s), {freed}; kept {len(outcomes) - len(gone)} in {root}")
    return 0


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"
