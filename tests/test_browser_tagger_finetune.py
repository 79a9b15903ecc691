"""The Fine-tune tab trains a tagger in a real browser (Playwright + the system Chromium, as
tests/test_browser_finetune.py): a classifier's table shows its column fields (the control), a tagged CoNLL upload
hides them, sets the task and fixes the mode; Start trains the tiny model on test_tagger_training's sentences
(sentiment words are entities); the result shows the run.json's entity F1 and verdict; Send to explorer opens the
new tagger on the Predict tab, whose Analyze shows its entities (as tests/test_browser_tagger.py reads them)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import CHROMIUM, analyze_and_expect_entities, open_page, served_app, start_finetune  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_finetune_ui import write_csv  # noqa: E402
from test_tagger_finetune_ui import write_conll  # noqa: E402

import bertviz_app as bv  # noqa: E402

TIMEOUT_MS = 120_000
TOKEN_TASK = "token classification (tagger: a tag per word)"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    return tmp_path_factory.mktemp("tagger-ft-browser-registry")


@pytest.fixture(scope="module")
def app_url(tiny_model_dir, registry):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=registry) as url:
        yield url


def test_a_tagged_upload_trains_a_tagger_that_the_explorer_opens(browser, app_url, registry, tiny_model_dir,
                                                                 tmp_path):
    expect = sync_api.expect
    page = open_page(browser, TIMEOUT_MS)
    page.goto(app_url)
    page.get_by_role("tab", name="Fine-tune").click()
    upload = page.locator("#bv-ft-upload input[type=file]")
    task = page.locator("#bv-ft-task")

    # the control: a classifier's table shows the column fields, the sequence task and every mode
    upload.set_input_files(str(write_csv(tmp_path / "reviews.csv", n=24)))
    expect(page.locator("#bv-ft-report")).to_contain_text("Ready to train")
    expect(page.locator("#bv-ft-text-col")).to_be_visible()
    expect(page.locator("#bv-ft-multi, #bv-ft-pair-col").first).to_be_visible()
    expect(task.get_by_label("sequence classification (a label per text)")).to_be_checked()
    expect(page.get_by_label("probe: frozen encoder + logistic regression")).to_be_enabled()

    # a tagged file: read as sentences, the task set, the classifier's fields hidden, the mode fixed at full
    page.locator("#bv-ft-upload button[aria-label='Clear']").first.click()
    upload.set_input_files(str(write_conll(tmp_path / "train.conll")))
    expect(page.locator("#bv-ft-report")).to_contain_text("Ready to train a tagger")
    expect(page.locator("#bv-ft-notices")).to_contain_text("120 sentences")
    expect(page.locator("#bv-ft-preview")).to_contain_text("entities")
    expect(task.get_by_label(TOKEN_TASK)).to_be_checked()
    expect(page.locator("#bv-ft-text-col")).to_be_hidden()
    expect(page.locator("#bv-ft-label-col")).to_be_hidden()
    expect(page.get_by_label("probe: frozen encoder + logistic regression")).to_be_disabled()
    expect(page.locator("#bv-ft-mode")).to_contain_text("a tagger trains every weight")

    start_finetune(page, tiny_model_dir, "browser-ner", epochs=12, batch=16, lr=0.01, patience=0)
    expect(page.locator("#bv-ft-status")).to_contain_text("Done", timeout=TIMEOUT_MS)
    info = json.loads((registry / "runs" / "browser-ner" / "run.json").read_text())
    assert info["task"] == "token-classification"
    f1 = info["metrics"]["entity_f1"]
    expect(page.locator("#bv-ft-metrics")).to_contain_text(f"Entity F1 {f1:.3f}")
    expect(page.locator("#bv-ft-verdict")).to_contain_text(
        "Learned. runs/browser-ner (tagger)" if info["verdict"]["learned"] else "Not learned.")
    page.wait_for_selector("#bv-ft-curves .js-plotly-plot .scatterlayer .trace")
    expect(page.locator("#bv-ft-per-class")).to_contain_text("POS")
    expect(page.locator("#bv-ft-runs")).to_contain_text("runs/browser-ner (tagger, entity F1")
    assert "Traceback" not in page.content()

    # Send to explorer: the new tagger on the Predict tab; Analyze shows its entities
    page.locator("#bv-ft-send").click()
    text_box = page.locator("#bv-text textarea")
    expect(text_box).not_to_have_value("")
    text = text_box.input_value()
    want = bv.tag(bv.load_model(str(registry / "runs" / "browser-ner"), device="cpu"), text)[0]
    assert want.entities  # the sentence sent holds an entity the tagger finds
    analyze_and_expect_entities(page, want)
    page.get_by_role("tab", name="Model").click()
    expect(page.locator("#bv-model input")).to_have_value("runs/browser-ner")
    assert page.locator(".toast-title").count() == 0
    page.context.close()
