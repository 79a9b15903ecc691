"""A question answering model on the page (issue 33), its handlers called directly: it is listed and opens; the
Predict tab's boxes read as Question and Context; Analyze shows the answer that ``bv.answer`` gives for the same
inputs (the independent reference), the context with exactly ``context[start:end]`` highlighted and the n-best
table, or "no answer" with its score against the best span's; an empty question or context is refused with the
library's message; the tabs that do not read this head grey their Start with the reason; the Attention tab outlines
the question's, the context's and the answer's rows; the Attributions tab explains the span, its start, its end or
"no answer" with ``explain_answer`` and shows its numbers. A classifier on the same page is the positive control.

The models are test_answering's tiny BERTs with a span head steered to answer "joy" wherever it stands, or to
answer "no answer"."""

from __future__ import annotations

import html
import re
import shutil

import gradio as gr
import numpy as np
import pytest
from test_answering import build_steered

import bertviz_app as bv
from bertviz_app.ui import (
    Page,
    analysis,
    attention_tab,
    attribution_reader,
    batch_tab,
    evaluate_events,
    evaluate_reader,
    model_loading,
)

QUESTION = "what was the film"
CONTEXT = "the film was awful <b>the</b> movie joy & it was fun"  # HTML in the user's text comes back as text


@pytest.fixture(scope="module")
def qa_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qa-page")
    return {"joy": build_steered("bert", root / "joy", "joy"), "none": build_steered("bert", root / "none", None)}


@pytest.fixture()
def registry(settings, qa_dirs, tiny_model_dir):
    """The test's models folder with the "joy" reader and a classifier registered."""
    shutil.copytree(qa_dirs["joy"], settings.models_dir / "reader")
    shutil.copytree(tiny_model_dir, settings.models_dir / "clf")
    return settings


def make_page(settings, default: str) -> Page:
    with gr.Blocks():
        return Page(settings, default)


def analyze(page: Page, model: str, text: str, pair: str, target="span", threshold=0.0, tab="predict") -> dict:
    """Page.analyze to its end, its outputs merged (the last value of each)."""
    out = {}
    for step in page.analyze(model, text, pair, target, "pad", 50, True, 1, attention_tab.MEAN, False, False, True,
                             False, False, {"tab": tab}, {"measure": "raw"}, threshold):
        out.update(step)
    return out


def marked(answer_html: str) -> list[str]:
    """The highlighted text(s) of the answer box, unescaped."""
    return [html.unescape(m) for m in re.findall(r'<mark class="bv-answer-mark">(.*?)</mark>', answer_html, re.S)]


def shown_context(answer_html: str) -> str:
    """The context as the answer box shows it: its text, tags removed, unescaped."""
    body = re.search(r'<div class="bv-answer-context">(.*?)</div>', answer_html, re.S).group(1)
    return html.unescape(re.sub(r"<[^>]+>", "", body))


# --------------------------------------------------------------------------- listed and opened
def test_a_reader_is_listed_and_the_boxes_read_as_question_and_context(registry, tiny_model_dir):
    names = model_loading.model_choices("clf", registry)
    assert "reader" in names and "clf" in names
    # the Fine-tune tab's bases too: a classifier (or a tagger) is trained from its encoder with a fresh head
    assert "reader" in model_loading.model_choices("clf", registry, first=("encoder",))
    page = make_page(registry, "clf")
    p = page.p
    out = page.load_model("reader", "span")
    assert "answer spans from a context" in out[p.model_info]
    assert "**Answers:** a span of the context" in out[page.m.info] and "**Labels:**" not in out[page.m.info]
    assert out[p.text]["label"] == "Question" and out[p.pair]["label"] == "Context"
    assert "value" not in out[p.text] and "value" not in out[p.pair]  # what the user typed stays
    assert out[p.threshold]["visible"] is True and out[p.window]["visible"] is False
    back = page.load_model("clf", None)  # positive control: a classifier's boxes (and labels) as they were
    assert "**Labels:**" in back[page.m.info] and "**Answers:**" not in back[page.m.info]
    assert back[p.text]["label"] == "Text" and back[p.pair]["label"].startswith("Second text")
    assert back[p.threshold]["visible"] is False and back[p.window]["visible"] is True


# --------------------------------------------------------------------------- Predict: the answer
def test_analyze_shows_answers_answer_with_exactly_its_characters_highlighted(settings, qa_dirs):
    folder = str(qa_dirs["joy"])
    want = bv.answer(bv.load_model(folder, device="cpu"), QUESTION, CONTEXT)[0]  # the independent reference
    assert want.text == "joy" and not want.no_answer
    page = make_page(settings, folder)
    p = page.p
    out = analyze(page, folder, QUESTION, CONTEXT)
    box = out[p.answer]["value"]
    assert out[p.answer]["visible"] is True
    shown = html.unescape(re.search(r'<span class="bv-answer-text">(.*?)</span>', box).group(1))
    assert shown == want.text
    assert marked(box) == [CONTEXT[want.start:want.end]]
    assert shown_context(box) == CONTEXT  # the context exactly as given, its HTML escaped
    assert "<b>the</b>" not in box.split('class="bv-answer-context"')[1]
    assert f"score {want.score:.4f}" in box and f"no-answer score {want.no_answer_score:.4f}" in box
    table = out[p.n_best]["value"]
    assert list(table.columns) == ["answer", "start", "end", "score"]
    assert [tuple(r[:3]) for r in table.itertuples(index=False)] == [(s.text, s.start, s.end) for s in want.n_best]
    np.testing.assert_allclose(table["score"], [round(s.score, 4) for s in want.n_best])
    assert out[p.entities]["visible"] is False and out[p.label] is None  # not a tagger's nor a classifier's view
    assert out[p.status] == ""


def test_no_answer_is_said_with_its_score_against_the_best_spans_and_the_threshold_moves_it(settings, qa_dirs):
    folder = str(qa_dirs["none"])
    lm = bv.load_model(folder, device="cpu")
    want = bv.answer(lm, QUESTION, CONTEXT)[0]
    assert want.no_answer and want.n_best
    page = make_page(settings, folder)
    box = analyze(page, folder, QUESTION, CONTEXT)[page.p.answer]["value"]
    assert "No answer" in box and f"no-answer score {want.no_answer_score:.4f}" in box
    best = want.n_best[0]
    assert f"“{html.escape(best.text)}” at {best.score:.4f}" in box
    assert marked(box) == [] and shown_context(box) == CONTEXT
    # a threshold above the gap: the best span is the answer, as answer() says with that threshold
    gap = want.no_answer_score - best.score
    raised = bv.answer(lm, QUESTION, CONTEXT, no_answer_threshold=gap + 0.01)[0]
    assert not raised.no_answer
    box = analyze(page, folder, QUESTION, CONTEXT, threshold={"threshold": gap + 0.01})[page.p.answer]["value"]
    assert marked(box) == [CONTEXT[raised.start:raised.end]] and "No answer" not in box
    # the box moved after an Analyze: the analysed question answered again, and the value kept for the next one
    rec = analyze(page, folder, QUESTION, CONTEXT)[page.state]
    assert rec.answer.no_answer
    moved = page.change_threshold(rec, gap + 0.01)
    assert moved[page.p.chosen_threshold] == {"threshold": gap + 0.01}
    assert marked(moved[page.p.answer]["value"]) == [CONTEXT[raised.start:raised.end]]
    assert moved[page.state].answer == raised and moved[page.state].maps is rec.maps
    back = page.change_threshold(moved[page.state], None)  # an emptied box: 0, answer's default
    assert "No answer" in back[page.p.answer]["value"] and back[page.p.chosen_threshold] == {"threshold": 0.0}
    assert page.change_threshold(None, 2.0) == {page.p.chosen_threshold: {"threshold": 2.0}, page.p.status: ""}


@pytest.mark.parametrize(("question", "context", "which"), [("  ", CONTEXT, "The question"),
                                                             (QUESTION, "", "The context")])
def test_an_empty_question_or_context_is_refused_in_the_status_line(settings, qa_dirs, question, context, which):
    folder = str(qa_dirs["joy"])
    page = make_page(settings, folder)
    steps = []
    with pytest.raises(bv.InputError, match=which) as refused:
        for step in page.analyze(folder, question, context, "span", "pad", 50, True, 1, attention_tab.MEAN, False,
                                 False, True, False, False, {"tab": "predict"}, {"measure": "raw"}, 0.0):
            steps.append(step)
    with pytest.raises(bv.InputError) as library:  # the library's own message, word for word
        bv.answer(bv.load_model(folder, device="cpu"), question, context)
    assert str(refused.value) == str(library.value)
    last = steps[-1]
    assert last[page.p.status] == f"**Error:** {attention_tab.esc(str(library.value))}"
    assert page.p.text not in last and page.p.pair not in last  # the boxes keep what was typed
    assert last[page.p.answer]["visible"] is False  # nothing of another question is left shown


# --------------------------------------------------------------------------- the tabs that do not read it
def test_explain_a_file_greys_its_start_with_the_reason_and_evaluate_takes_a_reader(registry):
    page = make_page(registry, "clf")
    batch = batch_tab.Handlers(page.b, default="clf", settings=registry)
    off = batch.model_state("reader")
    assert off[page.b.start]["interactive"] is False and "question answering" in off[page.b.model_note]
    on = batch.model_state("clf")  # positive control
    assert on[page.b.start]["interactive"] is True and on[page.b.model_note] == ""
    ev = evaluate_events.Handlers(page.e, default="clf", settings=registry, predict_text=page.p.text,
                                  predict_pair=page.p.pair, tabs=page.tabs)
    reader = ev.suggest("reader")  # Evaluate takes a reader: its upload asks for a SQuAD file
    assert reader[page.e.start]["interactive"] is True
    assert reader[page.e.upload]["label"] == evaluate_reader.READER_UPLOAD
    on = ev.suggest("clf")
    assert on[page.e.start]["interactive"] is True
    # the classifier's compare-with list leaves the reader out, saying why
    values = [v for _, v in on[page.e.compare]["choices"]]
    assert "reader" not in values and "reader (a question answering model)" in on[page.e.compare]["info"]


def test_a_classifier_run_from_a_readers_encoder_has_compare_with_its_base_greyed(registry, tiny_model_dir):
    """Fine-tune's Compare with the base shows the base's class probabilities: a run whose base is a reader gets it
    greyed with the reason; a run from a classifier keeps it (the control)."""
    import json
    from types import SimpleNamespace

    from bertviz_app.ui.finetune_tab import Handlers

    runs = registry.models_dir / "runs"
    for run, base in (("fromreader", "reader"), ("fromclf", "clf")):
        shutil.copytree(tiny_model_dir, runs / run)
        (runs / run / "run.json").write_text(json.dumps({"base": base}), encoding="utf-8")
    h = Handlers(SimpleNamespace(), settings=registry, default="clf", model_dd="model", predict_text="text",
                 predict_pair="pair", tabs="tabs")
    zip_btn, cmp_btn, _, _, note = h.on_run("runs/fromreader")
    assert zip_btn["interactive"] is True and cmp_btn["interactive"] is False
    assert "The base of runs/fromreader, reader, is a question answering model" in note
    zip_btn, cmp_btn, _, _, note = h.on_run("runs/fromclf")
    assert cmp_btn["interactive"] is True and note == ""
    # a base given as a folder is read from its config too
    (runs / "fromreader" / "run.json").write_text(json.dumps({"base": str(registry.models_dir / "reader")}))
    assert h.on_run("runs/fromreader")[1]["interactive"] is False


def test_a_question_answering_file_given_to_fine_tune_sets_the_reader_task(settings, tmp_path, tiny_model_dir):
    """A SQuAD file uploaded to Fine-tune is read as questions and sets the reader's task (the classifier's and the
    tagger's readers each say it holds questions, not a parse error of theirs), and nothing clears it; a table is
    read as before (the control)."""
    import json

    from bertviz_app.ui import finetune_reader, guards
    from bertviz_app.ui.finetune_tab import Handlers

    from conftest import as_uploaded

    squad = tmp_path / "train.json"
    squad.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
        "context": CONTEXT, "qas": [
            {"id": "q1", "question": QUESTION, "answers": [{"text": "joy", "answer_start": CONTEXT.index("joy")}],
             "is_impossible": False},
            {"id": "q2", "question": "who", "answers": [], "is_impossible": True}]}]}]}), encoding="utf-8")
    page = make_page(settings, str(tiny_model_dir))
    f = page.f
    h = Handlers(f, settings=settings, default=str(tiny_model_dir), model_dd=page.m.model, predict_text=page.p.text,
                 predict_pair=page.p.pair, tabs=page.tabs)
    out = h.on_upload(as_uploaded(squad))
    assert out[f.table] is None and out[f.tagged] is None
    assert "holds 2 questions for question answering (SQuAD JSON)" in out[f.refused]
    assert out[f.tagged_refused] == out[f.refused]
    after = h.after_upload(out[f.refused], guards.Refusal(), "", out[f.task_now], out[f.tagged_refused])
    assert out[f.task_now] == finetune_reader.QUESTION and len(out[f.qa].examples) == 2
    assert f.upload not in after or after[f.upload] is not None  # the file stays
    table = tmp_path / "train.csv"  # the control: a table of texts and labels is read
    table.write_text("text,label\n" + "".join(f"film {i} was good,pos\nfilm {i} was bad,neg\n" for i in range(8)))
    out = h.on_upload(as_uploaded(table))
    assert out[f.table] is not None and out[f.refused] is None


# --------------------------------------------------------------------------- Attention: the blocks marked
def test_the_attention_tab_outlines_the_question_the_context_and_the_answer(settings, qa_dirs, tiny_model_dir):
    folder = str(qa_dirs["joy"])
    page = make_page(settings, folder)
    a = page.a
    out = analyze(page, folder, QUESTION, CONTEXT, tab="attention")
    rec = out[page.state]
    info = rec.maps.info
    q = [i for i, s in enumerate(info.sequence_ids) if s == 0]
    c = [i for i, s in enumerate(info.sequence_ids) if s == 1]
    joy = info.tokens.index("joy")
    shapes = sorted((s.y0, s.y1, s.name) for s in out[a.heatmap].layout.shapes)
    assert shapes == sorted([(q[0] - 0.5, q[-1] + 0.5, "question"), (c[0] - 0.5, c[-1] + 0.5, "context"),
                             (joy - 0.5, joy + 0.5, "answer · joy")])
    assert f"tokens {q[0]}-{q[-1]}" in out[a.note] and f"token {joy}" in out[a.note]
    np.testing.assert_allclose(rec.maps.weights.astype(np.float32),
                               bv.attention(bv.load_model(folder, device="cpu"), QUESTION, pair=CONTEXT).weights,
                               atol=1e-3)
    # with [CLS]/[SEP] hidden the question's rows move up by one, the context's by two ([CLS] and the [SEP] between)
    fig, _, _ = attention_tab.render_focus(rec, 1, attention_tab.MEAN, True, False)
    assert sorted(s.y0 for s in fig.layout.shapes) == [q[0] - 1.5, c[0] - 2.5, joy - 2.5]
    with pytest.raises(bv.InputError, match="an answer reads its whole context"):
        attention_tab.check_document(rec)
    # positive control: a classifier's map has no outline
    clf = analyze(page, str(tiny_model_dir), "a gorgeous film", "", target="span", tab="attention")
    assert not clf[a.heatmap].layout.shapes and clf[a.note] == ""


# --------------------------------------------------------------------------- Attributions: the span explained
def test_the_attributions_tab_explains_the_span_its_start_its_end_and_no_answer(settings, qa_dirs, tiny_model_dir):
    folder = str(qa_dirs["joy"])
    lm = bv.load_model(folder, device="cpu")
    page = make_page(settings, folder)
    t = page.t
    out = analyze(page, folder, QUESTION, CONTEXT, target="(predicted class)", tab="attributions")
    rec = out[page.state]
    assert rec.target == "span" and rec.explained.target.text == "joy"
    assert [v for _, v in out[t.target]["choices"]][:4] == ["span", "start", "end", "no-answer"]
    assert "Explaining the span “joy”" in out[t.delta]
    follow = page.follow_choices(rec, folder, "span", "pad", [])
    assert follow[t.tagger_note]["visible"] is True and follow[t.tagger_note]["value"] == attribution_reader.ANSWER_NOTE
    assert follow[t.cmp.panel]["visible"] is False and follow[t.cls_row]["visible"] is False
    for target, span, part in (("start", None, "start"), ("end", None, "end"), ("no-answer", "no-answer", "span")):
        again = page.explain_again(rec, target, "pad", 50, False, {}, 1, attention_tab.MEAN, False, False, True,
                                   progress=lambda *a, **k: None)
        got = again[page.state].explained
        [want] = bv.explain_answer(lm, QUESTION, CONTEXT, span, part=part, n_steps=50)  # the reference
        assert got.f_x == pytest.approx(want.f_x, rel=1e-5) and got.delta == pytest.approx(want.delta, abs=1e-5)
        np.testing.assert_allclose(got.scores, want.scores, atol=1e-5)
        line = again[t.delta]
        assert f"**F(x)** = {want.f_x:.6g}" in line and f"**convergence delta** {want.delta:+.3e}" in line
        assert f"**sum of scores** {float(np.sum(want.scores)):+.6g}" in line
        words = again[t.tokens]  # the question's and the context's words, each side named, escaped
        assert "Q: film" in words and "C: joy" in words and "C: &lt;" in words and "C: <" not in words
    with pytest.raises(bv.InputError, match="Choose the answer span"):
        page.explain_again(rec, "positive", "pad", 50, False, {}, 1, attention_tab.MEAN, False, False, True,
                           progress=lambda *a, **k: None)
    # positive control: a classifier analysed after it gets its classes and parts back
    clf = analyze(page, str(tiny_model_dir), "a gorgeous film", "", target="span", tab="attributions")
    follow = page.follow_choices(clf[page.state], str(tiny_model_dir), "span", "pad", [])
    assert follow[t.tagger_note]["visible"] is False and follow[t.cmp.panel]["visible"] is True
    assert isinstance(clf[page.state], analysis.Record) and clf[page.p.answer]["visible"] is False
