"""What several commands share: the `CONFIG [--set ...]` arguments, their check before the
frameworks are imported, and the report at the end (a run's result block, where the run
went and how to look at it)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from experiments.commands.ui import MODEL_TRAINING_VIEW, ui_url


def add_config_arguments(parser, about: str) -> None:
    """The positional `config` (a file or a ready config's name) and repeatable `--set`."""
    parser.add_argument("config", help=about)
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a config value (YAML syntax), e.g. --set train.epochs=3",
    )


def checked_config(name: str, overrides=(), sections=(), points=()) -> Path:
    """The file CONFIG names, its config (with `overrides`, and with each of `points`: lists
    of more overrides) checked before the frameworks are imported (`config_precheck`): a
    mistyped name, key or value is refused at once. `sections`: the command's own
    top-level sections (`tune`)."""
    from experiments import config_precheck

    path = config_precheck.config_path(name)
    for point in points or [[]]:
        config_precheck.check_file(path, [*overrides, *point], sections)
    return path


def report(run_id: str, result: bool = True, label: str = "run id") -> None:
    """The run's result block (`result`: read back from the store), where it went (`label`:
    its id) and how to look at it (its page in the UI)."""
    from experiments.tracking import results, store

    uri = store.tracking_uri()
    found = results.read_back(run_id)
    if found is None:
        print(f"result: {uri} did not answer within {results.READ_SECONDS} s; see the run there")
    elif result:
        print("\n".join(results.run_block(found, results.epochs_run(run_id))))
    print(f"{label}: {run_id}")
    print(f"tracking store: {uri}")
    route = f"experiments/{found.info.experiment_id}/runs/{run_id}" if found else ""
    # the run page shows the attention images only as cards of parameters: the view that
    # draws them (`image_view`) is printed beside it
    images = results.image_view_route(found.info.experiment_id) if found else None
    if urlparse(uri).scheme in ("http", "https"):  # the server's own UI
        print(f"review it at: {uri.rstrip('/')}/#/{route}{MODEL_TRAINING_VIEW}")
        if images:
            print(f"its attention images: {uri.rstrip('/')}/#/{images}&{MODEL_TRAINING_VIEW[1:]}")
    else:
        print("review it with: make ui   (or: python -m experiments ui)")
        print(f"  its page there: {ui_url('127.0.0.1', 5000, route)}")
        if images:
            print(f"  its attention images: {ui_url('127.0.0.1', 5000, images)}")
