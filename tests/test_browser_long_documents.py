"""Documents of any length (issue 20) in a real browser: a text longer than the tiny model's 64 tokens is
explained whole in the Attributions tab's windows panel (its coloured view reaches the text's last words,
and each window is listed), and the Attention tab's whole-document part reads it in windows, shows the
picked window's map and the [CLS] rows over every token. The part stays hidden for a text that fits."""

from __future__ import annotations

import os
import re

import pytest

from conftest import CHROMIUM, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

TIMEOUT_MS = 120_000
# ~190 tokens: several 64-token windows; the last words appear nowhere else in the text
LONG = " ".join(["the film was good , it is not a tedious slog ! joyless fun"] * 12) + " a gorgeous moving movie"


@pytest.fixture(scope="module")
def app_url(tiny_model_dir, tmp_path_factory):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("registry")) as url:
        yield url


def analyze(page, text: str) -> None:
    page.get_by_role("tab", name="Predict").click()
    page.locator("#bv-text textarea").fill(text)
    page.locator("#bv-analyze").click()
    sync_api.expect(page.locator("#bv-predict-tokens .bv-line")).to_contain_text(text.split()[0])
    sync_api.expect(page.locator("#bv-analyze")).to_be_enabled()  # Integrated Gradients done too


def open_panel(page, elem_id: str) -> None:
    page.locator(f"#{elem_id}").get_by_text("Whole document (windows)").first.click()


def test_a_long_document_explained_whole_and_its_attention_in_windows(page, app_url):
    page.goto(app_url)
    analyze(page, LONG)
    sync_api.expect(page.locator("#bv-notice, #bv-warnings").filter(has_text="truncated").first).to_be_visible()

    # Attributions: the whole document's coloured words reach the last words; every window is listed
    page.get_by_role("tab", name="Attributions").click()
    open_panel(page, "bv-doc-panel")
    page.locator("#bv-doc-run").click()
    reading = page.locator("#bv-doc-reading")
    sync_api.expect(reading).to_contain_text("windows")
    n = int(re.search(r"(\d+) windows", reading.inner_text()).group(1))
    assert n > 2
    tokens = page.locator("#bv-doc-tokens")
    for word in ("gorgeous", "moving", "movie"):
        sync_api.expect(tokens).to_contain_text(word)
    rows = page.locator("#bv-doc-windows [role=row]")  # gradio's table: a header row and one per window
    sync_api.expect(rows).to_have_count(n + 1)
    sync_api.expect(rows.last).to_contain_text(str(n - 1))

    # Attention: the part is there for this long text; it reads the windows on its own button, window 1 picked
    page.get_by_role("tab", name="Attention").click()
    panel = page.locator("#bv-attn-doc-panel")
    sync_api.expect(panel).to_be_visible()
    open_panel(page, "bv-attn-doc-panel")
    page.locator("#bv-attn-doc-run").click()
    doc_reading = page.locator("#bv-attn-doc-reading")
    sync_api.expect(doc_reading).to_contain_text(f"{n} windows")
    sync_api.expect(doc_reading).to_contain_text("Shown: window 0")
    title = page.locator("#bv-attn-doc-heatmap .js-plotly-plot .gtitle")
    sync_api.expect(title).to_contain_text("Window 0 (document tokens 1–")  # [CLS] is token 0
    box = page.locator("#bv-attn-doc-window input")
    box.click()
    choice = page.get_by_role("option", name=re.compile(r"^window 1: tokens \d+–\d+$"))
    sync_api.expect(choice.first).to_be_visible()
    assert page.get_by_role("option", name=re.compile(r"^window \d+: tokens")).count() == n
    choice.first.click()
    sync_api.expect(title).to_contain_text("Window 1 (document tokens")
    sync_api.expect(title).to_contain_text("layer 1, mean of heads")
    sync_api.expect(doc_reading).to_contain_text("Shown: window 1")
    page.wait_for_selector("#bv-attn-doc-heatmap .js-plotly-plot .heatmaplayer")
    # the merged [CLS] rows run over every token of the document, its last words included
    ticks = page.locator("#bv-attn-doc-cls .js-plotly-plot .xtick")
    sync_api.expect(ticks.filter(has_text="movie").first).to_be_attached()
    sync_api.expect(page.locator("#bv-attn-doc-agg .js-plotly-plot .gtitle")).to_contain_text("rollout")

    # a text that fits: no whole-document part
    analyze(page, "the film was good")
    page.get_by_role("tab", name="Attention").click()
    sync_api.expect(page.locator("#bv-heatmap .js-plotly-plot .heatmaplayer")).to_be_attached()
    sync_api.expect(panel).to_be_hidden()
