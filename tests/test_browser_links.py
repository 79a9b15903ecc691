"""Shareable links (issue 21) in a real browser: the view copied as a link opens the same view in a fresh
browser (text, tab, layer, head, measure, the heatmap drawn, the same prediction); a crafted link restores
nothing dangerous, says in one line what it ignored, shows its text as text and runs no script of it."""

from __future__ import annotations

import logging
import os
import urllib.parse

import pytest

from conftest import CHROMIUM, open_page, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
expect = sync_api.expect

TIMEOUT_MS = 90_000


@pytest.fixture(scope="module")
def app_url(tiny_model_dir, tmp_path_factory):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("registry")) as url:
        yield url


def pick(page, selector: str, option: str) -> None:
    page.locator(f"{selector} input").click()
    choice = page.get_by_role("option", name=option, exact=True)
    expect(choice.first).to_be_visible()
    choice.first.click()


def set_slider(page, selector: str, value: int) -> None:
    box = page.locator(f"{selector} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def heatmap_title(page):
    return page.locator("#bv-heatmap .js-plotly-plot .gtitle")


def test_a_copied_link_opens_the_same_view_in_a_fresh_browser(browser, app_url, tiny_model_dir, capfd, caplog):
    caplog.set_level(logging.WARNING)
    text = "the film was great , a joy"
    page = open_page(browser, TIMEOUT_MS)
    try:
        page.goto(app_url)
        page.locator("#bv-text textarea").fill(text)
        page.locator("#bv-analyze").click()
        expect(page.locator("#bv-predict-tokens .bv-line")).to_contain_text("joy")
        label = page.locator("#bv-label .output-class").inner_text()
        page.get_by_role("tab", name="Attention").click()
        pick(page, "#bv-measure", "attention-norm")
        expect(heatmap_title(page)).to_have_text("Attention-norm, layer 1, whole layer")
        set_slider(page, "#bv-layer", 2)
        pick(page, "#bv-head", "head 2")
        expect(heatmap_title(page)).to_have_text("Attention-norm, layer 2, head 2")
        # the address bar follows the view by itself
        page.wait_for_function("() => window.location.search.includes('head=2')")
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_url.rstrip("/"))
        page.locator("#bv-copy-link").click()
        expect(page.locator("#bv-link-note")).to_have_text("Link copied.")
        link = page.locator("#bv-link textarea, #bv-link input").first
        url = link.input_value()
        assert page.evaluate("() => navigator.clipboard.readText()") == url
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        assert query == {"model": [str(tiny_model_dir)], "text": [text], "tab": ["attention"], "measure": ["norm"],
                         "layer": ["2"], "head": ["2"]}
        assert page.evaluate("() => window.location.href") == url  # the address bar holds it too
    finally:
        page.context.close()

    fresh = open_page(browser, TIMEOUT_MS)  # another browser context: nothing shared but the link
    try:
        fresh.goto(url)
        # the link is read by the page's load event and the view drawn by a queued analysis: seconds under load
        expect(fresh.locator("#bv-text textarea")).to_have_value(text, timeout=TIMEOUT_MS)
        expect(fresh.get_by_role("tab", name="Attention")).to_have_attribute("aria-selected", "true")
        expect(heatmap_title(fresh)).to_have_text("Attention-norm, layer 2, head 2", timeout=TIMEOUT_MS)
        expect(fresh.locator("#bv-layer input[type=number]")).to_have_value("2")
        expect(fresh.locator("#bv-head input")).to_have_value("head 2")
        expect(fresh.locator("#bv-measure input")).to_have_value("attention-norm")
        fresh_link = fresh.locator("#bv-link textarea, #bv-link input").first
        expect(fresh_link).to_have_value(url)  # the same link again
        fresh.get_by_role("tab", name="Predict").click()
        expect(fresh.locator("#bv-label .output-class")).to_have_text(label)
        expect(fresh.locator("#bv-link-notice")).to_be_empty()  # nothing ignored
        # the link follows the tab opened on the restored page (Predict: no tab in the link)
        expect(fresh_link).to_have_value(url.replace("&tab=attention", ""))
    finally:
        fresh.context.close()
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_crafted_link_restores_nothing_dangerous_and_says_what_it_ignored(browser, app_url, capfd, caplog):
    caplog.set_level(logging.WARNING)
    text = "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script> a good film"
    query = urllib.parse.urlencode({"model": "../../etc", "text": text, "pair": "b" * 20_001, "tab": "attention",
                                    "layer": "99"})  # a second text past max_chars (20,000 by default)
    page = open_page(browser, TIMEOUT_MS)
    try:
        page.goto(app_url + "?" + query)
        notice = page.locator("#bv-link-notice")
        expect(notice).to_contain_text("From the link: ignored model '../../etc' (not a registered model)")
        expect(notice).to_contain_text("layer 99 (the model has 2 layers: 1-2)")
        expect(notice).to_contain_text("the second text (20,001 characters; this app reads at most 20,000)")
        expect(page.locator("#bv-pair textarea")).to_have_value("")
        expect(page.locator("#bv-text textarea")).to_have_value(text)  # the text, literally
        expect(page.get_by_role("tab", name="Attention")).to_have_attribute("aria-selected", "true")
        expect(heatmap_title(page)).to_have_text("Layer 1, mean of heads")  # analysed on the app's model
        page.get_by_role("tab", name="Predict").click()
        expect(page.locator("#bv-predict-tokens .bv-line")).to_contain_text("film")
        assert page.evaluate("() => window.__pwned") is None
        # the address bar now holds what is shown: the ignored model and layer are gone from it
        page.wait_for_function("() => !window.location.search.includes('layer=')")
        search = urllib.parse.parse_qs(page.evaluate("() => window.location.search").lstrip("?"))
        assert search["text"] == [text] and search["model"] != ["../../etc"] and "layer" not in search
        assert page.locator("#bv-link-notice img, #bv-link-notice script, #bv-predict-tokens img").count() == 0
    finally:
        page.context.close()
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
