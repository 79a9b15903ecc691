"""A question answering model as the app's model in a real browser (issue 33): the Predict tab's boxes read as
Question and Context, Analyze shows the answer ``bv.answer`` gives for the same inputs (the independent reference)
with exactly ``context[start:end]`` highlighted in the context and the n-best spans listed; an empty question is
refused in the status line with the context kept; Explain a file and Evaluate grey their Start with the reason; the
Attention tab says where the question, the context and the answer are; the Attributions tab explains the span and
its start with the convergence numbers, and its start again by KernelSHAP with its faithfulness. A classifier loaded
after it gets its Text box, its class probabilities and the tabs back (the positive control). The reader is
test_answering's tiny BERT steered to answer "joy"."""

from __future__ import annotations

import os
import shutil

import pytest

from conftest import CHROMIUM, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
expect = sync_api.expect

from test_answering import build_steered  # noqa: E402
from test_browser_choices import choose, load_model, options, wait_options  # noqa: E402

import bertviz_app as bv  # noqa: E402

TIMEOUT_MS = 120_000
QUESTION = "what was the film"
CONTEXT = "the film was awful <b>the</b> movie joy & it was fun"


def analyze(page) -> None:
    page.get_by_role("tab", name="Predict").click()
    page.locator("#bv-analyze").click()
    expect(page.locator("#bv-analyze")).to_have_text("Analyze")  # the button is back: the analysis has ended


def toasts(page) -> list[str]:
    return page.locator(".toast-body").evaluate_all("els => els.map((e) => e.textContent)")


def test_a_reader_answers_on_the_page_and_the_other_tabs_say_what_they_read(browser, tmp_path_factory,
                                                                            tiny_model_dir, capfd):
    root = tmp_path_factory.mktemp("qa-app")
    folder = build_steered("bert", root / "joy", "joy")
    registry = root / "models"
    registry.mkdir()
    shutil.copytree(folder, registry / "reader")
    shutil.copytree(tiny_model_dir, registry / "clf")  # a classifier to switch to
    want = bv.answer(bv.load_model(str(folder), device="cpu"), QUESTION, CONTEXT)[0]  # the reference
    assert want.text == "joy" and len(want.n_best) > 1
    with served_app(str(folder), BERTVIZ_MODELS_DIR=registry) as url:
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        # the boxes read as the head does; Analyze answers
        expect(page.locator("#bv-model-info")).to_contain_text("answer spans from a context")
        expect(page.locator("#bv-text")).to_contain_text("Question")
        expect(page.locator("#bv-pair")).to_contain_text("Context")
        expect(page.locator("#bv-text textarea")).to_have_attribute("placeholder", "Type the question to answer "
                                                                                    "from the context…")
        expect(page.locator("#bv-no-answer-threshold")).to_be_visible()
        # the reader's examples (a question and its context), not the classifier's reviews
        expect(page.locator("#bv-reader-examples")).to_contain_text("Who directed the film?")
        expect(page.locator("#bv-examples")).to_be_hidden()
        page.locator("#bv-text textarea").fill(QUESTION)
        page.locator("#bv-pair textarea").fill(CONTEXT)
        analyze(page)
        box = page.locator("#bv-answer")
        expect(box.locator(".bv-answer-text")).to_have_text(want.text)
        expect(box.locator("mark.bv-answer-mark")).to_have_count(1)
        mark = box.locator("mark.bv-answer-mark").text_content()
        assert mark == CONTEXT[want.start:want.end]
        assert box.locator(".bv-answer-context").text_content() == CONTEXT  # as given, its HTML shown as text
        table = page.locator("#bv-n-best")
        for s in want.n_best[:3]:
            expect(table).to_contain_text(s.text)
        expect(page.locator("#bv-label")).to_be_hidden()  # no empty "Class probabilities" box for a reader
        expect(page.locator("#bv-prob-bar")).to_be_hidden()
        assert not toasts(page)
        # the no-answer threshold: the analysed question answered again at once, and the value kept for Analyze
        lm = bv.load_model(str(folder), device="cpu")
        assert bv.answer(lm, QUESTION, CONTEXT, no_answer_threshold=-1.0)[0].no_answer  # the reference says so
        threshold = page.locator("#bv-no-answer-threshold input")
        threshold.fill("-1")
        threshold.press("Tab")
        expect(box).to_contain_text("No answer")
        expect(box.locator("mark.bv-answer-mark")).to_have_count(0)
        analyze(page)
        expect(box).to_contain_text("No answer")
        threshold.fill("0")
        threshold.press("Tab")
        expect(box.locator(".bv-answer-text")).to_have_text(want.text)
        # an empty question: the library's refusal in the status line, the context kept (and in a toast, as for
        # any refused Analyze)
        page.locator("#bv-text textarea").fill("")
        page.locator("#bv-analyze").click()
        expect(page.locator("#bv-status")).to_contain_text("The question is empty")
        expect(page.locator("#bv-pair textarea")).to_have_value(CONTEXT)
        page.locator("#bv-text textarea").fill(QUESTION)
        analyze(page)
        expect(box.locator(".bv-answer-text")).to_have_text(want.text)
        # the Attention tab marks the blocks; the Attributions tab explains the span, then its start
        page.get_by_role("tab", name="Attention").click()
        expect(page.locator("#bv-attn-note")).to_contain_text("the question in blue")
        expect(page.locator("#bv-attn-note")).to_contain_text("the answer “joy” in red")
        page.get_by_role("tab", name="Attributions").click()
        delta = page.locator("#bv-delta")
        expect(delta).to_contain_text("Explaining the span “joy”")
        expect(delta).to_contain_text("convergence delta")
        expect(delta).to_contain_text("sum of scores")
        expect(page.locator("#bv-attr-tagger")).to_contain_text("A question answering model")
        wait_options(page, "#bv-target", lambda o: "its start: p(start)" in o)
        choose(page, "#bv-target", "its start: p(start)")
        page.locator("#bv-explain").click()
        expect(delta).to_contain_text("Explaining the start of “joy”")
        expect(page.locator("#bv-attr-tokens")).to_contain_text("C: joy")
        # the same target by KernelSHAP, with its faithfulness; a sample count under 2 refused in the panel's line
        samples = page.locator("#bv-span-samples input")
        samples.fill("64")
        samples.press("Tab")
        page.locator("#bv-span-run").click()
        reading = page.locator("#bv-span-reading")
        expect(reading).to_contain_text("KernelSHAP of the start of “joy”")
        expect(reading).to_contain_text("comprehensiveness")
        expect(reading).to_contain_text("sufficiency")
        expect(page.locator("#bv-span-tokens")).to_contain_text("C: joy")
        samples.fill("0")
        samples.press("Tab")
        page.locator("#bv-span-run").click()
        expect(page.locator("#bv-span-status")).to_contain_text("at least 2, got 0")
        # the tabs that do not read this head: greyed, with why
        page.get_by_role("tab", name="Explain a file").click()
        expect(page.locator("#bv-bx-start")).to_be_disabled()
        expect(page.locator("#bv-bx-model-note")).to_contain_text("question answering")
        page.get_by_role("tab", name="Evaluate").click()  # Evaluate takes a reader: a SQuAD file
        expect(page.locator("#bv-ev-start")).to_be_enabled()
        expect(page.locator("#bv-ev-upload")).to_contain_text("Question answering file")
        page.get_by_role("tab", name="Model").click()
        assert "reader" in options(page, "#bv-model")  # listed by name too
        # positive control: a classifier loaded after it
        load_model(page, "clf")
        page.get_by_role("tab", name="Predict").click()
        expect(page.locator("#bv-text")).to_contain_text("Text")
        expect(page.locator("#bv-text")).not_to_contain_text("Question")
        expect(page.locator("#bv-text textarea")).to_have_value(QUESTION)  # what was typed stays
        expect(page.locator("#bv-no-answer-threshold")).to_be_hidden()
        expect(page.locator("#bv-examples")).to_contain_text("a joy from start to finish")  # its examples back
        expect(page.locator("#bv-reader-examples")).to_be_hidden()
        analyze(page)
        for label in bv.load_model(str(tiny_model_dir), device="cpu").labels:  # its class probabilities
            # the control: a classifier's box is back (its whole analysis, IG and the [CLS] path included, beside
            # another browser test on 2 cores: one CI run's box was still empty at expect's 30 s)
            expect(page.locator("#bv-label")).to_contain_text(label, timeout=TIMEOUT_MS)
            expect(page.locator("#bv-prob-bar")).to_be_visible()
        expect(page.locator("#bv-answer")).to_be_hidden()
        page.get_by_role("tab", name="Attributions").click()
        expect(page.locator("#bv-span-methods")).to_be_hidden()  # a reader's panel: not a classifier's
        page.get_by_role("tab", name="Explain a file").click()
        expect(page.locator("#bv-bx-start")).to_be_enabled()
        page.get_by_role("tab", name="Evaluate").click()
        expect(page.locator("#bv-ev-start")).to_be_enabled()
        assert "Traceback" not in page.content()
        ctx.close()
    assert "Traceback" not in capfd.readouterr().err  # nor in the server's log
