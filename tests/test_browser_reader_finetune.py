"""The Fine-tune tab trains a reader (question answering, issue 33) in a real browser (Playwright + the system Chromium,
as tests/test_browser_tagger_finetune.py): a SQuAD CSV upload sets the task to question answering, says what was read
and hides the classifier's column fields; Start trains the tiny model one epoch on test_answer_finetune's questions;
the result shows the run.json's exact match, F1 and verdict (against the two guesses); Send to explorer opens the new
reader on the Predict tab, whose boxes read Question and Context and hold one of its questions, and Analyze answers
it as ``bv.answer`` does."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import CHROMIUM, open_page, served_app, start_finetune  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_answer_finetune import _examples, _write  # noqa: E402

import bertviz_app as bv  # noqa: E402

TIMEOUT_MS = 120_000
READER_TASK = "question answering (reader: an answer span from a context)"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    return tmp_path_factory.mktemp("reader-ft-browser-registry")


@pytest.fixture(scope="module")
def app_url(tiny_model_dir, registry):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=registry) as url:
        yield url


def test_a_squad_upload_trains_a_reader_that_the_explorer_opens(browser, app_url, registry, tiny_model_dir,
                                                                 tmp_path):
    expect = sync_api.expect
    page = open_page(browser, TIMEOUT_MS)
    page.goto(app_url)
    page.get_by_role("tab", name="Fine-tune").click()
    task = page.locator("#bv-ft-task")
    expect(task.get_by_label("sequence classification (a label per text)")).to_be_checked()  # before the upload

    _, table = _write(tmp_path, _examples(80, seed=1))
    page.locator("#bv-ft-upload input[type=file]").set_input_files(str(table))
    expect(task.get_by_label(READER_TASK)).to_be_checked()
    expect(page.locator("#bv-ft-notices")).to_contain_text("train.csv: 80 questions on 80 contexts")
    expect(page.locator("#bv-ft-report")).to_contain_text("Ready to train a reader")
    expect(page.locator("#bv-ft-report")).to_contain_text("unanswerable")
    expect(page.locator("#bv-ft-preview")).to_contain_text("answer_start")
    expect(page.locator("#bv-ft-text-col")).to_be_hidden()
    expect(page.locator("#bv-ft-label-col")).to_be_hidden()
    expect(page.get_by_label("probe: frozen encoder + logistic regression")).to_be_disabled()
    expect(page.locator("#bv-ft-mode")).to_contain_text("a reader trains every weight")

    start_finetune(page, tiny_model_dir, "browser-reader", epochs=1, batch=16, lr=0.01, patience=0)
    expect(page.locator("#bv-ft-status")).to_contain_text("Done", timeout=TIMEOUT_MS)
    info = json.loads((registry / "runs" / "browser-reader" / "run.json").read_text())
    assert info["task"] == "question-answering"
    m = info["metrics"]
    metrics = page.locator("#bv-ft-metrics")
    expect(metrics).to_contain_text(f"Exact match {m['exact']:.1%}")
    expect(metrics).to_contain_text(f"F1 {m['f1']:.3f}")
    expect(metrics).to_contain_text("always \"no answer\"")
    verdict = page.locator("#bv-ft-verdict")
    expect(verdict).to_contain_text(
        "Learned. runs/browser-reader (reader)" if info["verdict"]["learned"] else "Not learned.")
    expect(verdict).to_contain_text("where training answers most often stand")  # the fixed-position guess's reason
    page.wait_for_selector("#bv-ft-curves .js-plotly-plot .scatterlayer .trace")
    expect(page.locator("#bv-ft-runs")).to_contain_text("runs/browser-reader (reader, exact match")
    assert "Traceback" not in page.content()

    # Send to explorer: the new reader on the Predict tab, a question in Question and its context in Context
    page.locator("#bv-ft-send").click()
    question, context = page.locator("#bv-text textarea"), page.locator("#bv-pair textarea")
    expect(question).not_to_have_value("")
    expect(context).not_to_have_value("")
    expect(page.locator("#bv-text")).to_contain_text("Question")
    expect(page.locator("#bv-pair")).to_contain_text("Context")
    q, c = question.input_value(), context.input_value()
    assert (q, c) in {(e.question, e.context) for e in bv.read_squad(table).examples}  # one of its questions
    [want] = bv.answer(bv.load_model(str(registry / "runs" / "browser-reader"), device="cpu"), q, c)
    page.locator("#bv-analyze").click()
    answer = page.locator("#bv-answer")
    expect(answer).to_be_visible()
    expect(answer).to_contain_text("No answer" if want.no_answer else want.text)
    page.get_by_role("tab", name="Model").click()
    expect(page.locator("#bv-model input")).to_have_value("runs/browser-reader")
    assert page.locator(".toast-title").count() == 0
    page.context.close()
