"""Issue 22 on the Predict, Attention and Attributions tabs, in a real browser (Playwright + the
system Chromium): Analyze shows its progress and time left at the button, an error leaves nothing
of the previous text on the page, the comparison table's headers wrap between words, and the
legends say what is drawn. The app runs in-process with the tiny model."""

from __future__ import annotations

import os
import re

import pytest

from conftest import CHROMIUM, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
expect = sync_api.expect

TIMEOUT_MS = 90_000
LONG = "the film was good . " * 40  # > 64 tokens: the tiny model truncates it

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


def test_analyze_shows_progress_and_time_left_at_the_button_then_restores_it(page, app_url, monkeypatch):
    """The [CLS] path held until the test has seen the page while it runs (as on a long review): the
    button shows how far it is and the status line under it what runs (with the skip hint); once it is let
    go, the button is back and the line empty."""
    import threading

    import bertviz_app as core

    real, release = core.cls_path, threading.Event()

    def held_path(*args, **kwargs):
        if not release.wait(TIMEOUT_MS / 1000):
            raise AssertionError("the test never let the [CLS] path go")
        return real(*args, **kwargs)

    monkeypatch.setattr(core, "cls_path", held_path)  # the app runs in this process
    try:
        page.goto(app_url)
        page.locator("#bv-text textarea").fill(LONG)
        button, status = page.locator("#bv-analyze"), page.locator("#bv-status")
        expect(button).to_have_text("Analyze")
        button.click()
        expect(button).to_contain_text("Analyzing")
        expect(button).to_be_disabled()
        expect(status).to_contain_text("Skip Integrated Gradients")
        expect(button).to_have_text(re.compile(r"Analyzing… \d+% · about .+ left"))
        expect(status).to_contain_text("[CLS] path through the layers")
        expect(status).to_contain_text("the prediction and attention are ready")
        expect(page.locator("#bv-label")).to_contain_text("positive")  # shown while IG runs
        expect(button).to_be_disabled()  # still running: the path is held
    finally:
        release.set()
    expect(page.locator("#bv-predict-tokens .bv-tok").first).to_be_visible(timeout=TIMEOUT_MS)
    expect(button).to_have_text("Analyze")
    expect(button).to_be_enabled()
    expect(status).to_have_text("")
    assert "Traceback" not in page.content()


def test_a_failed_integrated_gradients_restores_the_button_and_says_so(page, app_url, monkeypatch):
    import bertviz_app as core

    def refused(*args, **kwargs):
        raise core.ResourceError("Not enough memory for the [CLS] path of this text; try a shorter text.")

    monkeypatch.setattr(core, "cls_path", refused)
    page.goto(app_url)
    page.locator("#bv-text textarea").fill("the film was great , a joy !")
    page.locator("#bv-analyze").click()
    expect(page.locator("#bv-status")).to_contain_text("Not enough memory for the [CLS] path")
    expect(page.locator("#bv-analyze")).to_have_text("Analyze")
    expect(page.locator("#bv-analyze")).to_be_enabled()
    expect(page.locator("#bv-status")).to_contain_text("Not enough memory")  # the refusal stays under the button
    expect(page.locator("#bv-label")).to_contain_text("positive")  # the quick part belongs to this text: kept
    page.get_by_role("tab", name="Attributions").click()
    expect(page.locator("#bv-delta")).to_contain_text("Integrated Gradients did not finish")
    assert "Traceback" not in page.content()


def test_an_error_clears_every_output_of_the_previous_text(page, app_url):
    page.goto(app_url)
    page.locator("#bv-skip-ig input[type=checkbox]").check()
    page.locator("#bv-text textarea").fill(LONG)
    page.locator("#bv-analyze").click()
    notice, label = page.locator("#bv-notice"), page.locator("#bv-label")
    expect(notice).to_contain_text("the text was truncated")
    expect(notice).to_contain_text("It is longer than this model reads")  # a capital after the full stop
    expect(label).to_contain_text("positive")
    expect(page.locator("#bv-analyze")).to_be_enabled()
    page.locator("#bv-text textarea").fill("   ")
    page.locator("#bv-analyze").click()
    expect(page.get_by_text("empty or whitespace only").first).to_be_visible()
    expect(notice).not_to_contain_text("truncated")
    expect(label).not_to_contain_text("positive")
    expect(page.locator("#bv-analyze")).to_have_text("Analyze")
    expect(page.locator("#bv-analyze")).to_be_enabled()
    page.get_by_role("tab", name="Attention").click()  # no chart of the previous text either
    page.wait_for_timeout(500)
    assert page.locator("#bv-heatmap .js-plotly-plot .xtick").filter(has_text="good").count() == 0
    assert "Traceback" not in page.content()


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


def test_compare_button_says_it_runs_and_comes_back_after_a_result_or_an_error(page, app_url, monkeypatch):
    """The comparison's results sit in a column hidden until they arrive: the button says it runs (the
    comparison held until the test has seen it)."""
    import threading

    import bertviz_app as core

    real, release = core.compare_methods, threading.Event()

    def held_compare(*args, **kwargs):
        if not release.wait(TIMEOUT_MS / 1000):
            raise AssertionError("the test never let the comparison go")
        return real(*args, **kwargs)

    monkeypatch.setattr(core, "compare_methods", held_compare)
    page.goto(app_url)
    page.locator("#bv-text textarea").fill("the film was great , a joy !")
    page.locator("#bv-analyze").click()
    expect(page.locator("#bv-predict-tokens .bv-tok").first).to_be_visible()
    page.get_by_role("tab", name="Attributions").click()
    run = page.locator("#bv-compare")
    try:
        run.click()
        expect(run).to_contain_text("Comparing methods")
        expect(run).to_be_disabled()
        expect(run).to_have_text(re.compile(r"Comparing methods… \d+ s so far"))
        expect(page.locator("#bv-compare-reading")).to_be_hidden()  # held: no result yet
    finally:
        release.set()
    expect(page.locator("#bv-compare-reading")).to_contain_text("Reading:")
    expect(run).to_have_text("Compare methods")
    expect(run).to_be_enabled()
    for box in page.locator("#bv-compare-methods input[type=checkbox]").all():
        box.uncheck()
    run.click()
    expect(page.get_by_text("Tick at least one method").first).to_be_visible()
    expect(run).to_have_text("Compare methods")
    expect(run).to_be_enabled()


def test_strong_cancelling_words_are_not_called_pale_in_the_exported_page(browser, tmp_path):
    """A sentence pair whose texts pull opposite ways (+-0.3 each, +0.002 in all): the words are
    drawn at full strength, and the warning over them says why instead of 'kept pale'."""
    import numpy as np

    import bertviz_app as core
    from bertviz_app.results import Attribution, TokenInfo

    info = TokenInfo(tokens=("[CLS]", "great", "[SEP]", "awful", "[SEP]"),
                     offsets=((0, 0), (0, 5), (0, 0), (0, 5), (0, 0)),
                     sequence_ids=(None, 0, None, 1, None), text="great", pair="awful", truncated=False)
    attr = Attribution(info=info, scores=np.array([0, 0.3, 0, -0.298, 0], dtype=np.float32), target="positive",
                       target_index=1, output="prob", f_x=0.502, f_baseline=0.5, delta=0.0, n_steps=50, baseline="pad")
    page_file = core.write_html(tmp_path / "pair.html", attr, model="tiny", min_change=0.05)
    ctx = browser.new_context(offline=True)
    page = ctx.new_page()
    page.goto(page_file.as_uri())
    great = page.locator(".bv-line .bv-tok").nth(1)
    assert great.inner_text() == "great"
    assert great.evaluate("e => getComputedStyle(e).backgroundColor") == "rgba(44, 160, 44, 0.85)"  # full strength
    warning = page.locator(".bv-warn")
    expect(warning).to_contain_text("cancel each other out")
    expect(warning).not_to_contain_text("pale")
    expect(page.locator(".bv-legend")).not_to_contain_text("pale")
    ctx.close()


def test_no_table_shows_placeholder_headers_before_a_run(page, app_url):
    """Issue 22: empty tables showed gradio's placeholder headers "1 2 3" before a run. Every table
    on every tab shows its real headers from the start, or is hidden until it has data."""
    page.goto(app_url)
    expect(page.locator("#bv-text textarea")).to_be_visible()
    seen = {}
    for tab in ("Predict", "Attention", "Attributions", "Model", "Fine-tune", "Explain a file"):
        page.get_by_role("tab", name=tab).click()
        expect(page.get_by_role("tab", name=tab)).to_have_attribute("aria-selected", "true")
        for table in page.locator("table:visible").all():
            headers = [h.strip() for h in table.locator("thead th").all_inner_texts() if h.strip()]
            seen.setdefault(tab, []).append(headers)
            assert not {"1", "2", "3"} <= set(headers), (tab, headers)
    # the tables that are there before a run name their columns
    assert any("precision" in h for h in seen["Fine-tune"]) and any("confidence" in h for h in seen["Fine-tune"])
    assert any("mean attribution" in h for h in seen["Explain a file"])
