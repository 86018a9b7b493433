"""Screenshots of the MLflow UI for the docs (docs/ui/), in headless Chromium (Debian's `chromium`)
driven by Playwright (`make chromium` installs both; no browser download: it runs
/usr/bin/chromium).

    python -m tools.screenshots [RUN_ID] [--out docs/ui]     # from the project root

Starts `mlflow ui` on the project's store (`MLFLOW_TRACKING_URI`, else
mlruns/mlflow.db; `experiments.commands.ui`, 127.0.0.1, a free port), captures the run's
overview (its Datasets panel), the experiment's saved view *Attention* (the stepped
attention images; one enlarged, with its step slider) and the run's system metrics, then
stops the server. Without RUN_ID: the newest finished run of experiment `demo`.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
from pathlib import Path

import mlflow
from playwright.sync_api import sync_playwright

from experiments.commands.ui import ui_command, ui_env, ui_url
from experiments.tracking import image_view, store
from experiments.tracking.server import check_server

CHROMIUM = "/usr/bin/chromium"
# The probe's flags for this closed network (see the workplace notes): no background traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def newest_run(client, experiment: str) -> str:
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"error: no experiment {experiment!r}; run `make demo` first")
    runs = client.search_runs(
        [found.experiment_id],
        "attributes.status = 'FINISHED'",
        max_results=1,
        order_by=["attributes.start_time DESC"],
    )
    if not runs:
        raise SystemExit(f"error: no finished run in experiment {experiment!r}")
    return runs[0].info.run_id


def open_page(page, url: str, wait_for_text: str) -> None:
    page.goto(url)
    page.get_by_text(wait_for_text, exact=False).first.wait_for(timeout=60_000)
    close = page.get_by_role("button", name="Close")  # the MLflow Assistant side panel
    if close.count():
        close.first.click()


def save(target, path: Path) -> None:
    """Screenshot of a page or of one element (a locator) once it has finished drawing."""
    page = getattr(target, "page", target)
    page.wait_for_timeout(8000)  # charts and images finish drawing
    target.screenshot(path=str(path))
    print(path)


def attention_view(page, url: str, path: Path) -> None:
    """The experiment's saved view *Attention* (`experiments.tracking.image_view`), as it opens."""
    open_page(page, url, "attention_probe_0")
    wait_for_image(chart_card(page, "attention_probe_0"))
    save(page, path)


def attention_slider(page, url: str, path: Path, steps: list[int]) -> None:
    """The first probe's stepped image in the Attention view, enlarged, at each of `steps`
    (`path` gets `_step_<n>` before its suffix)."""
    open_page(page, url, "Attention")
    card = chart_card(page, "attention_probe_0")
    card.scroll_into_view_if_needed(timeout=60_000)
    wait_for_image(card)
    _unlabelled_buttons(card)[0].click()  # the chart card's "full screen"
    dialog = page.get_by_role("dialog")
    at = int(dialog.get_by_role("spinbutton").input_value())  # the view's step
    slider = dialog.get_by_role("slider")
    slider.focus()
    for step in steps:
        for _ in range(abs(step - at)):  # the slider moves from one logged step to the next
            slider.press("ArrowRight" if step > at else "ArrowLeft")
        at = step
        wait_for_image(dialog)
        save(dialog, path.with_name(f"{path.stem}_step_{step}{path.suffix}"))


def wait_for_image(card) -> None:
    image = card.locator("img").first
    image.wait_for(timeout=60_000)
    card.page.wait_for_function(
        "(img) => img.complete && img.naturalWidth > 0", arg=image.element_handle()
    )


def chart_card(page, key: str):
    return page.get_by_test_id("experiment-view-compare-runs-card").filter(has_text=key).first


def _unlabelled_buttons(scope):
    return [
        button
        for button in scope.get_by_role("button").all()
        if not button.get_attribute("aria-label") and not button.inner_text().strip()
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_id", nargs="?")
    parser.add_argument("--experiment", default="demo")
    parser.add_argument("--out", default=str(store.project_root() / "docs" / "ui"))
    args = parser.parse_args(argv)
    client = mlflow.MlflowClient(store.tracking_uri())
    run_id = args.run_id or newest_run(client, args.experiment)
    experiment_id = client.get_run(run_id).info.experiment_id
    last = len(client.get_metric_history(run_id, "loss"))  # the last epoch's step
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    route = f"experiments/{experiment_id}/runs/{run_id}"

    def base(tab: str = "") -> str:
        return ui_url("127.0.0.1", port, route + tab)

    server = subprocess.Popen(
        ui_command(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ui_env()
    )
    try:
        check_server(f"http://127.0.0.1:{port}", timeout=180.0)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1300})
            open_page(page, base(), "About this run")
            save(page, out / "run_overview.png")
            view = ui_url("127.0.0.1", port, image_view.route(experiment_id))
            attention_view(page, view, out / "attention_view.png")
            small = browser.new_page(viewport={"width": 640, "height": 560})
            attention_slider(small, view, out / "attention_slider.png", [0, 1, last])
            open_page(page, base("/system-metrics"), "System metrics")
            save(page, out / "system_metrics.png")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
