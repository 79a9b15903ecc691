"""The Fine-tune tab trains a reader (question answering, issue 33) from an uploaded SQuAD file: the tab's pure helpers
(which task a file is for, what was read, the plan from the fields, the finished run's view) and the tab's handlers
as the page calls them (upload -> task -> Start -> the job's live events -> EM/F1, the verdict, the wrong answers ->
Send to explorer), each refusal beside a file or a choice that is taken (the control).

The task is test_answer_finetune's: "what was the film" asked of contexts of filler words holding one verdict word
(a fifth hold none), which the tiny 2-layer BERT learns in one epoch."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from test_answer_finetune import QUESTION, _examples, _squad_json, _write

import bertviz_app as bv
from bertviz_app.errors import DataError, InputError

from conftest import as_uploaded

gr = pytest.importorskip("gradio")

from bertviz_app.ui import finetune_reader as fr  # noqa: E402
from bertviz_app.ui import finetune_tab, guards  # noqa: E402
from bertviz_app.ui import finetune_tagger as ft  # noqa: E402
from bertviz_app.ui.finetune_view import Live, runs_frame  # noqa: E402
from bertviz_app.ui.streaming import CancelFlag  # noqa: E402

FAST = dict(epochs=1, lr=1e-2, batch=16, patience=0, warmup=0)  # what the tiny model learns the task in (~3 s)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The same 80 questions as SQuAD JSON and as a CSV with an id column."""
    js, table = _write(tmp_path_factory.mktemp("reader-data"), _examples(80, seed=1))
    return {"json": js, "csv": table}


@pytest.fixture()
def tab(settings, tiny_model_dir):
    """The tab's components (built in a Blocks) and its handlers; the explorer's components as names."""
    with gr.Blocks():
        f = finetune_tab.build(str(tiny_model_dir), settings=settings)
    h = finetune_tab.Handlers(f, settings=settings, default=str(tiny_model_dir), model_dd="model",
                              predict_text="text", predict_pair="pair", tabs="tabs")
    return f, h


def upload(h, path, pick=None):
    """A training upload as the page makes it (on_upload), and the page-only step after it."""
    f = h.f
    out = h.on_upload(as_uploaded(path), guards.Refusal(), pick)
    after = h.after_upload(out[f.refused], guards.Refusal(), "", out[f.task_now], out[f.tagged_refused],
                           out[f.qa_refused])
    return out, after


def start(h, out, base, name, flag=None, val=None, **fields):
    """The tab's Start (the streaming handler) for the upload's reads ``out``; ``val``: on_val_upload's outputs."""
    f, val = h.f, val or {}
    given = {**FAST, **fields}
    return h.train(flag or CancelFlag(), out[f.table], val.get(f.val_table), "", "", "", False, str(base), "full",
                   name, given["epochs"], given["lr"], given["batch"], None, 42, given["patience"], 0.2,
                   given["warmup"], out[f.refused], val.get(f.val_refused), out[f.task_now], out[f.tagged],
                   val.get(f.val_tagged), out[f.tagged_refused], val.get(f.val_tagged_refused), out[f.qa],
                   val.get(f.val_qa), out[f.qa_refused], val.get(f.val_qa_refused))


def merged(outs) -> dict:
    """The streamed outputs, each component's last value."""
    last = {}
    for o in outs:
        last.update(o)
    return last


def no_traceback(caplog, *texts) -> None:
    """Nothing logged with a traceback or at ERROR, and no text on the page holds one."""
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], caplog.text
    assert "Traceback" not in caplog.text
    for t in texts:
        assert "Traceback" not in str(t)


# --------------------------------------------------------------------------- the tab's pure helpers
def test_a_file_the_reader_takes_sets_the_task_and_a_pick_of_it_stands_only_for_a_file_no_reader_took():
    table, tagged, qa = object(), object(), object()
    assert fr.choose_task(None, None, qa, "not a .csv", None) == fr.QUESTION  # SQuAD JSON: only the reader
    assert fr.choose_task(table, None, qa, None, ft.SEQUENCE) == fr.QUESTION  # a SQuAD CSV, a table too
    assert fr.choose_task(table, None, None, None, None, meant=True) == fr.QUESTION  # a refused one: its refusal
    assert fr.choose_task(table, None, None, None, fr.QUESTION) == ft.SEQUENCE  # a classifier's table, whatever pick
    assert fr.choose_task(None, tagged, None, "tagged tokens", fr.QUESTION) == ft.TOKEN  # a tagged file
    assert fr.choose_task(table, tagged, None, None, fr.QUESTION) is None  # tokens/tags CSV: choose between the two
    assert fr.choose_task(table, tagged, None, None, ft.TOKEN) == ft.TOKEN  # ... a pick of one of them stands
    assert fr.choose_task(None, None, None, "no data rows", fr.QUESTION) == fr.QUESTION  # none took it: the pick
    assert fr.choose_task(None, None, None, "no data rows", None) == ft.SEQUENCE  # control: no pick, as before


def test_a_file_is_meant_for_the_reader_by_its_name_or_its_start(tmp_path, files):
    assert fr.looks_meant(str(files["csv"])) and fr.looks_meant(str(files["json"]))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    assert fr.looks_meant(str(broken))  # a .json name: no other task's reader takes one
    reviews = tmp_path / "reviews.csv"
    reviews.write_text("text,label\nthe film was good,positive\n", encoding="utf-8")
    conll = tmp_path / "t.conll"
    conll.write_text("the\tO\ngood\tB-POS\n", encoding="utf-8")
    assert not fr.looks_meant(str(reviews)) and not fr.looks_meant(str(conll)) and not fr.looks_meant(None)


def test_what_was_read_counts_questions_contexts_and_the_unanswerable(files):
    qa = bv.read_squad(files["json"])
    n, none = len(qa.examples), qa.n_impossible
    assert 0 < none < n  # the file has both (the control of the counts below)
    summary = fr.summary_md(qa)
    assert f"**train.json**: {n} questions on {n} contexts" in summary and "SQuAD JSON v2.0" in summary
    assert "Task: question answering (a reader)" in summary and "named by their id" in summary
    report = fr.report_md(qa)
    assert f"**{n} questions** on {n} contexts: {n - none} answerable ({n - none} answers, each found at its " \
           f"answer_start in its context), {none} unanswerable" in report
    assert report.endswith("Ready to train a reader.") and "SQuAD 1.1" not in report
    frame = fr.preview_frame(qa)
    assert list(frame.columns) == ["id", "question", "answer", "answer_start", "context"] and len(frame) == 10
    first = qa.examples[0]
    assert frame.iloc[0].tolist() == [first.id, QUESTION, first.answers[0][0] if first.answers else fr.NO_ANSWER,
                                      str(first.answers[0][1]) if first.answers else "", first.context]
    csv = bv.read_squad(files["csv"])
    assert "named by their id" in fr.summary_md(csv) and "CSV with question, context" in fr.summary_md(csv)
    answered = [e for e in qa.examples if e.answers]
    one = replace(qa, examples=tuple(replace(e, context=answered[0].context, answers=answered[0].answers)
                                     for e in answered[:3]))
    assert "every question is on one context" in fr.report_md(one) and "SQuAD 1.1" in fr.report_md(one)
    assert "Ready to train" not in fr.report_md(one)


def test_plan_from_fields_says_why_a_file_was_refused_and_what_to_type(files, settings, tiny_model_dir):
    qa = bv.read_squad(files["csv"])
    base = str(tiny_model_dir)
    plan = fr.plan_from_fields(qa, None, base, "planned", "1", "1e-2", "16", 42, "0", 0.25, "0", settings=settings)
    assert isinstance(plan, bv.ReaderPlan) and plan.names == ("planned",) and plan.val_fraction == 0.25  # control
    assert plan.config.epochs == 1 and plan.config.learning_rate == 1e-2 and plan.config.batch_size == 16
    with pytest.raises(DataError, match="Upload a question answering training file first"):
        fr.plan_from_fields(None, None, base, "", None, None, None, 42, None, 0.2, settings=settings)
    said = "The training file t.csv was refused: t.csv: 1 answer not at its answer_start (row 2 ...)."
    with pytest.raises(DataError, match="not at its answer_start"):
        fr.plan_from_fields(None, None, base, "", None, None, None, 42, None, 0.2, refused=said, settings=settings)
    with pytest.raises(DataError, match="or remove it to hold out part of the training data"):
        fr.plan_from_fields(qa, None, base, "", None, None, None, 42, None, 0.2,
                            val_refused="The validation file v.json was refused: x. Fix the file and upload it again.",
                            settings=settings)
    with pytest.raises(DataError, match="read for another task: upload it again"):
        fr.plan_from_fields(qa, None, base, "", None, None, None, 42, None, 0.2, val_other=True, settings=settings)
    assert fr.plan_from_fields(qa, qa, base, "", None, None, None, 42, None, 0.2, val_other=True,
                               settings=settings).val is qa  # control: read for the reader, it is used
    with pytest.raises(InputError, match="Epochs: 'three' is not a number"):
        fr.plan_from_fields(qa, None, base, "", "three", None, None, 42, None, 0.2, settings=settings)
    one = replace(qa, examples=tuple(replace(e, context=qa.examples[0].context, answers=qa.examples[0].answers)
                                     for e in qa.examples[:4]))
    with pytest.raises(DataError, match="on one context"):
        fr.plan_from_fields(one, None, base, "", None, None, None, 42, None, 0.2, settings=settings)


def reader_result(**kw) -> bv.AnswerRunResult:
    """A finished run whose every number differs (a trained tiny run scores 1.000 on several)."""
    metrics = {"exact": 0.625, "f1": 0.7123, "n": 40, "interval": {"exact": (0.475, 0.775), "f1": (0.58, 0.83)},
               "baselines": {"no_answer": {"exact": 0.25, "f1": 0.26},
                             "fixed_position": {"exact": 0.15, "f1": 0.2211, "first_word": 2, "words": 1}},
               "margins": {"exact_vs_no_answer": (0.2, 0.55), "f1_vs_no_answer": (0.31, 0.59),
                           "exact_vs_fixed_position": (0.3, 0.65), "f1_vs_fixed_position": (0.36, 0.62)},
               "learned": True}
    wrong = [{"id": "q7", "question": "what was the film", "context": "the film was good", "answers": ["good"],
              "predicted": "film was good", "f1": 0.5},
             {"id": "q3", "question": "what was the film", "context": "it was not fun", "answers": [],
              "predicted": "fun", "f1": 0.0}]
    given = dict(name="runs/qa", path=Path("runs/qa"), metrics=metrics, wrong=wrong, log_history=[], seconds=12.0,
                 notices=("Held out 40 of 200 questions",), learned=True, cancelled=False,
                 verdict="Learned: exact match 62.5% ... for always answering the context's word 3 (where training "
                         "answers most often stand); ahead of both beyond the 95% interval of the difference.")
    return bv.AnswerRunResult(**{**given, **kw})


def test_the_result_shows_each_number_in_its_place():
    r = reader_result()
    md = fr.metrics_md(r, ("Held out 40 of 200 questions",))
    assert "**Exact match 62.5%** (95% interval 47.5%–77.5%) · **F1 0.712** (95% interval 0.580–0.830) on 40 " \
           "held-out questions · 2 not answered exactly · 12 s" in md
    assert "| always \"no answer\" | 25.0% | 0.260 | +37.5% (+20.0% to +55.0%) | +0.452 (+0.310 to +0.590) |" in md
    assert "| the context's word 3 (fixed position: where training answers most often stand) | 15.0% | 0.221 | " \
           "+47.5% (+30.0% to +65.0%) | +0.491 (+0.360 to +0.620) |" in md
    assert md.count("Held out 40 of 200 questions") == 1  # the plan's notices and the run's, once
    assert "selected in the explorer tabs as **runs/qa**" in md and "Cancelled" not in md
    verdict = fr.verdict_md(r)
    assert verdict.startswith("**Learned.** runs/qa (reader): exact match 62.5%")
    assert "where training answers most often stand" in verdict  # the fixed-position guess's reason
    rows = fr.wrong_rows(r)
    assert [w["row"] for w in rows] == ["q3", "q7"]  # the lowest F1 first
    assert (rows[0]["true"], rows[0]["predicted"], rows[0]["text"], rows[0]["pair"]) == (
        fr.NO_ANSWER, "fun", "what was the film", "it was not fun")
    assert fr.wrong_frame(rows).values.tolist()[1] == ["reader", "q7", "what was the film", "good", "film was good",
                                                       0.5, "the film was good"]
    assert fr.sample(r, None) == {"run": "runs/qa", "text": "what was the film", "pair": "it was not fun"}
    cancelled = replace(r, cancelled=True, learned=False, verdict="Cancelled at step 3 of 40, so not judged: ...")
    assert fr.verdict_md(cancelled).startswith("**Cancelled: not judged.** runs/qa (reader): Cancelled at step 3")
    assert "holds the best weights found before the cancel" in fr.metrics_md(cancelled)
    assert fr.verdict_md(replace(r, learned=False, verdict="Not learned: exact match 10.0% ...")).startswith(
        "**Not learned.** runs/qa (reader): exact match 10.0%")


def test_a_reader_runs_live_progress_and_curves_show_its_exact_match_and_f1():
    live = Live()
    live.add({"kind": "mode", "mode": "reader", "index": 1, "of": 1})
    live.add({"kind": "progress", "step": 2, "max_steps": 8, "logs": {"loss": 3.2}})
    live.add({"kind": "progress", "step": 4, "max_steps": 8, "logs": {"eval_exact": 0.375, "eval_f1": 0.4561}})
    assert live.status() == "**Training reader, training** · loss 3.2000 · held-out exact match 37.5% · F1 0.456"
    names = [t.name for t in live.figure().data]
    assert names == ["training loss", "exact match", "F1"]
    classifier = Live()  # control: a classifier's curves are drawn as before, with none of the reader's
    classifier.add({"kind": "mode", "mode": "full", "index": 1, "of": 1})
    classifier.add({"kind": "progress", "step": 4, "max_steps": 8, "logs": {"eval_accuracy": 0.5,
                                                                            "eval_macro_f1": 0.4}})
    assert [t.name for t in classifier.figure().data] == ["accuracy", "macro-F1"]


def test_past_runs_list_a_reader_run_with_its_exact_match_and_f1(tmp_path):
    run = tmp_path / "runs" / "qa"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")
    (run / "run.json").write_text(json.dumps({
        "name": "runs/qa", "task": "question-answering", "mode": "full", "source": "train.csv",
        "data_hash": "abcdef0123456789", "train_questions": 64, "val_questions": 16,
        "metrics": {"exact": 0.8125, "f1": 0.854}}))
    assert runs_frame(tmp_path).values.tolist() == [["train.csv · abcdef01", "", "64/16 questions", "", "", "",
                                                     "runs/qa (reader, exact match 81.2%, F1 0.854)", "", ""]]


# --------------------------------------------------------------------------- the tab's handlers
def test_a_squad_upload_sets_the_task_shows_what_was_read_and_hides_the_classifiers_fields(tab, files, tmp_path):
    f, h = tab
    for kind in ("csv", "json"):
        out, after = upload(h, files[kind])
        assert out[f.task_now] == fr.QUESTION and out[f.qa] is not None and out[f.qa_refused] is None
        assert f"**train.{kind}**: 80 questions on 80 contexts" in out[f.notices]
        assert "Ready to train a reader" in out[f.report] and list(out[f.preview].columns)[1] == "question"
        assert after[f.task]["value"] == fr.QUESTION and after[f.columns]["visible"] == "hidden"
        assert after[f.mode]["interactive"] is False and after[f.mode]["info"] == fr.MODE_NOTE
        assert after[f.max_len]["interactive"] is False and f.upload not in after
        assert "holds 80 questions for question answering" in out[f.tagged_refused]  # the tagger's task says so
    from test_finetune_ui import write_csv  # the control: a classifier's table, as before

    out, after = upload(h, write_csv(tmp_path / "reviews.csv"))
    assert out[f.task_now] == ft.SEQUENCE and out[f.qa] is None and out[f.text_col]["value"] == "review"
    assert after[f.columns]["visible"] is True and after[f.mode]["interactive"] is True


def test_answers_not_at_their_offsets_and_an_empty_file_are_refused_with_the_readers_message(tab, tmp_path, caplog):
    f, h = tab
    caplog.set_level(logging.DEBUG)
    examples = _examples(20, seed=2)
    doc = _squad_json(examples)
    moved = next(q for p in doc["data"][0]["paragraphs"] for q in p["qas"] if q["answers"])
    moved["answers"][0]["answer_start"] += 1  # its text is no longer at its offset
    for name, write in (("moved.json", lambda p: p.write_text(json.dumps(doc), encoding="utf-8")),
                        ("moved.csv", lambda p: _write(tmp_path, examples)[1].replace(p))):
        path = tmp_path / name
        write(path)
        if name.endswith(".csv"):  # the CSV of the same questions, its answer moved by one character
            rows = path.read_text(encoding="utf-8").splitlines()
            k = next(i for i, r in enumerate(rows) if r.startswith(f"{moved['id']},"))
            cells = rows[k].rsplit(",", 1)
            rows[k] = f"{cells[0]},{int(cells[1]) + 1}"
            path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        out, after = upload(h, path)
        assert out[f.task_now] == fr.QUESTION and out[f.qa] is None  # a question answering file: the reader's refusal
        assert "1 answer not at its answer_start" in out[f.qa_refused] and moved["id"] in out[f.qa_refused]
        assert out[f.notices].startswith("**Error:**") and "fix the offsets" in out[f.notices]
        assert after[f.upload] is None and "1 answer not at its answer" in after[f.status]  # cleared, said
        with pytest.raises(DataError, match="not at its answer_start"):  # Start says it again
            list(start(h, out, "encoder", "never"))
        no_traceback(caplog, out[f.notices], after[f.status])
    for name in ("empty.json", "empty.csv"):
        empty = tmp_path / name
        empty.write_text("", encoding="utf-8")
        out, after = upload(h, empty, pick=fr.QUESTION)  # the task chosen by hand: the reader's words
        assert out[f.task_now] == fr.QUESTION and f"'{name}' is empty. Upload SQuAD JSON" in out[f.notices]
        assert after[f.upload] is None and "is empty" in after[f.status]
    out, _ = upload(h, _write(tmp_path, examples)[0])  # control: the same questions, untouched
    assert out[f.qa] is not None and out[f.notices].startswith("**train.json**: 20 questions")
    assert not (h.settings.models_dir / "runs").exists()  # nothing trained or saved
    no_traceback(caplog)


def test_a_tagged_file_or_a_classifiers_table_chosen_as_a_readers_task_says_which_task_reads_it(tab, tmp_path,
                                                                                               caplog):
    from test_finetune_ui import write_csv
    from test_tagger_finetune_ui import write_conll

    f, h = tab
    caplog.set_level(logging.DEBUG)
    for path, reads, task in ((write_csv(tmp_path / "reviews.csv"), "text-classification task",
                               "sequence classification"),
                              (write_conll(tmp_path / "train.conll", n=20), "holds tagged sentences",
                               "token classification")):
        out, _ = upload(h, path)
        assert out[f.task_now] != fr.QUESTION and out[f.qa] is None  # set from the reader that took it
        picked = h.on_task(fr.QUESTION, out[f.table], out[f.tagged], out[f.refused], out[f.tagged_refused], "",
                           out[f.qa], out[f.qa_refused])
        assert picked[f.task_now] == fr.QUESTION and picked[f.columns]["visible"] == "hidden"
        assert reads in picked[f.status] and f"Choose the task {task} above" in picked[f.status]
        assert "Fix the file" not in picked[f.status] and picked[f.notices].startswith("**Error:**")
        with pytest.raises(DataError, match=f"Choose the task {task} above"):
            list(start(h, {**out, f.task_now: fr.QUESTION}, "encoder", "never"))
        back = h.on_task(out[f.task_now], out[f.table], out[f.tagged], out[f.refused], out[f.tagged_refused],
                         picked[f.status], out[f.qa], out[f.qa_refused])  # control: its own task reads it again
        assert back[f.status] == "" and not back[f.notices].startswith("**Error:**")
        no_traceback(caplog, picked[f.status], picked[f.notices])
    assert not (h.settings.models_dir / "runs").exists()


def test_a_validation_file_is_read_for_the_reader_and_asked_for_again_after_another_tasks_reading(tab, tmp_path):
    f, h = tab
    js, table = _write(tmp_path, _examples(12, seed=9))
    val = h.on_val_upload(as_uploaded(js), fr.QUESTION)
    assert len(val[f.val_qa].examples) == 12 and val[f.val_qa_refused] is None and f.val_upload not in val
    assert "Validation file **train.json**: 12 questions on 12 contexts" in val[f.notices]
    assert h.after_val_upload(fr.QUESTION) == (gr.skip(), gr.skip())  # kept for the reader
    assert h.after_val_upload(ft.SEQUENCE) == (None, None)  # a file read for another task: the reader's forgotten
    reviews = tmp_path / "reviews.csv"
    reviews.write_text("text,label\nthe film was good,positive\nthe film was bad,negative\n", encoding="utf-8")
    bad = h.on_val_upload(as_uploaded(reviews), fr.QUESTION)
    assert bad[f.val_upload] is None and bad[f.val_qa] is None and bad[f.val_table] is None  # cleared
    assert "text-classification task" in bad[f.status] and "validation file reviews.csv was refused" in bad[f.status]
    seq = h.on_val_upload(as_uploaded(table), ft.SEQUENCE)  # control: another task reads it as before
    assert f.val_qa not in seq and seq[f.val_table].n_rows == 12


def test_start_trains_a_reader_in_the_tabs_job_and_shows_its_scores_verdict_and_a_question_to_send(
        tab, files, tiny_model_dir, settings, monkeypatch):
    f, h = tab
    # every event redrawn: at the page's 0.5 s a run of the tiny task can end before a redraw after its evaluation
    monkeypatch.setattr(finetune_tab, "UPDATE_EVERY", 0.0)
    out, _ = upload(h, files["csv"])
    outs = list(start(h, out, tiny_model_dir, "tab-reader"))
    assert outs[0][f.status].startswith("**Starting…**") and "Settings: 1 epochs at most" in outs[0][f.verdict]
    assert any("held-out exact match" in str(o.get(f.status)) for o in outs)  # live progress
    end = merged(outs)
    info = json.loads((settings.models_dir / "runs" / "tab-reader" / "run.json").read_text())
    assert info["task"] == "question-answering" and info["source"] == "train.csv" and not info["cancelled"]
    m = info["metrics"]
    assert end[f.status] == "**Done.** runs/tab-reader saved."
    assert f"**Exact match {m['exact']:.1%}**" in end[f.metrics] and f"**F1 {m['f1']:.3f}**" in end[f.metrics]
    assert f"| always \"no answer\" | {m['baselines']['no_answer']['exact']:.1%} |" in end[f.metrics]
    assert info["verdict"]["learned"], info["verdict"]  # one epoch of the tiny task is enough
    assert end[f.verdict].startswith("**Learned.** runs/tab-reader (reader): exact match")
    assert "where training answers most often stand" in end[f.verdict]
    assert len(end[f.results]) == len(info["wrong"]) and end[f.wrong].shape[0] == len(info["wrong"])
    assert [t.name for t in end[f.curves].data if t.name in ("exact match", "F1")] == ["exact match", "F1"]
    assert end["model"]["value"] == "runs/tab-reader" and end[f.run]["value"] == "runs/tab-reader"
    assert "runs/tab-reader (reader, exact match" in end[f.runs_table].to_string()
    sent = h.send_to_explorer(None, end[f.sample])
    assert sent["text"] and sent["pair"] and "tabs" in sent
    assert sent["model"]["value"] == "runs/tab-reader"
    [got] = bv.answer(bv.load_model(str(settings.models_dir / "runs" / "tab-reader"), device="cpu"), sent["text"],
                      sent["pair"])
    assert got.context == sent["pair"]  # a question and its context the reader answers
    zip_btn, cmp_btn, _, _, note = h.on_run("runs/tab-reader")
    assert zip_btn["interactive"] is True and cmp_btn["interactive"] is False and "question answering run" in note


def test_cancel_mid_run_saves_the_best_weights_so_far_and_loses_no_earlier_run(tab, files, tiny_model_dir, settings):
    f, h = tab
    earlier = settings.models_dir / "runs" / "kept"
    earlier.mkdir(parents=True)
    (earlier / "run.json").write_text('{"name": "runs/kept"}')
    out, _ = upload(h, files["json"])
    flag = CancelFlag()
    outs = []
    for o in start(h, out, tiny_model_dir, "stopped", flag=flag, epochs=40):
        outs.append(o)
        if " · loss " in str(o.get(f.status)) and not flag.event.is_set():
            h.on_cancel(flag)  # the Cancel button, once training has logged a loss
    end = merged(outs)
    assert any("**Cancelling…**" in str(o.get(f.status)) for o in outs)
    info = json.loads((settings.models_dir / "runs" / "stopped" / "run.json").read_text())
    assert info["cancelled"] and not info["verdict"]["learned"] and 1 <= info["steps"] < 160, info["steps"]
    assert end[f.status] == "**Cancelled.** runs/stopped saved."
    assert end[f.verdict].startswith("**Cancelled: not judged.** runs/stopped (reader): Cancelled at step")
    assert "holds the best weights found before the cancel" in end[f.metrics]
    assert (earlier / "run.json").read_text() == '{"name": "runs/kept"}'  # nothing saved before is touched
    assert sorted(p.name for p in (settings.models_dir / "runs").iterdir()) == ["kept", "stopped"]  # no temp folder
