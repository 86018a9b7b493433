"""`export RUN_ID --format savedmodel|keras OUT`: a run's model as a SavedModel or `.keras` file."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "export",
        help="write a run's model as a TensorFlow SavedModel (for TF Serving) or a .keras file",
    )
    parser.add_argument("run_id")
    parser.add_argument(
        "--format",
        dest="fmt",
        required=True,
        help="savedmodel: token ids -> generated ids (greedy `serve`, beam `serve_beam`), "
        "loadable without this library; keras: the trained .keras file",
    )
    parser.add_argument(
        "out", metavar="OUT", help="the folder (savedmodel) or .keras file to write"
    )
    parser.add_argument("--force", action="store_true", help="replace OUT if it exists")
    parser.add_argument(
        "--beam-width",
        type=int,
        default=None,
        help="beam width of the SavedModel's serve_beam (default: the run's generate.beam_width)",
    )
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from experiments.tracking import export

    out = export.export_run(args.run_id, args.fmt, args.out, args.force, args.beam_width)
    print(f"run {args.run_id}: model written to {out} ({args.fmt})")
    return 0
