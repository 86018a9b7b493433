"""`ui [--port P] [--host H]`: serve the tracking store in the MLflow UI, on 127.0.0.1 by default."""

from __future__ import annotations

import subprocess
import sys

from experiments.tracking import store

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "ui", help="open the tracking store in the MLflow UI on 127.0.0.1"
    )
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to bind (default 127.0.0.1; 0.0.0.0 exposes the store to the network)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the command only")
    parser.set_defaults(handler=handle)


def ui_command(port: int, host: str = "127.0.0.1") -> list[str]:
    """The `mlflow ui` command line for the project's store, bound to 127.0.0.1 by default."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        store.tracking_uri(),
        "--host",
        host,
        "--port",
        str(port),
    ]


def handle(args) -> int:
    """Serve the store until interrupted."""
    command = ui_command(args.port, args.host)
    if args.host not in LOCAL_HOSTS:
        print(f"warning: the MLflow UI will accept connections on {args.host}", file=sys.stderr)
    print(" ".join(command))
    if args.dry_run:
        return 0
    folder = store.local_store_dir(store.tracking_uri())
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    print(f"MLflow UI on http://{args.host}:{args.port} (Ctrl+C to stop)")
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 0
