"""``bertviz-app evaluate FILE --model M`` with a question answering model (issue 33): the JSON is the library's
``evaluate_answers(...).to_dict()``, the text report says the same numbers, the options reach the library, and each
mismatch of file and model is one line on stderr with exit 2 (a SQuAD file given to a classifier or a tagger, a
classifier's or a tagger's file given to a question answering model, an option of the other kind), each beside a
run that works (its positive control)."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as tf
from test_answer_evaluation import made_up_file, squad_file
from test_answering import build_qa

import bertviz_app as bv
from bertviz_app.cli import main

from conftest import build_family_model


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{"qa", "classifier", "tagger"}: tiny BERT models of each head (random weights), and {"squad"}: a SQuAD 2.0
    file of 12 questions, 3 of them unanswerable."""
    root = tmp_path_factory.mktemp("qa-cli")
    tagger = build_family_model("bert", root / "tagger")
    config = tf.AutoConfig.from_pretrained(tagger)
    config.id2label, config.label2id = {0: "O", 1: "B-X", 2: "I-X"}, {"O": 0, "B-X": 1, "I-X": 2}
    torch.manual_seed(0)
    tf.AutoModelForTokenClassification.from_config(config).save_pretrained(tagger)
    squad = root / "dev.json"
    squad.write_bytes(squad_file(made_up_file()))
    return {"qa": str(build_qa("bert", root / "qa", seed=1)), "classifier": str(build_family_model("bert", root / "c")),
            "tagger": str(tagger), "squad": str(squad)}


def test_evaluate_json_is_the_librarys(capsys, folders):
    code, out, err = run(capsys, "evaluate", folders["squad"], "--model", folders["qa"], "--json", "--seed", "3")
    assert code == 0, err
    got = json.loads(out)
    want = bv.evaluate_answers(bv.load_model(folders["qa"], device="cpu"), folders["squad"], seed=3).to_dict()
    assert {"exact", "f1", "no_answer_accuracy", "slices"} <= set(got)
    assert got == json.loads(json.dumps(want))
    assert got["options"]["no_answer_threshold"] == 0.0 and got["n_unanswerable"] == 3


def test_the_options_reach_the_evaluation(capsys, folders):
    code, out, _ = run(capsys, "evaluate", folders["squad"], "--model", folders["qa"], "--json", "--never-no-answer",
                       "--max-answer-len", "2", "--stride", "8")
    assert code == 0
    got = json.loads(out)
    assert {k: got["options"][k] for k in ("no_answer_threshold", "max_answer_len", "stride")} == {
        "no_answer_threshold": None, "max_answer_len": 2, "stride": 8}
    assert all(not e["no_answer"] for e in got["errors"])
    assert all(len(e["predicted"].split()) <= 2 for e in got["errors"])  # two tokens at most: one-word vocabulary
    code, out, _ = run(capsys, "evaluate", folders["squad"], "--model", folders["qa"], "--json",
                       "--no-answer-threshold", "-1000")
    assert code == 0 and json.loads(out)["options"]["no_answer_threshold"] == -1000
    assert json.loads(out)["no_answer_accuracy"] == pytest.approx(3 / 12, rel=1e-12)  # always "no answer"


def test_the_text_report_says_the_numbers(capsys, folders):
    code, out, err = run(capsys, "evaluate", folders["squad"], "--model", folders["qa"])
    assert code == 0, err
    ev = bv.evaluate_answers(bv.load_model(folders["qa"], device="cpu"), folders["squad"])
    lines = out.splitlines()
    assert lines[0].startswith("12 questions of dev.json (squad, 3 unanswerable) answered by")
    assert lines[1].startswith(f"exact match {ev.exact:.4f} ") and f"F1 {ev.f1:.4f} " in lines[1]
    assert f"answer or no answer chosen right: {ev.no_answer_accuracy:.1%}" in lines[2]
    assert "question word what" in out and "answer 1 word" in out
    n_wrong = sum(e < 1 for e in ev.exact_scores)
    assert f"wrong answers (not an exact match): {n_wrong} of 12" in out


def _refused(capsys, argv, *fragments):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.startswith("error: "), (code, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err
    return err


def test_a_squad_file_given_to_a_classifier_or_a_tagger_says_it_needs_a_question_answering_model(capsys, folders,
                                                                                                  tmp_path):
    squad = folders["squad"]
    assert run(capsys, "evaluate", squad, "--model", folders["qa"], "--json")[0] == 0  # positive control
    for model, head in ((folders["classifier"], "sequence classification"),
                        (folders["tagger"], "token classification")):
        _refused(capsys, ["evaluate", squad, "--model", model], f"is a {head} model",
                 "dev.json holds questions with their contexts and answers",
                 "needs a question answering model (...ForQuestionAnswering)")
    # the CSV form too, and a question answering option given to a classifier
    csv = tmp_path / "qa.csv"
    csv.write_text('question,context,answer_text,answer_start\n"who","the film",film,4\n', encoding="utf-8")
    _refused(capsys, ["evaluate", str(csv), "--model", folders["classifier"]], "needs a question answering model")
    _refused(capsys, ["evaluate", str(tmp_path / "reviews.csv"), "--model", folders["classifier"], "--stride", "8"],
             "--stride is an option of a question answering model's evaluation")


def test_a_classifier_or_tagger_file_given_to_a_question_answering_model_names_its_task(capsys, folders, tmp_path):
    reviews = tmp_path / "reviews.csv"
    reviews.write_text("text,label\nthe film was good,positive\nawful,negative\n", encoding="utf-8")
    assert run(capsys, "evaluate", str(reviews), "--model", folders["classifier"], "--json")[0] == 0  # control
    _refused(capsys, ["evaluate", str(reviews), "--model", folders["qa"]], "text-classification task",
             "finetune FILE (the default task)")
    conll = tmp_path / "train.conll"
    conll.write_text("the\tO\nfilm\tB-X\nwas\tO\ngood\tO\nit\tO\n\nfun\tO\n", encoding="utf-8")
    _refused(capsys, ["evaluate", str(conll), "--model", folders["qa"]], "token-classification",
             "finetune FILE --task token-classification")
    # an option of a classifier's evaluation
    _refused(capsys, ["evaluate", folders["squad"], "--model", folders["qa"], "--layers"],
             "--layers probes a classifier's [CLS] vectors", "is a question answering model: leave out --layers")
    # a bad offset: the file's message on one line
    doc = json.loads(squad_file(made_up_file(4)))
    doc["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    _refused(capsys, ["evaluate", str(bad), "--model", folders["qa"]], "1 answer not at its answer_start", "id 'q0'")


# --------------------------------------------------------------------------- two readers: --compare-with
@pytest.fixture(scope="module")
def second_reader(tmp_path_factory):
    """Another reader: the same tiny BERT with another seeded span head."""
    return str(build_qa("bert", tmp_path_factory.mktemp("qa-cli-b") / "qa-b", seed=2))


def test_compare_with_a_second_reader_adds_the_librarys_comparison_to_the_json(capsys, folders, second_reader):
    code, out, err = run(capsys, "evaluate", folders["squad"], "--model", folders["qa"], "--compare-with",
                         second_reader, "--json", "--seed", "3")
    assert code == 0, err
    got = json.loads(out)
    lm_a, lm_b = (bv.load_model(f, device="cpu") for f in (folders["qa"], second_reader))
    want = bv.compare_readers(lm_a, lm_b, folders["squad"], seed=3)
    assert got == json.loads(json.dumps({**want.a.to_dict(), "comparison": want.to_dict()}))
    c = got["comparison"]
    assert {"models", "n_questions", "exact", "f1", "a", "b", "difference", "interval", "questions", "better",
            "reading"} <= set(c)
    assert c["n_questions"] == 12 and set(c["interval"]) == {"exact", "f1"} and len(c["interval"]["f1"]) == 2
    assert sum(c["questions"][k] for k in ("both_right", "only_a_right", "only_b_right", "both_wrong")) == 12
    assert c["difference"]["f1"] == pytest.approx(c["f1"][1] - c["f1"][0]) and c["difference"]["f1"] != 0
    # without --compare-with: no comparison (the control that the key is the option's)
    code, out, _ = run(capsys, "evaluate", folders["squad"], "--model", folders["qa"], "--json", "--seed", "3")
    assert code == 0 and "comparison" not in json.loads(out)


def test_compare_with_prints_both_scores_the_difference_and_the_reading(capsys, folders):
    code, out, err = run(capsys, "evaluate", folders["squad"], "--model", folders["qa"], "--compare-with",
                         folders["qa"])
    assert code == 0, err
    ev = bv.evaluate_answers(bv.load_model(folders["qa"], device="cpu"), folders["squad"])
    assert f"on the same 12 questions: exact match {ev.exact:.4f} vs {ev.exact:.4f}, F1 {ev.f1:.4f} vs " in out
    assert "B - A: exact match +0.0000 [+0.000, +0.000], F1 +0.0000 [+0.000, +0.000]" in out
    assert "This file cannot tell them apart" in out and "only A 0, only B 0" in out


def test_compare_with_a_model_that_is_not_a_reader_is_refused_with_its_head(capsys, folders, second_reader):
    ok = run(capsys, "evaluate", folders["squad"], "--model", folders["qa"], "--compare-with", second_reader)
    assert ok[0] == 0  # positive control: two readers
    for model, head in ((folders["classifier"], "sequence classification"),
                        (folders["tagger"], "token classification")):
        _refused(capsys, ["evaluate", folders["squad"], "--model", folders["qa"], "--compare-with", model],
                 f"is a {head} model", "comparing two readers", "needs a question answering model")
