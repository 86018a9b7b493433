"""`ui [--port P] [--host H]`: serve the tracking store in the MLflow UI, on 127.0.0.1 by default."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request

from experiments import errors

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
    parser.add_argument(
        "--workers",
        type=int,
        default=WORKERS,
        help=f"web worker processes of the UI (default {WORKERS}; MLflow's own default is 4)",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds to wait for the UI to answer"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the command only")
    parser.set_defaults(handler=handle)


# The UI's web workers. Each imports MLflow's server (~12 s of CPU); MLflow's default of four,
# started at once on a 2-core machine, kept the UI from answering for 38 s, two for 16 s.
# Two still answer a page's requests side by side (each serves them on threads too).
WORKERS = 2
# MLflow 3's server also starts its job runner (GenAI jobs: judges, prompt optimisation,
# trace roll-ups) as eight more processes importing MLflow; the runs of this project start
# none of those jobs, so `ui_env` switches it off unless the user chose.
JOB_EXECUTION = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"


def ui_command(port: int, host: str = "127.0.0.1", workers: int = WORKERS) -> list[str]:
    """The `mlflow ui` command line for the project's store, bound to 127.0.0.1 by default,
    with `workers` web workers. Start it with `ui_env()`."""
    from experiments.tracking import store

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
        "--workers",
        str(workers),
    ]


# MLflow 3's UI opens on its GenAI workspace (traces, judges, prompts); this query switches it
# to model training (runs, charts, models), and the browser keeps the choice.
MODEL_TRAINING_VIEW = "?workflowType=machine_learning"


def reachable_host(host: str) -> str:
    """The address a local client reaches a server bound to `host` on (all interfaces: 127.0.0.1)."""
    return "127.0.0.1" if host == "0.0.0.0" else host


def ui_url(host: str, port: int, route: str = "") -> str:
    """The UI's address on `route` (e.g. `experiments/1`, which may carry a query), on the
    model-training view."""
    query = MODEL_TRAINING_VIEW if "?" not in route else "&" + MODEL_TRAINING_VIEW[1:]
    return f"http://{reachable_host(host)}:{port}/#/{route}{query}"


def print_image_views(host: str, port: int) -> None:
    """The address of each experiment's saved view of its attention images (`image_view`)."""
    from experiments.tracking import image_view, store

    for experiment in store.connect().search_experiments():
        if image_view.TAG in experiment.tags:
            url = ui_url(host, port, image_view.route(experiment.experiment_id))
            print(f"  attention images of {experiment.name!r}: {url}")


def handle(args) -> int:
    """Serve the store until interrupted (Ctrl+C or SIGTERM: the UI and its workers stop too)."""
    from experiments.tracking import store

    if not 0 < args.port < 65536:
        raise errors.ConfigError(f"--port: expected 1 to 65535. Received: --port={args.port}")
    if args.workers < 1:
        raise errors.ConfigError(
            f"--workers: expected 1 or more. Received: --workers={args.workers}"
        )
    command = ui_command(args.port, args.host, args.workers)
    if args.host not in LOCAL_HOSTS:
        print(f"warning: the MLflow UI will accept connections on {args.host}", file=sys.stderr)
    print(" ".join(command))
    if args.dry_run:
        print(f"it would open on {ui_url(args.host, args.port)}")
        return 0
    folder = store.local_store_dir(store.tracking_uri())
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    health = f"http://{reachable_host(args.host)}:{args.port}/health"
    print(f"starting the MLflow UI (its address follows once {health} answers)", flush=True)

    def announce_when_up(child: subprocess.Popen) -> None:
        wait_until_up(child, health, args.timeout, "mlflow ui")
        print(f"MLflow UI on {ui_url(args.host, args.port)} (Ctrl+C to stop)", flush=True)
        print_image_views(args.host, args.port)

    return run_in_group(command, ui_env(), started=announce_when_up)


# Warnings of the servers MLflow starts (uvicorn workers) that a user cannot act on, as
# `PYTHONWARNINGS` entries (action:message-prefix): MLflow's server imports Starlette's
# deprecated WSGI middleware, once per worker.
QUIET_WARNINGS = ("ignore:starlette.middleware.wsgi is deprecated",)


def server_env(base: dict | None = None) -> dict:
    """`base` (this environment) for a server MLflow starts: `QUIET_WARNINGS` first in
    `PYTHONWARNINGS`, so that a user's own entries there still win."""
    env = dict(os.environ if base is None else base)
    env["PYTHONWARNINGS"] = ",".join(filter(None, [*QUIET_WARNINGS, env.get("PYTHONWARNINGS")]))
    return env


def ui_env(base: dict | None = None) -> dict:
    """`server_env(base)` for `mlflow ui`: MLflow's job runner off (`JOB_EXECUTION`) unless
    `base` sets it."""
    env = server_env(base)
    env.setdefault(JOB_EXECUTION, "false")
    return env


def run_in_group(command: list[str], env: dict | None = None, started=None) -> int:
    """Run `command` in its own process group until it exits or Ctrl+C (then 0); call
    `started(child)` first, if given. The MLflow servers run their web workers as children,
    so the whole group is stopped however this process is asked to stop (SIGTERM,
    `errors.Terminated`, goes on to `main`)."""
    child = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        if started is not None:
            started(child)
        return _wait(child)
    except KeyboardInterrupt as err:  # Ctrl+C
        if isinstance(err, errors.Terminated):
            raise
        return 0
    finally:
        stop_group(child)


def _wait(child: subprocess.Popen, step: float = 0.5) -> int:
    """`child.wait()` a step at a time, so that the main thread runs Python between steps.

    The kernel may hand a Ctrl+C to any thread of the process (a log forwarder's, MLflow's);
    Python then runs the handler in the main thread only, and a main thread blocked in one
    long `waitpid` would not see it until the server exits on its own.
    """
    while True:
        try:
            return child.wait(timeout=step)
        except subprocess.TimeoutExpired:
            continue


def wait_until_up(child: subprocess.Popen, url: str, timeout: float, what: str) -> None:
    """Return once `url` answers 200; a `ServerFailed` error when `child` (`what`) exits
    first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if child.poll() is not None:
            raise errors.ServerFailed(
                f"{what} exited with {child.returncode} before answering {url} "
                "(its output is above)"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise errors.ServerFailed(f"the server did not answer {url} within {timeout:.0f} s")
        time.sleep(0.5)


def stop_group(child: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the child's process group; SIGKILL what is left of it after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(child.pid):
        child.poll()  # reaps the child once it exits (a zombie still counts as the group)
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
