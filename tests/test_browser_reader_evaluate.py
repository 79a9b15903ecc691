"""A question answering model (a span reader) evaluated in the Evaluate tab of a real browser (issue 33): the upload
asks for a SQuAD file, a small question/context/answer CSV is uploaded, Evaluate shows the exact match and F1 (with
their intervals) that ``evaluate_answers`` gives when called directly on the same file and model (the independent
reference), and the wrong answers' table lists the question it gets most wrong with its gold answer. A classifier
loaded after it gets the classifier's upload label, hint and columns back, and the reader's file is put away (the
positive control). The reader and the file are test_reader_evaluate_ui's: a tiny BERT with a seeded span head, gold
answers that are its own answers for some questions and other words for others. Before it, a SQuAD .json with an
answer not at its offset is refused in the status line with the reader's message.

A second test compares two readers in the browser (Compare with lists the other reader; the comparison shown is the
one ``compare_readers`` gives called directly) and clicks a wrong answer's row: the Predict tab opens with its
question in the Question box and its context in the Context box."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import CHROMIUM, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
expect = sync_api.expect

from test_answering import build_qa  # noqa: E402
from test_browser_choices import choose, load_model  # noqa: E402
from test_reader_evaluate_ui import write_reader_csv  # noqa: E402

import bertviz_app as bv  # noqa: E402
from bertviz_app.evaluate.answer_evaluation import compare_readers, evaluate_answers  # noqa: E402
from bertviz_app.ui import evaluate_reader, evaluate_tagger  # noqa: E402

TIMEOUT_MS = 120_000


def toasts(page) -> list[str]:
    """The texts of the error toasts on the page (collapsed ones too)."""
    return page.locator(".toast-body").evaluate_all("els => els.map((e) => e.textContent)")


def test_a_reader_is_evaluated_on_a_squad_csv_and_a_classifier_gets_its_upload_back(browser, tmp_path_factory,
                                                                                    tiny_model_dir, capfd):
    root = tmp_path_factory.mktemp("reader-evaluate")
    folder = build_qa("bert", root / "reader", seed=1)
    registry = root / "models"
    registry.mkdir()
    shutil.copytree(tiny_model_dir, registry / "clf")  # a classifier to switch to
    lm = bv.load_model(str(folder), device="cpu")
    data = write_reader_csv(lm, root / "questions.csv")
    want = evaluate_answers(lm, str(data))  # the reference, called directly
    assert 0 < want.exact < 1 and want.errors()
    worst = want.errors(1)[0]
    with served_app(str(folder), BERTVIZ_MODELS_DIR=registry) as url:
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        page.get_by_role("tab", name="Evaluate").click()
        # the reader's file asked for: SQuAD JSON or the CSV's columns; no table columns, no slice words
        expect(page.locator("#bv-ev-upload")).to_contain_text(evaluate_reader.READER_UPLOAD)
        expect(page.locator("#bv-ev-file-hint")).to_contain_text("File for this question answering model")
        expect(page.locator("#bv-ev-file-hint")).to_contain_text("answer_start")
        expect(page.locator("#bv-ev-text-col")).to_be_hidden()
        expect(page.locator("#bv-ev-words")).to_be_hidden()
        expect(page.locator("#bv-ev-start")).to_be_enabled()
        # SQuAD JSON (a .json: the upload takes it) with an answer not at its offset: the reader's refusal, said
        status = page.locator("#bv-ev-status")
        shifted = root / "shifted.json"
        qas = [{"id": "q-film", "question": "what was good", "answers": [{"text": "film", "answer_start": 6}]}]
        shifted.write_text(json.dumps({"data": [{"paragraphs": [{"context": "the film was good", "qas": qas}]}]}),
                           encoding="utf-8")
        page.locator("#bv-ev-upload input[type=file]").set_input_files(str(shifted))
        expect(status).to_contain_text("shifted.json was refused")
        expect(status).to_contain_text("q-film")
        expect(status).to_contain_text("not at its")
        page.locator("#bv-ev-upload input[type=file]").set_input_files(str(data))
        expect(page.locator("#bv-ev-notices")).to_contain_text(f"{want.n_questions} questions")
        expect(status).not_to_contain_text("refused")
        page.locator("#bv-ev-start").click()
        expect(status).to_contain_text("Done")
        expect(status).to_contain_text("Not stored")
        summary = page.locator("#bv-ev-qa-summary")
        iv = want.interval
        expect(summary).to_contain_text("exact match")
        for number in (f"{want.exact:.3f}", f"{iv['exact'][0]:.3f}–{iv['exact'][1]:.3f}", f"{want.f1:.3f}",
                       f"{iv['f1'][0]:.3f}–{iv['f1'][1]:.3f}", f"{want.no_answer_accuracy:.1%}"):
            expect(summary).to_contain_text(number)
        expect(summary).to_contain_text("unanswerable")
        expect(summary).to_contain_text("not stored")
        errors = page.locator("#bv-ev-qa-errors")
        expect(errors).to_contain_text(worst["question"])  # the lowest F1 first
        expect(errors).to_contain_text(" | ".join(worst["gold"]) or "(no answer)")
        expect(page.locator("#bv-ev-qa-slices")).to_contain_text("question word")
        expect(page.locator("#bv-ev-summary")).to_be_hidden()  # neither the classifier's results nor the tagger's
        expect(page.locator("#bv-ev-tagger")).to_be_hidden()
        assert not toasts(page)
        # positive control: a classifier loaded after it gets its upload, hint and columns back
        load_model(page, "clf")
        page.get_by_role("tab", name="Evaluate").click()
        expect(page.locator("#bv-ev-upload")).to_contain_text(evaluate_tagger.CLASSIFIER_UPLOAD)
        expect(page.locator("#bv-ev-upload")).not_to_contain_text(evaluate_reader.READER_UPLOAD)
        expect(page.locator("#bv-ev-file-hint")).to_contain_text("File for this classifier")
        expect(page.locator("#bv-ev-text-col")).to_be_visible()
        expect(page.locator("#bv-ev-words")).to_be_visible()
        expect(page.locator("#bv-ev-notices")).to_contain_text("the questions read for a question answering model "
                                                               "was put away")
        expect(page.locator("#bv-ev-upload")).not_to_contain_text("questions.csv")
        assert not toasts(page)
        assert "Traceback" not in page.content()
        ctx.close()
    assert "Traceback" not in capfd.readouterr().err  # nor in the server's log


def test_two_readers_compared_and_a_wrong_answer_opened_in_predict(browser, tmp_path_factory, capfd):
    root = tmp_path_factory.mktemp("reader-compare")
    folder = build_qa("bert", root / "reader", seed=1)
    registry = root / "models"
    registry.mkdir()
    build_qa("bert", registry / "reader-b", seed=2)  # another reader: another seeded span head
    lm, other = bv.load_model(str(folder), device="cpu"), bv.load_model(str(registry / "reader-b"), device="cpu")
    data = write_reader_csv(lm, root / "questions.csv")
    want = compare_readers(lm, other, str(data))  # the reference, called directly
    assert want.difference["f1"] != 0
    worst = want.a.errors(1)[0]  # the first wrong answer listed: A's lowest F1
    with served_app(str(folder), BERTVIZ_MODELS_DIR=registry) as url:
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        page.get_by_role("tab", name="Evaluate").click()
        expect(page.locator("#bv-ev-compare")).to_contain_text("another question answering model")
        page.locator("#bv-ev-upload input[type=file]").set_input_files(str(data))
        expect(page.locator("#bv-ev-notices")).to_contain_text(f"{want.a.n_questions} questions")
        choose(page, "#bv-ev-compare", "reader-b")
        page.locator("#bv-ev-start").click()
        status = page.locator("#bv-ev-status")
        expect(status).to_contain_text("Done")
        expect(status).to_contain_text(f"reader-b: exact match {want.b.exact:.3f}, F1 {want.b.f1:.3f}")
        box = page.locator("#bv-ev-qa-comparison")
        expect(box).to_contain_text("reader-b (B) on the same 10 questions")
        lo, hi = want.interval["f1"]
        for number in (f"{want.a.f1:.3f}", f"{want.b.f1:.3f}", f"{want.difference['f1']:+.3f}",
                       f"{lo:+.3f} to {hi:+.3f}", f"only A: {want.questions['only_a_right']}",
                       f"only B: {want.questions['only_b_right']}"):
            expect(box).to_contain_text(number)
        expect(box).to_contain_text("answers better" if want.better else "cannot tell them apart")
        # a wrong answer's row clicked: Predict opens with its question and its context
        expect(page.locator("#bv-ev-qa-errors")).to_contain_text(worst["question"])
        page.locator("#bv-ev-qa-errors [role=gridcell]").first.click()
        expect(page.get_by_role("tab", name="Predict")).to_have_attribute("aria-selected", "true")
        expect(page.locator("#bv-text")).to_contain_text("Question")
        expect(page.locator("#bv-text textarea")).to_have_value(worst["question"])
        expect(page.locator("#bv-pair textarea")).to_have_value(worst["context"])
        assert not toasts(page)
        assert "Traceback" not in page.content()
        ctx.close()
    assert "Traceback" not in capfd.readouterr().err  # nor in the server's log
