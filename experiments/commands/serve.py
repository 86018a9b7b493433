"""`serve RUN_ID [--model text_model|model] [--port P] [--host H]`: a run's model over HTTP.

Starts `mlflow models serve` from this environment (its `uvicorn` first on `PATH`,
`--env-manager local`, the project's tracking store), waits until the server answers
`/ping`, prints the URL and a `curl` line (its input from the run's own data:
`example_request`), and stops the server and its workers on
Ctrl+C or SIGTERM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from experiments import errors
from experiments.commands.ui import (
    LOCAL_HOSTS,
    reachable_host,
    run_in_group,
    server_env,
    wait_until_up,
)

# What each --model serves: the tag holding its URI, and an example request.
MODELS = {
    "text_model": ("text_model_uri", {"inputs": ["abcde"]}),
    "model": ("model_uri", {"inputs": [[1, 5, 6, 2]]}),
}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve a run's model over HTTP (mlflow models serve) on 127.0.0.1"
    )
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument(
        "--model",
        default="text_model",
        choices=tuple(MODELS),
        help="text_model: raw strings in, text out (default); model: the Keras model, token ids in",
    )
    parser.add_argument("--port", type=int, default=5001)
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to bind (default 127.0.0.1; 0.0.0.0 exposes the model to the network)",
    )
    parser.add_argument(
        "--timeout", type=float, default=180.0, help="seconds to wait for the server to answer"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the command only")
    parser.set_defaults(handler=handle)


def serve_command(model_uri: str, port: int, host: str) -> list[str]:
    """The `mlflow models serve` command line, run by this environment's Python."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        "models",
        "serve",
        "-m",
        model_uri,
        "--env-manager",
        "local",
        "--host",
        host,
        "--port",
        str(port),
    ]


def serve_env(tracking_uri: str) -> dict:
    """This environment's scripts first on `PATH` (MLflow starts `uvicorn` from there),
    the store the model URI points into, and the warnings a user cannot act on off
    (`ui.server_env`)."""
    scripts = str(Path(sys.executable).parent)
    return server_env(
        {
            **os.environ,
            "PATH": scripts + os.pathsep + os.environ.get("PATH", ""),
            "MLFLOW_TRACKING_URI": tracking_uri,
        }
    )


def model_uri(run_id: str, model: str) -> str:
    """The URI of the run's `model`; a `ConfigError` naming RUN_ID when there is none."""
    from experiments.tracking import store

    tag, _ = MODELS[model]
    store.check_run_id(run_id)
    run = store.get_run(store.connect(), run_id)
    uri = run.data.tags.get(tag)
    if not uri:
        raise errors.ConfigError(
            f"RUN_ID: run {run_id} has no logged {model} (no {tag} tag: it ran with "
            "tracking.log_model=false, did not finish, predates logged models, or trained "
            "on a backend other than TensorFlow, which logs the text_model only)"
        )
    if uri.startswith("spooled:"):
        raise errors.ConfigError(
            f"RUN_ID: the {model} of run {run_id} is still in its local spool; upload it "
            f"with `python -m experiments sync {run_id}` first"
        )
    return uri


def example_request(uri: str, model: str) -> dict:
    """A request of one input from the run's own data: the first row of the input example
    logged with the model (a probe of the run's task, as the model reads it), or, when it
    cannot be read, `MODELS`' generic one."""
    import mlflow

    from experiments.tracking import store

    _, generic = MODELS[model]
    try:
        client = mlflow.MlflowClient(store.tracking_uri())
        location = client.get_logged_model(uri.removeprefix("models:/")).artifact_location
        path = mlflow.artifacts.download_artifacts(
            artifact_uri=f"{location.rstrip('/')}/input_example.json"
        )
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - an older model or store: the generic example
        return generic
    rows = data.get("inputs", data.get("data")) if isinstance(data, dict) else data
    if not isinstance(rows, list) or not rows:
        return generic
    return {"inputs": rows[:1]}


def handle(args) -> int:
    """Serve until interrupted; the server's whole process group is stopped on the way out."""
    from experiments.tracking import store

    if not 0 < args.port < 65536:
        raise errors.ConfigError(f"--port: expected 1 to 65535. Received: --port={args.port}")
    uri = model_uri(args.run_id, args.model)
    command = serve_command(uri, args.port, args.host)
    print(" ".join(command))
    if args.dry_run:
        return 0
    if args.host not in LOCAL_HOSTS:
        print(f"warning: the model will accept connections on {args.host}", file=sys.stderr)
    base = f"http://{reachable_host(args.host)}:{args.port}"
    example = example_request(uri, args.model)

    def announce_when_up(child: subprocess.Popen) -> None:
        wait_until_up(child, f"{base}/ping", args.timeout, "mlflow models serve")
        print(f"serving {uri} at {base}/invocations (Ctrl+C to stop)")
        print(
            f"curl -s {base}/invocations -H 'Content-Type: application/json' "
            f"-d '{json.dumps(example)}'",
            flush=True,
        )

    return run_in_group(command, serve_env(store.tracking_uri()), announce_when_up)
