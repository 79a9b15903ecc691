"""A tagger (a token classifier) on the Attention and Attributions tabs in a real browser: Analyze draws the text's
attention with the entities' rows outlined; the Attributions tab lists the text's entities as targets, explains the
one chosen, and the numbers it shows are ``bv.explain_entities``' on the same text; the classifier's parts are not
offered. A classifier analysed after it gets its classes and parts back (the positive control). The tagger is
test_tagging's tiny BERT trained to tag "joy" as a person and "slog" as a place."""

from __future__ import annotations

import os
import re
import shutil

import pytest

from conftest import CHROMIUM, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
expect = sync_api.expect

from test_browser_choices import choose, load_model, wait_options  # noqa: E402
from test_tagging import BIO, build_tagger, train_tagger  # noqa: E402

import bertviz_app as bv  # noqa: E402
from bertviz_app.ui.control_values import DELTA_WARN, PREDICTED  # noqa: E402

TIMEOUT_MS = 120_000
TEXT = "the film was joy and it was a slog"


def shown_number(text: str, name: str) -> float:
    """The number the Attributions tab's line gives after ``**name** =``."""
    found = re.search(rf"{re.escape(name)} = ([-+]?[0-9.]+(?:e[-+]?[0-9]+)?)", text)
    assert found, text
    return float(found.group(1))


def word_score(page, word: str) -> float:
    """The score the coloured word ``word`` shows on hover (``title="word: +1.2345"``)."""
    title = page.locator(f'#bv-attr-tokens .bv-tok[title^="{word}:"]').first.get_attribute("title")
    return float(title.split(":")[1])


def analyze(page, text: str) -> None:
    page.get_by_role("tab", name="Predict").click()
    page.locator("#bv-text textarea").fill(text)
    page.locator("#bv-analyze").click()
    expect(page.locator("#bv-analyze")).to_have_text("Analyze")  # the button is back: the analysis is done
    expect(page.locator("#bv-analyze")).to_be_enabled()


def test_a_taggers_attention_and_entity_attributions(browser, tmp_path_factory, tiny_model_dir, capfd):
    root = tmp_path_factory.mktemp("tagger-charts")
    folder = train_tagger(build_tagger("bert", root / "bert", BIO))
    registry = root / "models"
    registry.mkdir()
    shutil.copytree(tiny_model_dir, registry / "clf")  # a sequence classifier to switch to
    lm = bv.load_model(str(folder), device="cpu")
    tagged = bv.tag(lm, TEXT)[0]
    assert [(e.text, e.label) for e in tagged.entities] == [("joy", "PER"), ("slog", "LOC")]
    [ref] = bv.explain_entities(lm, TEXT, 1, tolerance=DELTA_WARN)  # "slog", as the page explains it
    slog = next(w for w in ref.words if w.word == "slog")
    assert abs(slog.score) > 1.0  # a number worth comparing
    entities = ["joy · PER (words 4-4)", "slog · LOC (words 9-9)"]
    with served_app(str(folder), BERTVIZ_MODELS_DIR=registry) as url:
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        analyze(page, TEXT)
        expect(page.locator("#bv-entities")).to_contain_text("slog")
        # Attention: the maps drawn (every layer and head), the entities' rows named and outlined, no [CLS] row
        page.get_by_role("tab", name="Attention").click()
        page.wait_for_selector("#bv-heatmap .js-plotly-plot .heatmaplayer")
        page.wait_for_selector("#bv-overview .js-plotly-plot .heatmaplayer")
        note = page.locator("#bv-attn-note")
        expect(note).to_contain_text("token classifier")
        expect(note).to_contain_text("“joy” · PER (token 4)")
        expect(note).to_contain_text("“slog” · LOC (token 9)")
        expect(page.locator("#bv-heatmap .shapelayer path")).to_have_count(2)  # the two entities' rows
        expect(page.locator("#bv-cls-rows")).to_contain_text("No [CLS] row for a tagger")
        expect(page.locator("#bv-attn-status")).to_have_text("")
        # Attributions: the entities and the words as targets, no class; the classifier's parts hidden, and why
        page.get_by_role("tab", name="Attributions").click()
        offered = wait_options(page, "#bv-target", lambda o: set(entities) <= set(o))
        assert set(entities) <= set(offered) and "why “film” is O (word 2)" in offered, offered
        assert not {PREDICTED, "negative", "positive", "O", "B-PER"} & set(offered), offered
        expect(page.locator("#bv-attr-tagger")).to_contain_text("Not offered for a tagger")
        for hidden in ("#bv-compare-panel", "#bv-doc-panel", "#bv-cls-path"):
            expect(page.locator(hidden)).to_be_hidden()
        delta = page.locator("#bv-delta")
        expect(delta).to_contain_text("Explaining the entity “joy” · PER")  # Analyze explained the first one
        choose(page, "#bv-target", entities[1])
        page.locator("#bv-explain").click()
        expect(delta).to_contain_text("Explaining the entity “slog” · LOC")
        expect(page.locator("#bv-attr-status")).to_have_text("")
        line = delta.inner_text()
        assert shown_number(line, "F(x)") == pytest.approx(ref.f_x, rel=1e-3, abs=1e-6)
        assert shown_number(line, "F(baseline)") == pytest.approx(ref.f_baseline, rel=1e-4)
        assert f"steps {ref.n_steps} " in line
        assert word_score(page, "slog") == pytest.approx(slog.score, rel=1e-3)
        page.wait_for_selector("#bv-attr-bar .js-plotly-plot .barlayer")
        assert page.locator(".toast-title").count() == 0
        # a text without entities: said, nothing explained by itself, its words offered ("why O")
        analyze(page, "the film was good")
        page.get_by_role("tab", name="Attributions").click()
        expect(delta).to_contain_text("This text has no entities")
        offered = wait_options(page, "#bv-target", lambda o: "why “good” is O (word 4)" in o)
        assert not set(entities) & set(offered), offered
        choose(page, "#bv-target", "why “film” is O (word 2)")
        page.locator("#bv-explain").click()
        expect(delta).to_contain_text("Explaining why “film” (word 2) is tagged O")
        expect(page.locator("#bv-attr-status")).to_have_text("")
        [why_o] = bv.explain_entities(lm, "the film was good", token=1, tolerance=DELTA_WARN)
        assert shown_number(delta.inner_text(), "F(baseline)") == pytest.approx(why_o.f_baseline, rel=1e-4)
        # positive control: a classifier analysed after it gets its classes and every part back
        expect(page.locator("#bv-label")).to_be_hidden()  # a tagger's page has no empty class probabilities box
        load_model(page, "clf")
        analyze(page, "a gorgeous film")
        expect(page.locator("#bv-label")).not_to_have_text("")
        expect(page.locator("#bv-label")).to_be_visible()
        page.get_by_role("tab", name="Attributions").click()
        offered = wait_options(page, "#bv-target", lambda o: "negative" in o)
        assert {PREDICTED, "negative", "positive"} <= set(offered) and not set(entities) & set(offered), offered
        expect(page.locator("#bv-compare-panel")).to_be_visible()
        expect(page.locator("#bv-attr-tagger")).to_be_hidden()
        expect(page.locator("#bv-explain")).to_have_text("Explain again with these settings")
        page.get_by_role("tab", name="Attention").click()
        expect(page.locator("#bv-attn-note")).to_have_text("")
        page.wait_for_selector("#bv-cls-rows .js-plotly-plot .heatmaplayer")
        assert "Traceback" not in page.content()
        ctx.close()
    # nor in the server's log: a page event whose target still showed a swapped-out choice had logged one
    assert "Traceback" not in capfd.readouterr().err
