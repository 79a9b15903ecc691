"""The Evaluate tab's view of a question answering model's evaluation (a span reader, ``evaluate_answers``'
``AnswerEvaluation``): SQuAD's exact match and F1 with their intervals, the answerable and unanswerable questions
apart with the no-answer accuracy, the slices (question word, answer length, context length) worst first, and the
wrong answers lowest F1 first; with a second reader, the two compared on the same questions (``compare_readers``'
``AnswerComparison``: ``comparison_md``). A wrong answer's row clicked opens its question and context in the Predict
tab (``pick_error`` finds it). Pure helpers, tested alone; the handler is ``evaluate_events.Handlers.evaluate_reader``.

Like a tagger's, a reader's evaluation is shown and not stored (the stored evaluations are classifier run folders);
``NOT_STORED`` says so on the page, and that the command line's ``--json`` writes the same numbers.
"""

from __future__ import annotations

import pandas as pd

from bertviz_app.evaluate.answer_evaluation import MAX_ERRORS_SHOWN

from . import evaluate_tagger
from .evaluate_view import range_text, score_text
from .finetune_view import shown_name
from .markup import esc

__all__ = ["ERROR_COLUMNS", "FILE_TYPES", "MAX_ERRORS", "NOT_STORED", "READER_FILE", "READER_UPLOAD", "SLICE_COLUMNS",
           "comparison_md", "error_rows", "errors_frame", "n_wrong", "pick_error", "read_md", "slices_frame",
           "summary_md"]

NOT_STORED = ("A question answering model's evaluation is shown here and **not stored** (the stored evaluations below "
              "hold sequence classifiers' runs): `python -m bertviz_app evaluate FILE --model MODEL --json` writes the "
              "same numbers as JSON.")
READER_UPLOAD = "Question answering file (SQuAD .json, .csv)"
READER_FILE = ("**File for this question answering model:** SQuAD JSON (1.1 or 2.0: `data` → `paragraphs` → "
               "`context` and `qas`, each with `id`, `question`, `answers` [`text`, `answer_start`] and "
               "`is_impossible`), or a CSV with `question`, `context`, `answer_text` and `answer_start` columns (an "
               "empty `answer_text`: no answer; an optional `id` column). `answer_start` is the answer's character "
               "offset in the context as given.")
# the types of every head's files (gradio checks an upload against the types the component was built with): the
# classifier's and the tagger's, and SQuAD's .json
FILE_TYPES = [*evaluate_tagger.FILE_TYPES, ".json"]
MAX_ERRORS = MAX_ERRORS_SHOWN  # wrong answers listed (the evaluation's own cap for its JSON, as the tagger's)


def read_md(qf) -> str:
    """What was read from a question answering upload (``read_squad``'s ``QAFile``): questions, format, how many
    have no answer, and what the reader did."""
    fmt = "SQuAD JSON" + (f" {qf.version}" if qf.version else "") if qf.format == "squad" else "CSV"
    count = len(qf.examples)
    lines = [f"**{esc(qf.name)}**: {count:,} question{'s' * (count != 1)} ({esc(fmt)}; {qf.n_impossible:,} without an "
             "answer). Press Evaluate."]
    return "  \n".join(lines + [f"Note: {esc(n)}" for n in qf.notices])


def n_wrong(ev) -> int:
    """The questions not answered exactly (what ``errors`` lists, uncapped)."""
    return sum(e < 1 for e in ev.exact_scores)


def _row(what: str, n: int, exact, f1, interval) -> str:
    iv = interval or {}
    return (f"| {what} | {n:,} | {score_text(exact)} | {range_text(iv.get('exact'))} | {score_text(f1)} | "
            f"{range_text(iv.get('f1'))} |")


def summary_md(ev, stored_note: bool = True) -> str:
    """EM and F1 over every question with their 95% intervals, the answerable and unanswerable questions apart (where
    the file has both) and the no-answer accuracy, how many are wrong, the verdict (when the record has one), what
    the reader did, and that it is not stored."""
    threshold = ev.options.get("no_answer_threshold")
    said = "never (the file has no unanswerable question)" if threshold is None else f"{threshold:g}"
    head = [f"### {esc(shown_name(ev.model))} on {esc(ev.source)}",
            f"{ev.n_questions:,} questions ({esc(ev.format)}); SQuAD's exact match and F1 (fractions of questions, "
            "answers normalised as the official script does); 95% intervals by a bootstrap over questions. No-answer "
            f"threshold: {esc(said)}."]
    table = ["| questions | n | exact match | 95% interval | F1 | 95% interval |", "|---|---|---|---|---|---|",
             _row("**all**", ev.n_questions, ev.exact, ev.f1, ev.interval)]
    for what, group in (("answerable", ev.has_answer), ("unanswerable", ev.no_answer)):
        if group is not None:
            table.append(_row(what, group["n"], group["exact"], group["f1"], group["interval"]))
    tail = []
    if ev.no_answer_accuracy is not None:
        tail.append(f"Answer or \"no answer\" chosen as the file has it (no-answer accuracy): "
                    f"**{ev.no_answer_accuracy:.1%}** of questions.")
    else:
        tail.append("Every question has an answer (SQuAD 1.1): no unanswerable part and no no-answer accuracy.")
    wrong = n_wrong(ev)
    tail.append(f"Wrong answers (not an exact match): {wrong:,} of {ev.n_questions:,}"
                + (f"; the {MAX_ERRORS:,} with the lowest F1 are listed below." if wrong > MAX_ERRORS else "."))
    verdict = getattr(ev, "verdict", None)  # an evaluation that judges itself says so; AnswerEvaluation does not yet
    if verdict:
        tail.append(f"**Verdict:** {esc(verdict)}")
    tail += [f"Note: {esc(n)}" for n in ev.notices]
    if stored_note:
        tail.append(NOT_STORED)
    return "\n\n".join(["  \n".join(head), "\n".join(table), "  \n".join(tail)])


SLICE_COLUMNS = ["kind", "slice", "questions", "exact match", "F1", "F1 95% interval"]


def slices_frame(ev) -> pd.DataFrame:
    """The slices by question word, answer length and context length, the lowest F1 first (their kinds' order on
    ties)."""
    if ev is None:
        return pd.DataFrame(columns=SLICE_COLUMNS)
    shown = sorted(ev.slices, key=lambda s: s.f1)  # stable
    return pd.DataFrame([[s.kind, s.name, s.n_questions, score_text(s.exact), score_text(s.f1),
                          range_text((s.interval or {}).get("f1"))] for s in shown], columns=SLICE_COLUMNS)


ERROR_COLUMNS = ["id", "question", "gold", "predicted", "F1"]
NO_ANSWER = "(no answer)"


def errors_frame(ev) -> pd.DataFrame:
    """The wrong answers, lowest F1 first (the first ``MAX_ERRORS``): the question, its gold answers (" | " between
    two), the model's answer ("(no answer)" where it chose none, or the file has none) and its F1."""
    if ev is None:
        return pd.DataFrame(columns=ERROR_COLUMNS)
    rows = [[str(e["id"]), e["question"], " | ".join(e["gold"]) or NO_ANSWER,
             NO_ANSWER if e["no_answer"] else e["predicted"], round(float(e["f1"]), 3)]
            for e in ev.errors(MAX_ERRORS)]
    return pd.DataFrame(rows, columns=ERROR_COLUMNS)


def error_rows(ev) -> list[dict] | None:
    """The listed wrong answers (``errors_frame``'s rows, in its order) as a row opens them in Predict: id,
    question (Predict's Question box) and context (its Context box). None without an evaluation."""
    if ev is None:
        return None
    return [{"id": str(e["id"]), "text": e["question"], "pair": e["context"]} for e in ev.errors(MAX_ERRORS)]


def pick_error(rows: list[dict] | None, row_value, index=None) -> dict | None:
    """The wrong answer a click on ``errors_frame``'s table points at: the row whose id and question are the
    clicked row's (the table may be shown sorted); else the row at ``index`` when its id matches; None when none
    does (a stale page)."""
    if not rows or not row_value:
        return None
    key = [str(v) for v in row_value[:2]]
    for r in rows:
        if [r["id"], r["text"]][:len(key)] == key:
            return r
    if isinstance(index, int) and 0 <= index < len(rows) and rows[index]["id"] == key[0]:
        return rows[index]
    return None


def comparison_md(c) -> str:
    """Two readers on the same questions: both EM and F1, B - A with the paired intervals, the questions only one
    of them answers exactly, and the reading (which answers better, or that the file cannot tell them apart)."""
    if c is None:
        return ""
    a, b = shown_name(c.a.model), shown_name(c.b.model)
    d, iv, q = c.difference, c.interval, c.questions
    lines = [f"### {esc(a)} (A) and {esc(b)} (B) on the same {c.a.n_questions:,} questions",
             f"**{esc(_reading(c))}**"]
    table = ["| | A | B | B − A | 95% paired interval |", "|---|---|---|---|---|",
             f"| exact match | {c.a.exact:.3f} | {c.b.exact:.3f} | **{d['exact']:+.3f}** | "
             f"{iv['exact'][0]:+.3f} to {iv['exact'][1]:+.3f} |",
             f"| F1 | {c.a.f1:.3f} | {c.b.f1:.3f} | **{d['f1']:+.3f}** | {iv['f1'][0]:+.3f} to {iv['f1'][1]:+.3f} |"]
    tail = [f"Answered exactly by only A: **{q['only_a_right']:,}**; only B: **{q['only_b_right']:,}**; both "
            f"{q['both_right']:,}; neither {q['both_wrong']:,}. Their answers differ on {q['disagree']:,} questions.",
            f"{esc(c.reading)}",
            "Intervals: a bootstrap over questions, paired (each draw scores both readers on the same questions). "
            "The wrong answers below are A's."]
    return "\n\n".join(["  \n".join(lines), "\n".join(table), "  \n".join(tail)])


def _reading(c) -> str:
    """The verdict in a few words, shown names: which reader answers better, or that the file cannot tell."""
    if c.better is None:
        return "This file cannot tell them apart (F1's paired interval includes 0)."
    who, ev = ("B", c.b) if c.difference["f1"] > 0 else ("A", c.a)
    return f"{shown_name(ev.model)} ({who}) answers better on this file (F1's paired interval excludes 0)."
