"""The Attention tab's measure choice (issue 20) in a real browser: picking value zeroing redraws the
tab's charts with that measure and says in one line what it is; the next Analyze keeps it."""

from __future__ import annotations

import os

import pytest

from conftest import CHROMIUM, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

TIMEOUT_MS = 90_000


@pytest.fixture(scope="module")
def app_url(tiny_model_dir, tmp_path_factory):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("registry")) as url:
        yield url


def analyze(page, text: str) -> None:
    page.get_by_role("tab", name="Predict").click()
    page.locator("#bv-text textarea").fill(text)
    page.locator("#bv-analyze").click()
    sync_api.expect(page.locator("#bv-predict-tokens .bv-line")).to_contain_text(text.split()[-1])


def pick(page, selector: str, option: str) -> None:
    box = page.locator(f"{selector} input")
    box.click()
    choice = page.get_by_role("option", name=option, exact=True)
    sync_api.expect(choice.first).to_be_visible()
    choice.first.click()


def test_value_zeroing_redraws_the_attention_tab_and_says_what_it_is(page, app_url):
    page.goto(app_url)
    analyze(page, "the film was great , a joy")
    page.get_by_role("tab", name="Attention").click()
    title = page.locator("#bv-heatmap .js-plotly-plot .gtitle")
    note = page.locator("#bv-measure-note")
    sync_api.expect(title).to_have_text("Layer 1, mean of heads")  # raw attention by default, as before
    sync_api.expect(note).to_contain_text("Raw attention weights")
    z_raw = page.evaluate("() => JSON.stringify(document.querySelector('#bv-heatmap .js-plotly-plot').data[0].z)")

    pick(page, "#bv-measure", "value zeroing")
    sync_api.expect(title).to_have_text("Value zeroing, layer 1, whole layer")
    sync_api.expect(note).to_contain_text("Value zeroing (Mohebbi et al. 2023)")
    sync_api.expect(note).to_contain_text("value vector is zeroed")
    z_vz = page.evaluate("() => JSON.stringify(document.querySelector('#bv-heatmap .js-plotly-plot').data[0].z)")
    assert z_vz != z_raw
    sync_api.expect(page.locator("#bv-head input")).to_have_value("whole layer")
    sync_api.expect(page.locator("#bv-rollout .js-plotly-plot .gtitle")).to_contain_text("Value zeroing aggregated")
    sync_api.expect(page.locator("#bv-overview .js-plotly-plot .gtitle")).to_contain_text("Value zeroing")
    sync_api.expect(page.locator("#bv-cls-rows .js-plotly-plot .gtitle")).to_contain_text("value zeroing")

    # the next Analyze draws the new text with the chosen measure
    analyze(page, "a tedious slog")
    page.get_by_role("tab", name="Attention").click()
    sync_api.expect(title).to_have_text("Value zeroing, layer 1, whole layer")
    ticks = page.locator("#bv-heatmap .js-plotly-plot .xtick")
    sync_api.expect(ticks.filter(has_text="slog").first).to_be_visible()

    pick(page, "#bv-measure", "raw attention")  # and back: the tab as it was
    sync_api.expect(title).to_have_text("Layer 1, mean of heads")
    sync_api.expect(note).to_contain_text("Raw attention weights")
