"""Evaluating a question answering model on a SQuAD-format file (issue 33): the numbers against a reference computed
here another way (``bv.answer`` called one question at a time, scored with this file's own EM and a sorted-merge
F1), the answered and unanswerable groups and the no-answer accuracy counted by hand, slices that partition the
questions, the wrong answers worst first, a file whose gold answers are the model's own predictions (EM = F1 = 1)
beside the same file shifted by one word (not), and the refusals, each with a positive control.

The tiny models are tests/test_answering.py's: each family's tiny model with a seeded random span head, so the
answers are spans of varied lengths and places (and "no answer" where the threshold makes it so)."""

from __future__ import annotations

import json
import string
import threading

import numpy as np
import pytest
from test_answering import CONTEXT, build_qa, build_steered, long_context

import bertviz_app as bv
from bertviz_app.errors import CancelledError, InputError
from bertviz_app.evaluate.answer_evaluation import QUESTION_WORDS, compare_readers, evaluate_answers, question_word
from bertviz_app.train.data.squad import QAExample

QUESTIONS = ["what was the film", "who is it", "when was the movie good", "where is the fun", "why was it a slog",
             "how was the movie", "which film was great", "was it gorgeous", "whom is it for", "the film is",
             "what is bad", "how good is it"]


@pytest.fixture(scope="module")
def qa_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("qa-eval")
    return bv.load_model(str(build_qa("bert", root / "bert", seed=1)), device="cpu")


def contexts(n: int) -> list[str]:
    return [CONTEXT] + [long_context(12 + 3 * i, seed=i) for i in range(1, n)]


def word_at(context: str, k: int) -> tuple[str, int]:
    """The ``k``-th whitespace word of ``context`` (from the end when k < 0) and its character start."""
    starts = [i for i, ch in enumerate(context) if ch != " " and (i == 0 or context[i - 1] == " ")]
    start = starts[k]
    end = context.find(" ", start)
    return context[start:end if end >= 0 else None], start


def squad_file(examples: list[QAExample]) -> bytes:
    paragraphs = [{"context": e.context, "qas": [{"id": e.id, "question": e.question, "is_impossible": e.is_impossible,
                                                   "answers": [{"text": t, "answer_start": s} for t, s in e.answers]}]}
                  for e in examples]
    return json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]}).encode()


def made_up_file(n: int = 12) -> list[QAExample]:
    """Questions with gold answers that are words of their contexts (two golds for some), every fourth one
    unanswerable."""
    out = []
    for i, (q, c) in enumerate(zip(QUESTIONS[:n], contexts(n))):
        if i % 4 == 3:
            out.append(QAExample(f"q{i}", q, c, (), True))
            continue
        golds = (word_at(c, i % 5),) + ((word_at(c, -1),) if i % 3 == 0 else ())
        out.append(QAExample(f"q{i}", q, c, golds, False))
    return out


# --------------------------------------------------------------------------- the reference
_ARTICLES = {"a", "an", "the"}


def ref_tokens(text: str) -> list[str]:
    return [w for w in text.lower().translate(str.maketrans("", "", string.punctuation)).split()
            if w not in _ARTICLES]


def ref_scores(golds: list[str], predicted: str) -> tuple[float, float]:
    """EM and F1, max over the golds (those with tokens; none: [""]), by sorted-list merging."""
    golds = [g for g in golds if ref_tokens(g)] or [""]
    best_em = best_f1 = 0.0
    for g in golds:
        a, b = sorted(ref_tokens(g)), sorted(ref_tokens(predicted))
        best_em = max(best_em, float(a == b))
        if not a or not b:
            best_f1 = max(best_f1, float(a == b))
            continue
        common = sum(min(a.count(t), b.count(t)) for t in set(a))
        best_f1 = max(best_f1, 2 * common / (len(a) + len(b)))
    return best_em, best_f1


def mixed_threshold(lm, examples) -> float:
    """A no-answer threshold that makes about half the answers "no answer": the median of no-answer score minus
    best span score."""
    got = bv.answer(lm, [e.question for e in examples], [e.context for e in examples], no_answer_threshold=None)
    return float(np.median([a.no_answer_score - a.score for a in got]))


# --------------------------------------------------------------------------- the numbers
def test_scores_equal_the_reference_question_by_question(qa_model):
    examples = made_up_file()
    threshold = mixed_threshold(qa_model, examples)
    ev = evaluate_answers(qa_model, squad_file(examples), "dev.json", no_answer_threshold=threshold, batch_size=3,
                          seed=2)
    want = [bv.answer(qa_model, e.question, e.context, no_answer_threshold=threshold)[0] for e in examples]
    assert [(p.text, p.start, p.end) for p in ev.predictions] == [(a.text, a.start, a.end) for a in want]
    nones = [a.no_answer for a in want]
    assert 0 < sum(nones) < len(nones)  # the threshold gave both kinds of answer
    ref = [ref_scores([t for t, _ in e.answers], a.text) for e, a in zip(examples, want)]
    np.testing.assert_allclose(ev.exact_scores, [r[0] for r in ref], rtol=1e-12)
    np.testing.assert_allclose(ev.f1_scores, [r[1] for r in ref], rtol=1e-12)
    assert ev.exact == pytest.approx(np.mean([r[0] for r in ref]), rel=1e-12)
    assert ev.f1 == pytest.approx(np.mean([r[1] for r in ref]), rel=1e-12)
    assert 0 < ev.f1 < 1  # neither trivial: some answers right, some wrong
    impossible = np.array([e.is_impossible for e in examples])
    assert ev.no_answer_accuracy == pytest.approx(float(np.mean(np.array(nones) == impossible)), rel=1e-12)
    for group, mask in ((ev.has_answer, ~impossible), (ev.no_answer, impossible)):
        assert group["n"] == mask.sum()
        assert group["exact"] == pytest.approx(np.mean([r[0] for r, m in zip(ref, mask) if m]), rel=1e-12)
        assert group["f1"] == pytest.approx(np.mean([r[1] for r, m in zip(ref, mask) if m]), rel=1e-12)
    lo, hi = ev.interval["f1"]
    assert lo <= ev.f1 <= hi and lo < hi
    # seeded: the same intervals again
    again = evaluate_answers(qa_model, squad_file(examples), "dev.json", no_answer_threshold=threshold, seed=2)
    assert again.interval == ev.interval and again.exact_scores == ev.exact_scores


def test_slices_partition_the_questions_and_score_their_own(qa_model):
    examples = made_up_file()
    ev = evaluate_answers(qa_model, squad_file(examples), "dev.json")
    kinds = {s.kind for s in ev.slices}
    assert kinds == {"question word", "answer length", "context length"}
    for kind in kinds:
        members = [i for s in ev.slices if s.kind == kind for i in s.questions]
        assert sorted(members) == list(range(len(examples))), kind  # each question in exactly one slice
    for s in ev.slices:
        assert s.exact == pytest.approx(np.mean([ev.exact_scores[i] for i in s.questions]), rel=1e-12)
        assert s.f1 == pytest.approx(np.mean([ev.f1_scores[i] for i in s.questions]), rel=1e-12)
    by_word = {s.value: set(s.questions) for s in ev.slices if s.kind == "question word"}
    # by hand from QUESTIONS: "was it gorgeous" and "the film is" have no question word; "whom" is who
    assert by_word["other"] == {7, 9} and by_word["who"] == {1, 8} and by_word["how"] == {5, 11}
    assert set(by_word) <= set(QUESTION_WORDS)
    by_length = {s.value: set(s.questions) for s in ev.slices if s.kind == "answer length"}
    assert by_length == {"0": {3, 7, 11}, "1": set(range(12)) - {3, 7, 11}}  # one-word golds, every fourth none
    contexts_bins = [s for s in ev.slices if s.kind == "context length"]
    assert 2 <= len(contexts_bins) <= 4


def test_question_words():
    assert [question_word(q) for q in ("In what year?", "WHO won", "Whose idea", "To whom", "x which y",
                                       "somehow", "why and how", "")] == [
        "what", "who", "who", "who", "which", "other", "why", "other"]


def test_gold_answers_that_are_the_models_own_score_one_and_shifted_ones_do_not(qa_model):
    questions = made_up_file()
    got = bv.answer(qa_model, [e.question for e in questions], [e.context for e in questions])
    own = [QAExample(e.id, e.question, e.context, () if a.no_answer else ((a.text, a.start),), a.no_answer)
           for e, a in zip(questions, got)]
    ev = evaluate_answers(qa_model, squad_file(own), "own.json", no_answer_threshold=0.0)
    assert ev.exact == 1.0 and ev.f1 == 1.0 and ev.errors() == []
    assert ev.no_answer_accuracy in (None, 1.0)
    # the same answers moved to a word of the context that is not in them (or to "no answer" where the answer
    # holds every word of its context): every answered question scores 0
    shifted = []
    for e in own:
        text = e.answers[0][0] if e.answers else ""
        padded = f" {e.context} "
        other = next((w for w in e.context.split() if w not in text.split()), None)
        if e.is_impossible or other is None:
            shifted.append(QAExample(e.id, e.question, e.context, (), True) if other is None else e)
            continue
        shifted.append(QAExample(e.id, e.question, e.context, ((other, padded.index(f" {other} ")),), False))
    ev = evaluate_answers(qa_model, squad_file(shifted), "shifted.json", no_answer_threshold=0.0)
    answered = [i for i, e in enumerate(own) if not e.is_impossible]
    assert answered and all(ev.exact_scores[i] == 0.0 for i in answered) and ev.exact < 1
    wrong = ev.errors(None)
    assert {w["id"] for w in wrong} == {own[i].id for i in answered}
    assert [w["f1"] for w in wrong] == sorted(w["f1"] for w in wrong)  # the worst first
    for w in wrong:
        i = next(k for k, e in enumerate(shifted) if e.id == w["id"])
        assert w["gold"] == [t for t, _ in shifted[i].answers] and w["predicted"] == ev.predictions[i].text


def test_a_file_without_unanswerable_questions_never_answers_none_and_the_json(qa_model):
    examples = [e for e in made_up_file() if not e.is_impossible]
    ev = evaluate_answers(qa_model, squad_file(examples), "v1.json")
    assert ev.options["no_answer_threshold"] is None and not any(p.no_answer for p in ev.predictions)
    assert ev.no_answer_accuracy is None and ev.has_answer is None and ev.no_answer is None
    out = json.loads(json.dumps(ev.to_dict(errors=2)))
    assert {"exact", "f1", "no_answer_accuracy", "slices", "interval", "has_answer", "no_answer", "errors",
            "n_errors", "n_questions", "model", "source", "options"} <= set(out)
    assert out["exact"] == ev.exact and out["n_questions"] == len(examples) and len(out["errors"]) <= 2
    assert out["n_errors"] == sum(e < 1 for e in ev.exact_scores)
    assert {s["kind"] for s in out["slices"]} == {"question word", "answer length", "context length"}


def test_a_csv_scores_as_the_same_questions_in_json(qa_model, tmp_path):
    examples = made_up_file()
    rows = ["question,context,answer_text,answer_start"]
    for e in examples:
        text, start = e.answers[0] if e.answers else ("", "")
        rows.append(f'"{e.question}","{e.context}","{text}",{start}')
    path = tmp_path / "qa.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    one_gold = [QAExample(e.id, e.question, e.context, e.answers[:1], e.is_impossible) for e in examples]
    a = evaluate_answers(qa_model, path)
    b = evaluate_answers(qa_model, squad_file(one_gold), "same.json")
    assert a.format == "csv" and a.exact_scores == b.exact_scores and a.f1_scores == b.f1_scores


# --------------------------------------------------------------------------- refusals, progress, cancel
def test_a_model_of_another_head_is_refused(qa_model, signal_model_dir):
    data = squad_file(made_up_file(4))
    assert evaluate_answers(qa_model, data, "ok.json").n_questions == 4  # positive control
    classifier = bv.load_model(str(signal_model_dir("bert")), device="cpu")
    with pytest.raises(InputError, match="is a sequence classification model.*needs a question answering model"):
        evaluate_answers(classifier, data, "ok.json")


def test_questions_too_long_for_the_model_are_named_before_any_is_answered(qa_model):
    examples = made_up_file(4)
    evaluate_answers(qa_model, squad_file(examples), "ok.json")  # positive control
    long_q = " ".join(["film"] * (qa_model.max_length + 5))
    examples[1] = QAExample("q1", long_q, examples[1].context, examples[1].answers, False)
    examples[2] = QAExample("q2", long_q, examples[2].context, examples[2].answers, False)
    seen = []
    with pytest.raises(InputError, match=r"ids 'q1' and 'q2' \(2 in all\): the question leaves no room.*shorten"):
        evaluate_answers(qa_model, squad_file(examples), "long.json", progress=lambda d, t: seen.append(d))
    assert seen == []


def test_progress_reaches_the_total_and_cancel_stops(qa_model):
    data = squad_file(made_up_file())
    seen = []
    evaluate_answers(qa_model, data, "d.json", batch_size=1, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(8, 12), (12, 12)]  # chunks of 8 x batch_size questions
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(CancelledError, match="after 0 of 12 questions"):
        evaluate_answers(qa_model, data, "d.json", cancel=cancel)


# --------------------------------------------------------------------------- two readers compared
def joy_file(n: int = 16) -> list[QAExample]:
    """Questions whose gold answer is "joy", put at a seeded place among random words of each context (what
    ``build_steered``'s reader answers wherever it stands, and a random span head rarely does)."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        words = long_context(8 + 2 * i, seed=100 + i).split()
        words.insert(int(rng.integers(0, len(words) + 1)), "joy")
        context = " ".join(words)
        out.append(QAExample(f"j{i}", QUESTIONS[i % len(QUESTIONS)], context, (("joy", context.index("joy")),),
                             False))
    return out


@pytest.fixture(scope="module")
def joy_model(tmp_path_factory):
    return bv.load_model(str(build_steered("bert", tmp_path_factory.mktemp("qa-joy") / "joy", "joy")), device="cpu")


def by_hand(a, b, seed: int, samples: int) -> dict:
    """The comparison recomputed from two evaluations made apart: the differences of the means, the questions each
    gets exactly right, and the paired bootstrap written out (one draw of question indices scores both)."""
    ea, eb, fa, fb = (np.array(x) for x in (a.exact_scores, b.exact_scores, a.f1_scores, b.f1_scores))
    rows = np.random.default_rng(seed).integers(0, len(ea), size=(samples, len(ea)))  # (B, N) the same for both
    out = {"difference": {"exact": eb.mean() - ea.mean(), "f1": fb.mean() - fa.mean()}, "interval": {}}
    for k, (xa, xb) in {"exact": (ea, eb), "f1": (fa, fb)}.items():
        draws = xb[rows].mean(axis=1) - xa[rows].mean(axis=1)  # (B,)
        out["interval"][k] = (np.percentile(draws, 2.5), np.percentile(draws, 97.5))
    ra, rb = ea == 1, eb == 1
    out["questions"] = {"both_right": int((ra & rb).sum()), "only_a_right": int((ra & ~rb).sum()),
                        "only_b_right": int((~ra & rb).sum()), "both_wrong": int((~ra & ~rb).sum())}
    return out


def test_a_comparison_is_the_two_evaluations_made_apart_and_recomputed_by_hand(qa_model, joy_model):
    data = squad_file(joy_file() + made_up_file(8))
    a, b = evaluate_answers(qa_model, data, "d.json", seed=4), evaluate_answers(joy_model, data, "d.json", seed=4)
    c = compare_readers(qa_model, joy_model, data, "d.json", seed=4, samples=500)
    assert [e.id for e in c.a.examples] == [e.id for e in a.examples]
    assert c.a.exact_scores == a.exact_scores and c.b.f1_scores == b.f1_scores  # each evaluation as made alone
    want = by_hand(a, b, seed=4, samples=500)
    for k in ("exact", "f1"):
        assert c.difference[k] == pytest.approx(want["difference"][k], abs=1e-12)
        assert c.interval[k] == pytest.approx(want["interval"][k], abs=1e-12)
    assert {k: c.questions[k] for k in want["questions"]} == want["questions"]
    assert c.questions["disagree"] == sum(pa.text != pb.text or pa.no_answer != pb.no_answer
                                          for pa, pb in zip(a.predictions, b.predictions))
    # the steered reader answers "joy" on the joy questions, the random one rarely: B better, said so
    assert c.difference["f1"] > 0.2 and c.interval["f1"][0] > 0 and c.questions["only_b_right"] >= 10
    assert c.better == joy_model.name
    assert c.reading.startswith(f"{joy_model.name} answers better: F1 B - A = {c.difference['f1']:+.3f}")
    swapped = compare_readers(joy_model, qa_model, data, "d.json", seed=4, samples=500)  # A and B swapped
    assert swapped.difference["f1"] == pytest.approx(-c.difference["f1"])
    assert swapped.questions["only_a_right"] == c.questions["only_b_right"] and swapped.better == joy_model.name
    d = c.to_dict()
    assert d["models"] == [qa_model.name, joy_model.name] and d["f1"] == [a.f1, b.f1] and d["reading"] == c.reading
    assert json.loads(json.dumps(d))["interval"]["f1"] == list(c.interval["f1"])


def test_a_reader_compared_with_itself_differs_by_nothing_and_cannot_be_told_apart(qa_model, joy_model):
    data = squad_file(joy_file(8) + made_up_file(8))
    c = compare_readers(joy_model, joy_model, data, "d.json")
    assert c.a.exact > 0 and c.a.f1 > 0  # it answers some right: the zeros below are not of an empty evaluation
    assert c.difference == {"exact": 0.0, "f1": 0.0} and c.interval == {"exact": (0.0, 0.0), "f1": (0.0, 0.0)}
    assert c.questions["only_a_right"] == c.questions["only_b_right"] == c.questions["disagree"] == 0
    assert c.questions["both_right"] == sum(e == 1 for e in c.a.exact_scores)
    assert c.better is None and c.reading.startswith("This file cannot tell them apart: F1 B - A = +0.000")


def test_a_model_that_is_not_a_reader_is_refused_as_either_side_before_any_answer(qa_model, signal_model_dir):
    data = squad_file(made_up_file(4))
    seen = []
    ok = compare_readers(qa_model, qa_model, data, "ok.json", progress=lambda d, t: seen.append((d, t)))
    assert ok.a.n_questions == 4 and seen[-1] == (8, 8)  # positive control; progress over both passes
    classifier = bv.load_model(str(signal_model_dir("bert")), device="cpu")
    for a, b in ((qa_model, classifier), (classifier, qa_model)):
        seen.clear()
        with pytest.raises(InputError, match=r"is a sequence classification model.*comparing two readers.*needs a "
                                             r"question answering model"):
            compare_readers(a, b, data, "ok.json", progress=lambda d, t: seen.append(d))
        assert seen == []


def test_a_question_either_reader_cannot_read_refuses_the_comparison_before_any_answer(qa_model):
    examples = made_up_file(4)
    examples[2] = QAExample("q2", " ".join(["film"] * (qa_model.max_length + 5)), examples[2].context,
                            examples[2].answers, False)
    seen = []
    with pytest.raises(InputError, match=r"id 'q2'.*no room"):
        compare_readers(qa_model, qa_model, squad_file(examples), "long.json", progress=lambda d, t: seen.append(d))
    assert seen == []
