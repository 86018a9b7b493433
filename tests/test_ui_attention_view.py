"""The attention images in MLflow's UI (issues 42, 50): runs tracked on a real `mlflow ui` server
(a SQLite store behind it), the address a run prints for its attention images (`its attention
images: ...`, the experiment's saved view *Attention*) opened as printed in headless Chromium
(Debian's, driven by Playwright: `make chromium`), and the pixels of each image in the probe's
chart card compared with the images the runs logged: with one run, and with two runs side by
side (neither cut off by the card)."""

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
from experiments.commands.ui import stop_group, ui_command, ui_env
from experiments.tracking.server import check_server

EPOCHS = 2
KEY = "attention_probe_0"
PRINTED = "its attention images: "
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


@pytest.fixture
def server(tmp_path, monkeypatch):
    """`experiments ui`'s `mlflow ui` over a fresh SQLite store, the runner pointed at the
    server (so a run prints the server's own addresses); stopped after the test."""
    use_store(tmp_path, monkeypatch)
    port = free_port()
    with open(tmp_path / "ui.log", "wb") as log:
        child = subprocess.Popen(
            ui_command(port),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env=ui_env(),
            start_new_session=True,
        )
    try:
        uri = f"http://127.0.0.1:{port}"
        check_server(uri, timeout=180.0)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        mlflow.set_tracking_uri(uri)
        yield uri
    finally:
        stop_group(child)


def _printed_view(tmp_path, capsys, seeds) -> list[str]:
    """Train a tiny `textcls` run per seed; the address each printed for its attention images."""
    task = {"name": "textcls", "path": str(write_text_dataset(tmp_path)), "max_length": 12}
    task["num_probes"] = 1
    config = write_config(tmp_path, task, train={"epochs": EPOCHS}, tracking={"log_model": False})
    printed = []
    for seed in seeds:
        capsys.readouterr()
        assert main(["run", str(config), "--set", f"train.seed={seed}"]) == 0
        lines = capsys.readouterr().out.splitlines()
        printed += [line.split(PRINTED, 1)[1] for line in lines if PRINTED in line]
    assert len(printed) == len(seeds), printed
    return printed


def _shown_images(url: str, names: list[str], shot: Path) -> tuple[dict, list]:
    """Open `url` as printed in Chromium: the probe's chart card's box, and the image each run
    of `names` has in it (its box and its pixels as drawn); the page is saved in `shot`."""
    try:
        from playwright.sync_api import sync_playwright

        from tools.screenshots import CHROMIUM, CHROMIUM_ARGS, chart_card, wait_for_image
    except ImportError as err:
        pytest.fail(f"Playwright is missing ({err}): `make chromium` installs it")
    assert Path(CHROMIUM).is_file(), f"no {CHROMIUM}: `make chromium` installs Debian's chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(url)
            card = chart_card(page, KEY)
            try:
                card.wait_for(timeout=90_000)
            except Exception as err:  # noqa: BLE001 - named below
                text = page.locator("body").inner_text()[:2000]
                pytest.fail(f"no {KEY} chart on the printed page ({err!r}); page: {text}")
            images = []
            for name in names:
                # the run's block: the innermost element holding its name and an image
                block = card.locator("div").filter(has_text=name).filter(has=page.locator("img"))
                try:
                    wait_for_image(block.last)
                except Exception as err:  # noqa: BLE001 - named below
                    page.screenshot(path=str(shot))
                    pytest.fail(f"no image of run {name} in the {KEY} card ({err!r}); see {shot}")
                images.append(block.last.locator("img >> visible=true").first)
            page.wait_for_timeout(1000)  # the images drawn
            # as the page opens: nothing scrolled (an element's own screenshot would scroll
            # a card's content to it)
            drawn = np.asarray(Image.open(io.BytesIO(page.screenshot(path=str(shot)))))
            shown = []
            for image in images:
                box = image.bounding_box()
                top, left = round(box["y"]), round(box["x"])
                pixels = drawn[top : top + round(box["height"]), left : left + round(box["width"])]
                shown.append((box, pixels[..., :3]))
            return card.bounding_box(), shown
        finally:
            browser.close()


def _assert_drawn_whole(card_box: dict, shown, logged: list[np.ndarray]) -> None:
    """Each image lies inside the card, not cut off, and its pixels are the heatmap's: as many
    as the logged image's cells cover at the size shown, in the logged colours."""
    assert len(shown) == len(logged), (len(shown), len(logged))
    heat = [_chroma(image) > CHROMA for image in logged]
    colours = np.unique(np.concatenate([i[h] for i, h in zip(logged, heat)]), axis=0)
    assert all(h.any() for h in heat) and len(colours) <= 128, len(colours)  # a few cells
    aspect = min(image.shape[0] / image.shape[1] for image in logged)  # height / width
    for box, pixels in shown:
        # at its own proportions (a card too short squeezes an image, its picture shrunk)
        assert box["width"] >= 100 and box["height"] >= 0.9 * aspect * box["width"], box
        assert card_box["y"] <= box["y"], (card_box, box)
        assert box["y"] + box["height"] <= card_box["y"] + card_box["height"], (card_box, box)
        assert box["x"] + box["width"] <= card_box["x"] + card_box["width"], (card_box, box)
        drawn = pixels[_chroma(pixels) > CHROMA]
        near = np.abs(drawn[:, None, :].astype(int) - colours[None].astype(int)).max(-1)
        matching = int((near.min(-1) <= TOLERANCE).sum())
        expected = box["width"] ** 2 * aspect * min(h.mean() for h in heat)
        assert expected >= 500, expected
        assert matching >= 0.8 * expected, (matching, expected)


@pytest.mark.slow
def test_the_address_a_run_prints_shows_its_attention_image(server, tmp_path, capsys):
    (url,) = _printed_view(tmp_path, capsys, seeds=[0])
    assert url.startswith(f"{server}/#/experiments/")
    (run,) = runs(server)
    logged = _logged_image(server, run.info.run_id, KEY, EPOCHS)  # the view opens on the last step
    card_box, shown = _shown_images(url, [run.info.run_name], tmp_path / "page.png")
    _assert_drawn_whole(card_box, shown, [logged])


@pytest.mark.slow
def test_with_two_runs_the_view_shows_both_images_whole(server, tmp_path, capsys):
    first, second = _printed_view(tmp_path, capsys, seeds=[0, 1])
    assert first == second  # the experiment's view, printed by both runs
    both = runs(server)
    logged = [_logged_image(server, r.info.run_id, KEY, EPOCHS) for r in both]
    names = [r.info.run_name for r in both]
    card_box, shown = _shown_images(second, names, tmp_path / "page.png")
    _assert_drawn_whole(card_box, shown, logged)
