"""evaluate FILE with a question answering model: a span reader scored on a SQuAD-format file (SQuAD JSON, or a
question/context/answer_text/answer_start CSV): SQuAD's exact match and F1 with intervals, the answered and
unanswerable questions apart, slices, and the questions it answers wrong; with --compare-with a second reader on the
same questions (B - A in EM and F1 with paired bootstrap intervals)."""

from __future__ import annotations

import sys
import threading

from .common import fail, file_run, print_json

ERRORS_PRINTED = 5  # wrong answers printed without --json (the JSON lists up to 200)
# evaluate's options that a question answering model's evaluation does not read: (attribute, option, what it is for)
_NOT_FOR_ANSWERS = (("text_column", "--text-column", "names a table's text column"),
                    ("label_column", "--label-column", "names a table's label column"),
                    ("pair_column", "--pair-column", "names a table's second text column"),
                    ("word", "--word", "slices a classifier's rows or a tagger's sentences by a word"),
                    ("layers", "--layers", "probes a classifier's [CLS] vectors"),
                    ("save_temperature", "--save-temperature", "calibrates a classifier's probabilities"),
                    ("out", "--out", "writes a classifier's run folder (use --json and redirect it)"))
# the options only a question answering model's evaluation reads: (attribute, option)
_ANSWERS_ONLY = (("no_answer_threshold", "--no-answer-threshold"), ("never_no_answer", "--never-no-answer"),
                 ("max_answer_len", "--max-answer-len"), ("stride", "--stride"))


def add_answer_options(p) -> None:
    """evaluate's options for a question answering model (each None or False unless given)."""
    p.add_argument("--no-answer-threshold", type=float, default=None,
                   help="a question answering model answers 'no answer' when its score beats the best span's by more "
                        "than this (default: 0 when the file has unanswerable questions, else never)")
    p.add_argument("--never-no-answer", action="store_true",
                   help="a question answering model always answers its best span")
    p.add_argument("--max-answer-len", type=int, default=None,
                   help="a question answering model's longest answer, in tokens (default 30)")
    p.add_argument("--stride", type=int, default=None,
                   help="context tokens shared by neighbouring windows of a long context (default: 128, or half the "
                        "window where that is less)")


def is_answerer(lm) -> bool:
    """Is the loaded model a question answering model (evaluate then scores its answers)?"""
    from ..models.heads import QUESTION_ANSWERING  # lazily: `bertviz-app --help` imports none of the core

    return lm.head is QUESTION_ANSWERING


def refuse_answer_file(args, lm) -> None:
    """A classifier or a tagger given a question answering file (SQuAD JSON, a question/context/answer CSV) or a
    question answering option: InputError naming the model's head and the question answering head that needs (the
    classifier's and the tagger's readers would only say the file is not theirs)."""
    from pathlib import Path

    from ..models.heads import QUESTION_ANSWERING  # lazily, as above
    from ..train.data.squad import looks_like_squad

    for attr, option in _ANSWERS_ONLY:
        if getattr(args, attr, None) not in (None, False):
            lm.require_head(QUESTION_ANSWERING, f"{option} is an option of a question answering model's evaluation")
    try:
        with Path(args.data).expanduser().open("rb") as f:
            head = f.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return  # the reader says what is wrong with the path
    if looks_like_squad(head):
        lm.require_head(QUESTION_ANSWERING, f"{Path(args.data).name} holds questions with their contexts and answers "
                                            "(SQuAD), and evaluating them scores the answers a span reader finds")


def cmd_evaluate_answers(args, lm) -> int:
    """evaluate FILE --model QA_MODEL [--no-answer-threshold T | --never-no-answer] [--compare-with QA_MODEL2]
    [--json]: what ``cmd_evaluate`` runs when the model is a question answering model. With --compare-with, both
    readers answer the same questions (``compare_readers``); a second model that is not a reader is refused (its
    head named) before either answers."""
    from ..evaluate.answer_evaluation import AUTO, compare_readers, evaluate_answers  # lazily, as above
    from ..models.registry import load_model

    if getattr(args, "engine", "local") == "ray":
        return fail("the Ray engine evaluates classifiers; a question answering model runs in one process: leave out "
                    "--engine ray")
    for attr, option, what in _NOT_FOR_ANSWERS:
        if getattr(args, attr, None):
            return fail(f"{option} {what}; {lm.name} is a question answering model: leave out {option}")
    threshold = None if args.never_no_answer else AUTO if args.no_answer_threshold is None else args.no_answer_threshold
    other = load_model(args.compare_with, device=args.device, settings=args.settings) if args.compare_with else None
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty:
            sys.stderr.write(f"\ranswered {done:,}/{total:,} questions")
            sys.stderr.flush()

    options = {} if args.max_answer_len is None else {"max_answer_len": args.max_answer_len}
    run = dict(no_answer_threshold=threshold, stride=args.stride, batch_size=args.batch_size, seed=args.seed,
               progress=progress, cancel=threading.Event(), **options)
    with file_run(tty):
        if other is None:
            ev, comparison = evaluate_answers(lm, args.data, **run), None
        else:
            comparison = compare_readers(lm, other, args.data, **run)
            ev = comparison.a
    if args.json:
        print_json({**ev.to_dict(), **({"comparison": comparison.to_dict()} if comparison is not None else {})})
        return 0
    print_answer_evaluation(ev)
    if comparison is not None:
        print_answer_comparison(comparison)
    return 0


def _interval(iv) -> str:
    return "n/a" if iv is None else f"[{iv[0]:.3f}, {iv[1]:.3f}]"


def print_answer_evaluation(ev) -> None:
    """The evaluation as text: what was read, EM and F1 with intervals, the two groups, slices, wrong answers."""
    d = ev.to_dict(errors=ERRORS_PRINTED)
    o = d["options"]
    threshold = "never" if o["no_answer_threshold"] is None else f"{o['no_answer_threshold']:g}"
    print(f"{d['n_questions']:,} questions of {ev.source} ({ev.format}, {d['n_unanswerable']:,} unanswerable) answered "
          f"by {ev.model} (no-answer threshold {threshold}, stride {o['stride']}); SQuAD's exact match and F1, 95% "
          "intervals by a bootstrap over questions")
    iv = d["interval"] or {}
    print(f"exact match {d['exact']:.4f} {_interval(iv.get('exact'))}  F1 {d['f1']:.4f} {_interval(iv.get('f1'))}")
    if d["no_answer_accuracy"] is not None:
        has, none = d["has_answer"], d["no_answer"]
        print(f"answerable {has['n']:,}: exact {has['exact']:.4f}, F1 {has['f1']:.4f}; unanswerable {none['n']:,}: "
              f"exact {none['exact']:.4f}; answer or no answer chosen right: {d['no_answer_accuracy']:.1%}")
    print("slices (exact, F1, F1 95% interval, questions):")
    width = max(len(s["name"]) for s in d["slices"])
    for s in d["slices"]:
        print(f"  {s['name']:<{width}}  {s['exact']:.3f}  {s['f1']:.3f}  "
              f"{_interval((s['interval'] or {}).get('f1')):<16}  n={s['n_questions']:,}")
    print(f"wrong answers (not an exact match): {d['n_errors']:,} of {d['n_questions']:,}"
          + (f" (the first {ERRORS_PRINTED}, lowest F1 first; --json lists up to 200)"
             if d["n_errors"] > ERRORS_PRINTED else ""))
    for e in d["errors"]:
        gold = " | ".join(repr(g) for g in e["gold"]) or "no answer"
        got = "no answer" if e["no_answer"] else repr(e["predicted"])
        print(f"  {e['id']}: {e['question']!r} -> {got} (gold {gold}), F1 {e['f1']:.2f}")
    for note in ev.notices:
        print(f"note: {note}")


def print_answer_comparison(c) -> None:
    """Two readers on the same questions: both EM and F1, B - A with their paired intervals, the questions each
    answers exactly, and which answers better."""
    a, b, d, iv, q = c.a, c.b, c.difference, c.interval, c.questions
    print(f"A = {a.model}, B = {b.model} on the same {a.n_questions:,} questions: exact match {a.exact:.4f} vs "
          f"{b.exact:.4f}, F1 {a.f1:.4f} vs {b.f1:.4f}")
    print(f"B - A: exact match {d['exact']:+.4f} [{iv['exact'][0]:+.3f}, {iv['exact'][1]:+.3f}], F1 {d['f1']:+.4f} "
          f"[{iv['f1'][0]:+.3f}, {iv['f1'][1]:+.3f}] (95% paired bootstrap over questions, {c.samples:,} draws)")
    print(f"questions answered exactly: both {q['both_right']:,}, only A {q['only_a_right']:,}, only B "
          f"{q['only_b_right']:,}, neither {q['both_wrong']:,}; the answers differ on {q['disagree']:,}")
    print(c.reading)
