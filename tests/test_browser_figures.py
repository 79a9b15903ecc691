"""Figures for papers in a real browser: a heatmap's and the coloured words' downloads are valid
vector SVG holding the tokens, and the PNGs are PNGs (issue 20)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import CHROMIUM, served_app

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

SVG = "{http://www.w3.org/2000/svg}"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TEXT = "the film was great < fun > !"  # markup characters reach the files escaped, and come back as given
WORDS = ["the", "film", "was", "great", "<", "fun", ">", "!"]


@pytest.fixture(scope="module")
def app_url(tiny_model_dir, tmp_path_factory):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("registry")) as url:
        yield url


def download(page, selector: str):
    with page.expect_download() as info:
        page.locator(selector).click()
    d = info.value
    return d.suggested_filename, Path(d.path()).read_bytes()


def svg_root(data: bytes) -> ET.Element:
    root = ET.fromstring(data)
    assert root.tag == f"{SVG}svg"
    return root


def test_heatmap_and_coloured_words_download_as_svg_and_png(browser, app_url):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = ctx.new_page()
    page.set_default_timeout(90_000)
    page.goto(app_url)
    page.locator("#bv-text textarea").fill(TEXT)
    page.locator("#bv-analyze").click()
    page.wait_for_selector("#bv-predict-tokens .bv-tok")

    page.get_by_role("tab", name="Attention").click()
    page.wait_for_selector("#bv-heatmap .js-plotly-plot .heatmaplayer")
    name, data = download(page, "#bv-heatmap-svg")
    assert name == "attention_layer1_mean_of_heads.svg"
    root = svg_root(data)
    texts = [e.text for e in root.iter(f"{SVG}text")]
    assert all(w in texts for w in WORDS)  # the tick labels are text
    assert not list(root.iter(f"{SVG}image"))  # the heatmap is vector: one rect per cell, no bitmap
    cells = [g for g in root.iter(f"{SVG}g") if g.get("class") == "bv-cells"]
    n = len(WORDS) + 2
    assert len(cells) == 1 and len(cells[0].findall(f"{SVG}rect")) == n * n
    assert all(r.get("fill", "").startswith("rgb(") for r in cells[0])
    name, data = download(page, "#bv-heatmap-png")
    assert name == "attention_layer1_mean_of_heads.png" and data.startswith(PNG_SIGNATURE)

    page.get_by_role("tab", name="Attributions").click()
    page.wait_for_selector("#bv-cls-path .js-plotly-plot .heatmaplayer")
    page.wait_for_selector("#bv-attr-bar .js-plotly-plot .barlayer .point", state="attached")
    name, data = download(page, "#bv-attr-bar-svg")  # a bar chart: plotly's own vector SVG
    assert name.endswith(".svg") and len(list(svg_root(data).iter(f"{SVG}path"))) >= n
    name, data = download(page, "#bv-download-svg")
    assert name == "attributions_integrated_gradients.svg"
    root = svg_root(data)
    shown = [g.find(f"{SVG}text").text for g in root.iter(f"{SVG}g") if g.get("class") == "bv-tok"]
    assert shown == ["[CLS]", *WORDS, "[SEP]"]
    name, data = download(page, "#bv-download-png")
    assert name == "attributions_integrated_gradients.png" and data.startswith(PNG_SIGNATURE)
    ctx.close()
