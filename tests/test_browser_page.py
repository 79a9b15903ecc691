"""Issue 22 on the Predict, Attention and Attributions tabs, in a real browser (Playwright + the
system Chromium): the comparison table's headers wrap between words, and the legends say what
is drawn. The app runs in-process with the tiny model."""

from __future__ import annotations

import os

import pytest

from conftest import CHROMIUM, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
expect = sync_api.expect

TIMEOUT_MS = 90_000

# Every word of a table header on one line: a word whose text boxes lie on two lines was split.
SPLIT_WORDS = """(root) => { const split = [];
  for (const th of root.querySelectorAll('thead th')) {
    const walk = document.createTreeWalker(th, NodeFilter.SHOW_TEXT); let node;
    while ((node = walk.nextNode())) {
      const re = /\\S+/g; let m;
      while ((m = re.exec(node.textContent))) {
        const r = document.createRange(); r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
        const lines = new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top)));
        if (lines.size > 1) split.push(m[0]);
      }
    }
  }
  return split; }"""


@pytest.fixture(scope="module")
def app_url(tiny_model_dir, tmp_path_factory):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("registry")) as url:
        yield url


@pytest.fixture()
def page(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = ctx.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    yield pg
    ctx.close()


def test_comparison_headers_wrap_between_words_and_legends_say_what_is_drawn(page, app_url):
    page.goto(app_url)
    page.locator("#bv-text textarea").fill("the film was great , a joy !")
    page.locator("#bv-analyze").click()
    expect(page.locator("#bv-predict-tokens .bv-tok").first).to_be_visible()
    page.get_by_role("tab", name="Attributions").click()
    page.locator("#bv-compare").click()
    table = page.locator("#bv-compare-table")
    expect(table.locator("[role=row]")).to_have_count(7)
    expect(table).to_contain_text("comprehensiveness")
    assert table.evaluate(SPLIT_WORDS) == []  # was ['comprehensiveness', 'sufficiency'] at 1280 px
    reading = page.locator("#bv-compare-reading").inner_text()
    assert "Reading:" in reading
    assert [m for m in core_labels() if "_" in m and m in reading] == []  # names, not ids like kernel_shap
    assert any(name in reading for name in core_labels().values())
    lines = page.locator("#bv-compare-tokens .bv-tokens")
    expect(lines).to_have_count(6)
    saliency = lines.filter(has_text="saliency (gradient norm):")
    expect(saliency.locator(".bv-legend")).to_contain_text("a magnitude with no direction")
    expect(saliency.locator(".bv-legend")).not_to_contain_text("pushes towards")
    expect(lines.filter(has_text="Integrated Gradients:").locator(".bv-legend")).to_contain_text("pushes towards")


def core_labels() -> dict:
    import bertviz_app as core

    return dict(core.METHOD_LABELS)
