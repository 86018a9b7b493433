"""The attention images in MLflow's UI (issue 42): a real `mlflow ui` over a store with one tiny
`textcls` run, the address `experiments ui` prints for the experiment's saved view *Attention*
opened in headless Chromium (Debian's, driven by Playwright: `make chromium`), and the pixels
of the probe's chart card compared with the image the run logged."""

from __future__ import annotations

import io
import subprocess
import tempfile
from pathlib import Path

import mlflow
import numpy as np
import pytest
from experiments_helpers import artifact_paths, runs, use_store, write_config, write_text_dataset
from PIL import Image
from scaleout_helpers import free_port

from experiments.commands import main
from experiments.commands.ui import stop_group, ui_command, ui_url
from experiments.tracking import image_view
from experiments.tracking.server import check_server

EPOCHS = 2
# A pixel of the heatmap: viridis colours are far from grey (their max - min channel is >= 60),
# the text, margins and the UI's greys are not.
CHROMA = 40
# How far the UI's copy (a WebP thumbnail) may be from a colour of the logged PNG.
TOLERANCE = 24


def _chroma(pixels: np.ndarray) -> np.ndarray:
    pixels = pixels.astype(int)
    return pixels.max(-1) - pixels.min(-1)


def _logged_image(uri: str, run_id: str, key: str, step: int) -> np.ndarray:
    """The full-size PNG the run logged as step `step` of the stepped image `key`."""
    prefix = f"images/{key}+step+{step}+"
    (path,) = [
        p
        for p in artifact_paths(uri, run_id)
        if p.startswith(prefix) and p.endswith(".png") and "+compressed" not in p
    ]
    with tempfile.TemporaryDirectory() as tmp:
        local = mlflow.artifacts.download_artifacts(
            run_id=run_id, artifact_path=path, dst_path=tmp, tracking_uri=uri
        )
        return np.asarray(Image.open(local).convert("RGB"))


@pytest.mark.slow
def test_the_attention_view_shows_each_probes_image_in_chromium(tmp_path, monkeypatch):
    try:
        from playwright.sync_api import sync_playwright

        from tools.screenshots import CHROMIUM, CHROMIUM_ARGS, chart_card, wait_for_image
    except ImportError as err:
        pytest.fail(f"Playwright is missing ({err}): `make chromium` installs it")
    assert Path(CHROMIUM).is_file(), f"no {CHROMIUM}: `make chromium` installs Debian's chromium"

    uri = use_store(tmp_path, monkeypatch)
    task = {"name": "textcls", "path": str(write_text_dataset(tmp_path)), "max_length": 12}
    task["num_probes"] = 1
    config = write_config(tmp_path, task, train={"epochs": EPOCHS}, tracking={"log_model": False})
    assert main(["run", str(config)]) == 0
    (run,) = runs(uri)
    key = "attention_probe_0"
    logged = _logged_image(uri, run.info.run_id, key, EPOCHS)  # the view opens on the last step
    heat = _chroma(logged) > CHROMA
    colours = np.unique(logged[heat], axis=0)
    assert heat.any() and len(colours) <= 64, len(colours)  # a heatmap of a few cells

    port = free_port()
    with open(tmp_path / "ui.log", "wb") as log:
        server = subprocess.Popen(
            ui_command(port), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        check_server(f"http://127.0.0.1:{port}", timeout=180.0)
        url = ui_url("127.0.0.1", port, image_view.route(run.info.experiment_id))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                page.goto(url)
                card = chart_card(page, key)
                try:
                    card.wait_for(timeout=90_000)
                except Exception as err:  # noqa: BLE001 - named below
                    text = page.locator("body").inner_text()[:2000]
                    pytest.fail(f"no {key} chart in the Attention view ({err!r}); page: {text}")
                wait_for_image(card)
                page.wait_for_timeout(1000)  # the image drawn
                shot = np.asarray(Image.open(io.BytesIO(card.screenshot())).convert("RGB"))
                card_box = card.bounding_box()
                image_box = card.locator("img").first.bounding_box()
            finally:
                browser.close()
    finally:
        stop_group(server)

    # The image lies inside the card, not cut off below the run's parameters.
    assert image_box["width"] >= 100, image_box
    assert card_box["y"] <= image_box["y"], (card_box, image_box)
    assert image_box["y"] + image_box["height"] <= card_box["y"] + card_box["height"]
    # The heatmap's pixels in the card: as many as the image's cells cover at the size shown.
    shown = _chroma(shot) > CHROMA
    near = np.abs(shot[shown][:, None, :].astype(int) - colours[None].astype(int)).max(-1)
    matching = int((near.min(-1) <= TOLERANCE).sum())
    expected = image_box["width"] * image_box["height"] * heat.mean()
    assert expected >= 500, expected
    assert matching >= 0.8 * expected, (matching, expected)
