"""A tagger (a token classifier) as the app's model in a real browser, on the tabs that used to offer it and then
refuse it: the Evaluate tab asks for a tagged file, evaluates an uploaded CoNLL file and shows the entity F1 that
``evaluate_tagged`` gives on the same file; Explain a file greys its Start and says why; a classifier chosen after
it gets both tabs back as they were (the positive control). The tagger is test_tagging's tiny BERT trained to tag
"joy" as a person and "slog" as a place; the file is test_choices' sentences of that task."""

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

from test_browser_choices import load_model  # noqa: E402
from test_choices import write_entity_conll  # noqa: E402
from test_tagging import BIO, build_tagger, train_tagger  # noqa: E402

import bertviz_app as bv  # noqa: E402
from bertviz_app.evaluate.tagger_evaluation import evaluate_tagged  # noqa: E402

TIMEOUT_MS = 120_000


def shown_f1(page) -> float:
    """The entity F1 the tagger's summary shows (its table's first row: "entity F1 | 0.xxx | interval")."""
    summary = page.locator("#bv-ev-tag-summary")
    expect(summary).to_contain_text("entity F1")
    found = re.search(r"entity F1\s+(\d\.\d{3})", summary.inner_text())
    assert found, summary.inner_text()
    return float(found.group(1))


def toasts(page) -> list[str]:
    """The texts of the error toasts on the page (collapsed ones too)."""
    return page.locator(".toast-body").evaluate_all("els => els.map((e) => e.textContent)")


def test_evaluate_and_explain_a_file_follow_the_models_head(browser, tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("tagger-tabs")
    folder = train_tagger(build_tagger("bert", root / "bert", BIO))
    registry = root / "models"
    registry.mkdir()
    shutil.copytree(tiny_model_dir, registry / "clf")  # a sequence classifier to switch to
    data = write_entity_conll(root / "test.conll", n=24, seed=5, noisy=True)
    want = evaluate_tagged(bv.load_model(str(folder), device="cpu"), str(data))
    # a number worth comparing: the tagger finds entities, misses some, finds some the file lacks
    assert 0.3 < want.entity_f1 < 0.95, want.report
    assert len({round(x, 3) for x in (want.entity_f1, want.precision, want.recall)}) == 3, want.report
    with served_app(str(folder), BERTVIZ_MODELS_DIR=registry) as url:
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        # Evaluate: the tagger's file asked for, no table columns, the file evaluated with progress to the end
        page.get_by_role("tab", name="Evaluate").click()
        expect(page.locator("#bv-ev-file-hint")).to_contain_text("File for this tagger")
        expect(page.locator("#bv-ev-upload")).to_contain_text("Tagged file")
        expect(page.locator("#bv-ev-text-col")).to_be_hidden()
        expect(page.locator("#bv-ev-start")).to_be_enabled()
        bad = root / "bad.conll"  # a token without its tag: the reader's refusal, with the line, in the status
        bad.write_text("the\tO\njoy\n\nit\tO\n", encoding="utf-8")
        page.locator("#bv-ev-upload input[type=file]").set_input_files(str(bad))
        expect(page.locator("#bv-ev-status")).to_contain_text("line 2 hold a token but no tag")
        page.locator("#bv-ev-upload input[type=file]").set_input_files(str(data))
        expect(page.locator("#bv-ev-notices")).to_contain_text("24 sentences")
        page.locator("#bv-ev-start").click()
        status = page.locator("#bv-ev-status")
        expect(status).to_contain_text("Done")
        expect(status).to_contain_text("Not stored")
        assert shown_f1(page) == pytest.approx(want.entity_f1, rel=2e-3)  # shown to 3 decimals
        expect(page.locator("#bv-ev-tag-summary")).to_contain_text("not stored")
        expect(page.locator("#bv-ev-tag-summary")).to_contain_text(want.report["verdict"].split(":")[0])
        types = page.locator("#bv-ev-tag-types")
        for t, scores in want.per_type.items():  # each type with its F1, as the table rounds it
            expect(types).to_contain_text(t)
            expect(types).to_contain_text(str(round(scores["f1"], 3)))
        expect(page.locator("#bv-ev-summary")).to_be_hidden()  # the classifier's results are not shown
        # Explain a file: Start greyed, and why
        page.get_by_role("tab", name="Explain a file").click()
        expect(page.locator("#bv-bx-start")).to_be_disabled()
        expect(page.locator("#bv-bx-model-note")).to_contain_text("is a tagger")
        expect(page.locator("#bv-bx-model-note")).to_contain_text("Explain a file reads sequence classifiers")
        expect(page.locator("#bv-bx-model-note")).to_contain_text("then open Attributions")
        assert not toasts(page)
        # positive control: a classifier chosen, both tabs are the classifier's again
        load_model(page, "clf")
        page.get_by_role("tab", name="Explain a file").click()
        expect(page.locator("#bv-bx-start")).to_be_enabled()
        expect(page.locator("#bv-bx-model-note")).to_have_text("")
        page.get_by_role("tab", name="Evaluate").click()
        expect(page.locator("#bv-ev-file-hint")).to_contain_text("File for this classifier")
        expect(page.locator("#bv-ev-notices")).to_contain_text("the tagged file read for a tagger was put away")
        expect(page.locator("#bv-ev-upload")).not_to_contain_text("test.conll")
        expect(page.locator("#bv-ev-text-col")).to_be_visible()
        expect(page.locator("#bv-ev-status")).not_to_contain_text("Error")
        assert not toasts(page)
        assert "Traceback" not in page.content()
        ctx.close()
