"""A tagger (a token classifier) opened as the app's model in a real browser: Analyze shows its entities
highlighted in the text and each word's tag, the classifier's outputs stay hidden, the Attention tab says what
its rows are, and the Model tab counts the token head. The tagger is test_tagging's tiny BERT trained to tag "joy" as a
person and "slog" as a place."""

from __future__ import annotations

import os

import pytest

from conftest import CHROMIUM, analyze_and_expect_entities, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_tagging import BIO, build_tagger, train_tagger  # noqa: E402

import bertviz_app as bv  # noqa: E402

TIMEOUT_MS = 120_000


def test_a_tagger_shows_its_entities_and_words_on_the_predict_tab(browser, tmp_path_factory):
    folder = train_tagger(build_tagger("bert", tmp_path_factory.mktemp("tagger-app") / "bert", BIO))
    text = "the film was joy and it was a slog"
    want = bv.tag(bv.load_model(str(folder), device="cpu"), text)[0]
    assert {e.label for e in want.entities} == {"PER", "LOC"}  # the reference finds both
    expect = sync_api.expect
    with served_app(str(folder), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("tagger-registry")) as url:
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        analyze_and_expect_entities(page, want, text)
        expect(page.locator("#bv-notice")).to_contain_text(f"{len(want.entities)} entities in {len(want.words)} words")
        words = page.locator("#bv-tag-words")
        expect(words).to_contain_text("B-PER")
        expect(words).to_contain_text("B-LOC")
        expect(page.locator("#bv-label")).to_be_hidden()  # no class probabilities box for a tagger
        expect(page.locator("#bv-prob-bar")).to_be_hidden()
        expect(page.locator("#bv-model-info")).to_contain_text("a tag per word")
        expect(page.locator("#bv-analyze")).to_have_text("Analyze")  # the button is back
        page.get_by_role("tab", name="Attention").click()
        expect(page.locator("#bv-attn-note")).to_contain_text("token classifier")  # its attention is drawn there
        page.get_by_role("tab", name="Model").click()
        expect(page.locator("#bv-model-summary")).to_contain_text("BertForTokenClassification")
        expect(page.locator("#bv-model-summary")).to_contain_text("Labels: O, B-PER, I-PER, B-LOC, I-LOC")
        assert page.locator(".toast-title").count() == 0
        assert "Traceback" not in page.content()
        ctx.close()
