"""A question answering model (a span reader) evaluated in the Evaluate tab (issue 33), its handlers and view helpers
called directly: the tab asks for a SQuAD file when a reader is chosen, reads the upload with ``read_squad``, and
Evaluate shows what ``evaluate_answers`` gives when called directly on the same file and model (the independent
reference): EM and F1 with their intervals, the answerable and unanswerable parts, the no-answer accuracy, the slices
and the wrong answers worst first, capped, and that it is not stored. With a second reader in Compare with (which lists
the other readers, and only them), the comparison is what ``compare_readers`` gives called directly; a classifier as the
second model is refused. A wrong answer's row clicked opens its question and context in Predict. Bad files (a
classifier's table, a tagged file, answers not at their offsets, an empty file) are refused with the reader's own
message and nothing else on the tab lost; each refusal beside a file that is read (the positive control). A classifier
chosen after it gets its own upload back (the control that the classifier's tab is as it was).

The reader is test_answering's tiny BERT with a seeded random span head (``build_qa``, built in a second); the file's
gold answers are, for some questions, the model's own answers (so exact match is 1 there) and other words of the
context for others (wrong), with two unanswerable questions."""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import shutil
from types import SimpleNamespace

import gradio as gr
import pandas as pd
import pytest
from test_answer_evaluation import QUESTIONS, contexts, word_at
from test_answering import build_qa

import bertviz_app as bv
from bertviz_app.evaluate.answer_evaluation import compare_readers, evaluate_answers
from bertviz_app.train.data.squad import QAFile
from bertviz_app.ui import evaluate_events, evaluate_reader, evaluate_tab, evaluate_tagger
from bertviz_app.ui.streaming import CancelFlag

from conftest import as_uploaded

N_QUESTIONS = 10
OWN = (0, 1, 2, 3)  # questions whose gold answer is the model's own answer (exact match 1)
PARTIAL = (9,)  # ... its answer and the next word of the context (0 < F1 < 1)
UNANSWERABLE = (7, 8)


def write_reader_csv(lm, path, n: int = N_QUESTIONS):
    """A question/context/answer_text/answer_start CSV of ``n`` questions for ``lm``: the questions ``OWN`` have the
    model's own answer as their gold (taken with ``bv.answer`` at the no-answer threshold the evaluation uses for a
    file with unanswerable questions, 0), ``PARTIAL`` that answer with the next word of the context (not an article,
    which SQuAD's normalisation drops), ``UNANSWERABLE`` have none, the others a word of the context the model does
    not answer. Returns the path."""
    qs, cs = QUESTIONS[:n], contexts(n)
    got = bv.answer(lm, qs, cs, no_answer_threshold=0.0)
    rows = []
    for i, (q, c, a) in enumerate(zip(qs, cs, got)):
        if i in UNANSWERABLE or (i in OWN and a.no_answer):
            text, start = "", ""
        elif i in OWN:
            text, start = a.text, a.start
        elif i in PARTIAL and not a.no_answer:
            after = [(w, s) for w, s in words_of(c) if s >= a.end and w not in ("a", "an", "the")]
            text, start = (c[a.start:after[0][1] + len(after[0][0])], a.start) if after else ("", "")
        else:  # the first word of the context outside the model's answer, and none of its words
            text, start = next(((w, s) for w, s in words_of(c) if not a.start <= s < a.end and w not in a.text.split()),
                               ("", ""))
        rows.append([q, c, text, start])
    with open(path, "w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["question", "context", "answer_text", "answer_start"])
        out.writerows(rows)
    return path


def words_of(context: str) -> list[tuple[str, int]]:
    """Every whitespace word of ``context`` with its character start."""
    n = len(context.split(" "))
    return [word_at(context, k) for k in range(n)]


@pytest.fixture(scope="module")
def reader_dir(tmp_path_factory):
    return build_qa("bert", tmp_path_factory.mktemp("reader-eval-ui") / "reader", seed=1)


@pytest.fixture(scope="module")
def other_reader_dir(tmp_path_factory):
    """A second reader: the same tiny BERT with another seeded span head (other answers on the same questions)."""
    return build_qa("bert", tmp_path_factory.mktemp("reader-eval-ui-b") / "reader-b", seed=2)


@pytest.fixture(scope="module")
def reader(reader_dir):
    return bv.load_model(str(reader_dir), device="cpu")


@pytest.fixture(scope="module")
def data(reader, tmp_path_factory):
    """The file, and ``evaluate_answers`` on it called directly (the reference the tab must show)."""
    path = write_reader_csv(reader, tmp_path_factory.mktemp("reader-eval-data") / "questions.csv")
    ev = evaluate_answers(reader, str(path))
    assert 0 < ev.exact < ev.f1 < 1  # some right, some partly, some wrong: numbers worth comparing
    assert ev.no_answer is not None and ev.no_answer_accuracy is not None
    return path, ev


@pytest.fixture()
def registry(settings, reader_dir, other_reader_dir, tiny_model_dir):
    """The test's models folder with the reader (twice, to switch between readers), another reader and a
    classifier."""
    shutil.copytree(reader_dir, settings.models_dir / "reader")
    shutil.copytree(reader_dir, settings.models_dir / "reader2")
    shutil.copytree(other_reader_dir, settings.models_dir / "reader-b")
    shutil.copytree(tiny_model_dir, settings.models_dir / "clf")
    return settings


def tab(settings, default: str = "clf"):
    """The Evaluate tab laid out and wired (as the page wires it) and its handlers."""
    with gr.Blocks():
        model_dd = gr.Dropdown(choices=[default], value=default, allow_custom_value=True)
        text, pair = gr.Textbox(), gr.Textbox()
        with gr.Tabs() as tabs:
            with gr.Tab("Evaluate"):
                ui = evaluate_tab.build(default, settings=settings)
        h = evaluate_tab.wire(ui, demo=None, model_dd=model_dd, default=default, predict_text=text, predict_pair=pair,
                              tabs=tabs, settings=settings)
    return ui, h


def labelled_csv(path):
    """A classifier's table for the tiny classifier (classes negative and positive)."""
    rows = ["the film was good,positive", "the film was awful,negative", "it was fun,positive", "a slog,negative"]
    path.write_text("text,label\n" + "\n".join(rows * 3) + "\n", encoding="utf-8")
    return path


def run(h, model, table, refused=None, words="", compare="", columns=(None, None)) -> list[dict]:
    """Evaluate pressed: every output of the run, in order (``columns``: a classifier's text and label columns)."""
    return list(h.run(CancelFlag(), model, table, refused, *columns, "", words, compare, False))


def frame(update) -> pd.DataFrame:
    return update if isinstance(update, pd.DataFrame) else update["value"]


# --------------------------------------------------------------------------- the view helpers
def test_the_summary_says_em_and_f1_with_intervals_and_both_parts(data):
    _, ev = data
    md = evaluate_reader.summary_md(ev)
    iv = ev.interval
    assert (f"| **all** | {ev.n_questions} | {ev.exact:.3f} | {iv['exact'][0]:.3f}–{iv['exact'][1]:.3f} | "
            f"{ev.f1:.3f} | {iv['f1'][0]:.3f}–{iv['f1'][1]:.3f} |") in md
    for what, g in (("answerable", ev.has_answer), ("unanswerable", ev.no_answer)):
        assert (f"| {what} | {g['n']} | {g['exact']:.3f} | {g['interval']['exact'][0]:.3f}–"
                f"{g['interval']['exact'][1]:.3f} | {g['f1']:.3f} |") in md
    assert ev.has_answer["n"] + ev.no_answer["n"] == ev.n_questions == N_QUESTIONS
    assert f"**{ev.no_answer_accuracy:.1%}**" in md
    wrong = sum(e < 1 for e in ev.exact_scores)
    assert f"Wrong answers (not an exact match): {wrong} of {ev.n_questions}." in md
    assert evaluate_reader.NOT_STORED in md and "--json" in md and "not stored" in md
    assert "Verdict" not in md  # AnswerEvaluation has none: nothing made up
    judged = SimpleNamespace(**{k: getattr(ev, k) for k in ("model", "source", "format", "n_questions", "exact", "f1",
                                                           "interval", "has_answer", "no_answer", "exact_scores",
                                                           "no_answer_accuracy", "options", "notices")},
                             verdict="better than never answering")
    assert "**Verdict:** better than never answering" in evaluate_reader.summary_md(judged)  # one that has one: shown
    assert evaluate_reader.NOT_STORED not in evaluate_reader.summary_md(ev, stored_note=False)


def test_a_file_without_unanswerable_questions_has_no_unanswerable_part(reader, data, tmp_path):
    path, ev = data
    rows = list(csv.reader(path.open(encoding="utf-8")))
    kept = [rows[0]] + [r for r in rows[1:] if r[2]]  # SQuAD 1.1: every question answered
    (tmp_path / "v11.csv").write_text("\n".join(",".join(f'"{c}"' for c in r) for r in kept), encoding="utf-8")
    v11 = evaluate_answers(reader, str(tmp_path / "v11.csv"))
    assert v11.no_answer is None and v11.no_answer_accuracy is None
    md = evaluate_reader.summary_md(v11)
    assert "| unanswerable |" not in md and "| answerable |" not in md and "no unanswerable part" in md
    assert "No-answer threshold: never" in md
    assert "| unanswerable |" in evaluate_reader.summary_md(ev)  # positive control: the file with both has both


def test_slices_worst_first_and_wrong_answers_lowest_f1_first(data):
    _, ev = data
    slices = evaluate_reader.slices_frame(ev)
    assert list(slices.columns) == evaluate_reader.SLICE_COLUMNS
    want = sorted(ev.slices, key=lambda s: s.f1)
    assert list(zip(slices["kind"], slices["slice"], slices["questions"])) == [(s.kind, s.name, s.n_questions)
                                                                             for s in want]
    assert [float(x) for x in slices["F1"]] == pytest.approx([round(s.f1, 3) for s in want], abs=1e-12)
    assert {s.kind for s in want} == {"question word", "answer length", "context length"}
    errors = evaluate_reader.errors_frame(ev)
    assert list(errors.columns) == ["id", "question", "gold", "predicted", "F1"]
    ref = ev.errors(None)
    assert len(ref) == sum(e < 1 for e in ev.exact_scores) and len(errors) == len(ref)
    for (_, row), e in zip(errors.iterrows(), ref):
        assert row["id"] == str(e["id"]) and row["question"] == e["question"]
        assert row["gold"] == (" | ".join(e["gold"]) or "(no answer)")
        assert row["predicted"] == ("(no answer)" if e["no_answer"] else e["predicted"])
        assert row["F1"] == pytest.approx(round(e["f1"], 3))
    assert list(errors["F1"]) == sorted(errors["F1"])  # the lowest F1 first
    assert evaluate_reader.slices_frame(None).empty and evaluate_reader.errors_frame(None).empty


def test_the_wrong_answers_are_capped_and_the_summary_says_so(data, monkeypatch):
    _, ev = data
    wrong = sum(e < 1 for e in ev.exact_scores)
    assert wrong >= 3
    assert len(evaluate_reader.errors_frame(ev)) == wrong  # positive control: under the cap, all of them
    monkeypatch.setattr(evaluate_reader, "MAX_ERRORS", 2)
    capped = evaluate_reader.errors_frame(ev)
    assert len(capped) == 2 and list(capped["question"]) == [e["question"] for e in ev.errors(2)]
    assert "the 2 with the lowest F1 are listed below" in evaluate_reader.summary_md(ev)


def test_what_was_read_is_said(data):
    path, _ = data
    none = sum(not r["answer_text"] for r in csv.DictReader(path.open(encoding="utf-8")))  # counted by hand
    assert none >= len(UNANSWERABLE)
    md = evaluate_reader.read_md(bv.read_squad(str(path)))
    assert f"**{path.name}**: {N_QUESTIONS} questions (CSV; {none} without an answer). Press Evaluate." in md


# --------------------------------------------------------------------------- the handlers
def test_a_reader_gets_its_file_asked_for_and_a_classifier_its_own(registry):
    ui, h = tab(registry)
    out = h.suggest("reader")
    assert out[ui.start]["interactive"] is True and out[ui.model_note] == ""
    assert out[ui.upload]["label"] == evaluate_reader.READER_UPLOAD and out[ui.file_hint] == evaluate_reader.READER_FILE
    assert "SQuAD JSON" in out[ui.file_hint] and "answer_start" in out[ui.file_hint]
    assert out[ui.columns_row]["visible"] is False and out[ui.geometry]["visible"] is False
    assert out[ui.words]["visible"] is False  # its slices are fixed: no words to slice by
    # Compare with: the other readers (a copy of itself and another head's weights), never itself, no classifier
    assert sorted(v for _, v in out[ui.compare]["choices"]) == [evaluate_events.NONE, "reader-b", "reader2"]
    assert out[ui.compare]["value"] == evaluate_events.NONE
    info = out[ui.compare]["info"]
    assert info.startswith("another question answering model, on the same questions (optional)")
    assert "clf, encoder (a sequence classifier)" in info and "reader (the model evaluated)" in info
    assert ".json" in ui.upload.file_types and all(t in ui.upload.file_types for t in evaluate_tagger.FILE_TYPES)
    back = h.suggest("clf")  # the control: a classifier's upload, hint and controls as before
    assert back[ui.start]["interactive"] is True
    assert back[ui.upload]["label"] == evaluate_tagger.CLASSIFIER_UPLOAD
    assert back[ui.file_hint] == evaluate_tagger.CLASSIFIER_FILE
    assert back[ui.columns_row]["visible"] is True and back[ui.words]["label"] == "Slice by rows containing"
    assert "reader, reader-b, reader2 (a question answering model)" in back[ui.compare]["info"]  # not offered
    assert [v for _, v in back[ui.compare]["choices"]] == [evaluate_events.NONE]


def test_evaluate_shows_what_evaluate_answers_gives_and_stores_nothing(registry, data):
    path, ev = data
    ui, h = tab(registry)
    up = h.on_upload(as_uploaded(path), "reader")
    assert isinstance(up[ui.table], QAFile) and up[ui.refused] is None and up[ui.status] == ""
    assert f"{N_QUESTIONS} questions" in up[ui.notices]
    outs = run(h, "reader", up[ui.table], words="film")  # slice words are not read for a reader
    assert outs[0][ui.status].startswith("**Starting")
    out = outs[-1]
    assert out[ui.reader_box]["visible"] is True
    assert out[ui.classifier_box]["visible"] is False and out[ui.tagger_box]["visible"] is False
    assert out[ui.view] is None and ui.stored not in out
    ev = dataclasses.replace(ev, model="reader")  # the direct call's, on the model the tab names "reader"
    assert out[ui.qa_summary] == evaluate_reader.summary_md(ev)  # the same numbers as the direct call
    pd.testing.assert_frame_equal(frame(out[ui.qa_slices]), evaluate_reader.slices_frame(ev))
    pd.testing.assert_frame_equal(frame(out[ui.qa_errors]), evaluate_reader.errors_frame(ev))
    assert f"exact match {ev.exact:.3f}, F1 {ev.f1:.3f}" in out[ui.status] and "Not stored" in out[ui.status]
    assert not (registry.models_dir / "evaluations").is_dir() or not any(
        (registry.models_dir / "evaluations").iterdir())
    assert "questions" in evaluate_events.progress_line(4, 10, None, unit="questions")
    assert out[ui.qa_comparison] == ""  # no second reader: no comparison
    assert out[ui.qa_rows] == evaluate_reader.error_rows(ev) and len(out[ui.qa_rows]) == evaluate_reader.n_wrong(ev)


def test_a_classifiers_evaluation_after_a_readers_hides_the_readers_results(registry, data, tmp_path):
    path, _ = data
    ui, h = tab(registry)
    shown = run(h, "reader", h.on_upload(as_uploaded(path), "reader")[ui.table])[-1]
    assert shown[ui.reader_box]["visible"] is True
    up = h.on_upload(as_uploaded(labelled_csv(tmp_path / "reviews.csv")), "clf")
    assert not isinstance(up[ui.table], QAFile) and up[ui.label_col]["value"]
    out = run(h, "clf", up[ui.table], columns=("text", "label"))[-1]
    if ui.summary not in out:  # say why the control did not run
        pytest.fail(out[ui.status])
    assert out[ui.reader_box]["visible"] is False and out[ui.classifier_box]["visible"] is True


BAD = {
    "reviews.csv": ("text,label\nthe film was good,positive\nthe film was bad,negative\n", "text-classification"),
    "tagged.conll": ("the\tO\nfilm\tO\nwas\tO\njoy\tB-POS\n\nit\tO\nwas\tO\nfun\tB-POS\n", "token classifier"),
    "empty.csv": ("", "is empty"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_file_not_for_a_reader_is_refused_with_what_to_fix(registry, data, tmp_path, caplog, name):
    path, _ = data
    ui, h = tab(registry)
    good = h.on_upload(as_uploaded(path), "reader")  # positive control: the reader's file is read
    assert isinstance(good[ui.table], QAFile)
    content, says = BAD[name]
    bad = tmp_path / name
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(bv.DataError, match=says):  # the reader's own message, the reference
        bv.read_squad(str(bad))
    caplog.set_level(logging.INFO)
    up = h.on_upload(as_uploaded(bad), "reader")
    assert up[ui.table] is None and up[ui.upload] is None  # cleared: it does not look uploaded
    assert says in up[ui.status] and f"{name} was refused" in up[ui.status] and "Fix the file" in up[ui.status]
    assert "Upload SQuAD JSON" in up[ui.status]  # what the reader takes instead
    out = run(h, "reader", None, refused=up[ui.refused])[-1]  # Evaluate then: the refusal again, nothing drawn
    assert says in out[ui.status] and "Nothing was stored" in out[ui.status] and ui.qa_summary not in out
    assert "Traceback" not in up[ui.status] + out[ui.status]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]  # nor in the server log


def test_answers_not_at_their_offsets_are_named(registry, tmp_path):
    ui, h = tab(registry)
    context = "the film was good and the movie was fun"

    def squad(start: int) -> str:
        qa = {"id": "q-film", "question": "what was good", "answers": [{"text": "film", "answer_start": start}]}
        return json.dumps({"version": "v2.0", "data": [{"paragraphs": [{"context": context, "qas": [qa]}]}]})

    (tmp_path / "right.json").write_text(squad(context.index("film")), encoding="utf-8")
    up = h.on_upload(as_uploaded(tmp_path / "right.json"), "reader")  # positive control: at its offset, read
    assert isinstance(up[ui.table], QAFile) and "SQuAD JSON v2.0" in up[ui.notices]
    assert run(h, "reader", up[ui.table])[-1][ui.reader_box]["visible"] is True
    (tmp_path / "shifted.json").write_text(squad(context.index("film") + 2), encoding="utf-8")
    with pytest.raises(bv.DataError) as ref:
        bv.read_squad(str(tmp_path / "shifted.json"))
    assert "not at its" in str(ref.value) and "q-film" in str(ref.value)
    up = h.on_upload(as_uploaded(tmp_path / "shifted.json"), "reader")
    assert up[ui.table] is None and "q-film" in up[ui.status] and "not at its" in up[ui.status]


def test_a_file_read_for_one_head_is_put_away_when_another_is_chosen(registry, data, tmp_path):
    path, _ = data
    ui, h = tab(registry)
    questions = h.on_upload(as_uploaded(path), "reader")[ui.table]
    put = h.file_for_model("clf", questions)
    assert put[ui.table] is None and put[ui.upload] is None
    assert "the questions read for a question answering model was put away" in put[ui.notices]
    assert "Upload a labelled table" in put[ui.notices]
    kept = h.file_for_model("reader2", questions)  # positive control: another reader keeps it
    assert all(v == gr.skip() for v in kept.values()), kept
    table = h.on_upload(as_uploaded(labelled_csv(tmp_path / "reviews.csv")), "clf")[ui.table]
    put = h.file_for_model("reader", table)
    assert put[ui.table] is None and "is a question answering model:** the table read for a classifier" in (
        put[ui.notices]) and "SQuAD JSON" in put[ui.notices]
    assert all(v == gr.skip() for v in h.file_for_model("clf", table).values())  # a classifier keeps its table
    # a file of the other kind reaching Evaluate anyway (an old page): said, nothing run
    out = run(h, "clf", questions)[-1]
    assert "read as questions" in out[ui.status] and "a sequence classifier" in out[ui.status]
    out = run(h, "reader", table)[-1]
    assert "read as a classifier's table" in out[ui.status] and ui.qa_summary not in out
    assert "Upload a question answering file" in run(h, "reader", None)[-1][ui.status]  # none yet: what to upload


# --------------------------------------------------------------------------- two readers compared
def named(c, a: str, b: str):
    """A direct ``compare_readers`` with its two evaluations named as the tab names its models."""
    return dataclasses.replace(c, a=dataclasses.replace(c.a, model=a), b=dataclasses.replace(c.b, model=b))


def test_compare_with_a_second_reader_shows_what_compare_readers_gives(registry, data, reader, other_reader_dir):
    path, ev = data
    ui, h = tab(registry)
    table = h.on_upload(as_uploaded(path), "reader")[ui.table]
    outs = run(h, "reader", table, compare="reader-b")
    assert "then reader-b" in outs[0][ui.status] or any("then reader-b" in str(o.get(ui.status)) for o in outs)
    out = outs[-1]
    want = named(compare_readers(reader, bv.load_model(str(other_reader_dir), device="cpu"), str(path)), "reader",
                 "reader-b")
    assert want.difference["f1"] != 0  # two readers that answer differently: a comparison worth reading
    assert out[ui.qa_comparison] == evaluate_reader.comparison_md(want)
    md = out[ui.qa_comparison]
    assert "reader (A) and reader-b (B) on the same 10 questions" in md
    assert f"**{want.difference['f1']:+.3f}**" in md and f"**{want.difference['exact']:+.3f}**" in md
    lo, hi = want.interval["f1"]
    assert f"{lo:+.3f} to {hi:+.3f}" in md
    assert f"only A: **{want.questions['only_a_right']}**; only B: **{want.questions['only_b_right']}**" in md
    # A's own evaluation is drawn as without the comparison, and the status names both
    assert out[ui.qa_summary] == evaluate_reader.summary_md(dataclasses.replace(ev, model="reader"))
    assert f"reader-b: exact match {want.b.exact:.3f}, F1 {want.b.f1:.3f}" in out[ui.status]


def test_a_reader_compared_with_a_copy_cannot_be_told_apart_and_a_classifier_is_refused(registry, data):
    path, _ = data
    ui, h = tab(registry)
    table = h.on_upload(as_uploaded(path), "reader")[ui.table]
    same = run(h, "reader", table, compare="reader2")[-1]  # the positive control: a reader is compared
    md = same[ui.qa_comparison]
    assert "This file cannot tell them apart" in md and "**+0.000**" in md and "only A: **0**; only B: **0**" in md
    refused = run(h, "reader", table, compare="clf")[-1]  # a classifier (an old page, a typed name): refused
    assert "clf is a sequence classifier" in refused[ui.status]
    assert "compared only with another question answering model" in refused[ui.status]
    assert "Nothing was stored" in refused[ui.status] and ui.qa_summary not in refused


def test_the_comparison_view_says_which_reader_is_better(data):
    _, ev = data
    ev = dataclasses.replace(ev, model="reader")
    worse = dataclasses.replace(ev, model="worse", exact_scores=tuple(0.0 for _ in ev.exact_scores),
                                f1_scores=tuple(0.0 for _ in ev.f1_scores))
    from bertviz_app.evaluate.answer_evaluation import compared_answers

    c = compared_answers(worse, ev, samples=200)
    assert c.better == ev.model and c.interval["f1"][0] > 0
    md = evaluate_reader.comparison_md(c)
    assert "reader (B) answers better on this file" in md and "**+" in md
    back = compared_answers(ev, worse, samples=200)  # swapped: A is the better one
    assert "reader (A) answers better on this file" in evaluate_reader.comparison_md(back)
    assert evaluate_reader.comparison_md(None) == ""


# --------------------------------------------------------------------------- a wrong answer opened in Predict
def test_a_wrong_answers_row_clicked_opens_its_question_and_context_in_predict(data):
    _, ev = data
    text, pair, tabs = object(), object(), object()
    h = evaluate_events.Handlers(SimpleNamespace(), default="x", settings=bv.Settings(), predict_text=text,
                                 predict_pair=pair, tabs=tabs, link_tab="link-tab")
    rows = evaluate_reader.error_rows(ev)
    shown = evaluate_reader.errors_frame(ev)
    assert [r["id"] for r in rows] == list(shown["id"])  # the state's rows run with the table's
    worst = ev.errors(None)[-1]  # clicked by the row's values (the table may be shown sorted)
    i = list(shown["id"]).index(str(worst["id"]))
    out = h.on_answer_row(rows, SimpleNamespace(row_value=list(shown.iloc[i]), index=[0, 1]))
    assert out[text] == worst["question"] and out[pair] == worst["context"]
    assert out[tabs].selected == "predict" and out["link-tab"] == "predict"  # the page link follows the tab
    first = h.on_answer_row(rows, SimpleNamespace(row_value=list(shown.iloc[0]), index=[0, 2]))
    assert first[text] == ev.errors(1)[0]["question"]  # the control: another row, another question
    # a click that points at no listed answer (a stale page, no evaluation yet): nothing changes, no error
    for stale, value in ((rows, ["nope", "what"]), (None, list(shown.iloc[0])), (rows, [])):
        assert all(v == gr.skip() for v in h.on_answer_row(stale, SimpleNamespace(row_value=value, index=[0, 0]))
                   .values())


def test_the_wrong_answers_click_is_queued_and_sends_to_predict(registry):
    """The click writes the page link's tab State, which gradio 6.31 dispatches only from a queued event."""
    with gr.Blocks() as demo:
        model_dd = gr.Dropdown(choices=["reader"], value="reader", allow_custom_value=True)
        text, pair, link = gr.Textbox(), gr.Textbox(), gr.State("")
        with gr.Tabs() as tabs:
            with gr.Tab("Evaluate"):
                ui = evaluate_tab.build("reader", settings=registry)
        evaluate_tab.wire(ui, demo=None, model_dd=model_dd, default="reader", predict_text=text, predict_pair=pair,
                          tabs=tabs, settings=registry, link_tab=link)
    deps = demo.get_config_file()["dependencies"]
    clicks = [d for d in deps if [ui.qa_errors._id, "select"] in map(list, d["targets"])]
    assert len(clicks) == 1 and clicks[0]["queue"] is True
    assert clicks[0]["inputs"] == [ui.qa_rows._id]
    assert set(clicks[0]["outputs"]) == {text._id, pair._id, tabs._id, link._id}
    runs = [d for d in deps if ui.qa_comparison._id in d["outputs"]]  # Evaluate draws the comparison and the rows
    assert runs and all(ui.qa_rows._id in d["outputs"] for d in runs)
