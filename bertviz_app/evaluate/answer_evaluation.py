"""Evaluate an extractive question answering model (a span reader) on a SQuAD-format file: exact match and token F1
with intervals, the answered and unanswerable questions apart, slices, and the questions it answers wrong (issue 33).

    ev = evaluate_answers(lm, "dev-v2.0.json")        # SQuAD JSON (1.1 or 2.0) or a question/context/answer CSV
    ev.exact, ev.f1, ev.interval                       # SQuAD's EM and F1 (fractions), 95% bootstrap intervals
    ev.has_answer, ev.no_answer, ev.no_answer_accuracy # where the file has unanswerable questions
    ev.slices                                          # by question word, gold answer length, context length
    ev.errors()                                        # the questions not answered exactly, worst F1 first
    cmp = compare_readers(lm_a, lm_b, "dev-v2.0.json") # B - A in EM and F1, paired bootstrap; cmp.reading

The file goes through the question answering intake (``train.data.squad.read_squad``), refused for the same
reasons with the same messages (an answer not at its offset, a missing key, a classifier's or a tagger's file).
Then:

- **the model** must have the span head (``lm.require_head``: another head is refused with a message naming its
  head and where it is used); a question longer than the model reads, or a question or context past the
  settings' ``max_chars``, is refused with the ids of every such question before any is answered.
- **predictions**: ``models.answering.answer``, the questions a chunk at a time (windows of ``batch_size`` per
  forward pass); ``no_answer_threshold`` "auto" is 0.0 (the pipeline's ``handle_impossible_answer``) when the file
  has unanswerable questions and None (never "no answer", SQuAD 1.1) when it has none. ``progress(done, total)``
  after each chunk and ``cancel`` (a ``threading.Event``) checked before each: ``CancelledError``.
- **numbers**: ``answer_metrics``: each question's EM and F1 against its gold answers (the official SQuAD v2.0
  script's definitions; an unanswerable question's gold is ``[""]``), their means with 95% bootstrap intervals over
  questions (seeded); where the file has unanswerable questions, the same over the answerable ones
  (``has_answer``) and the unanswerable ones (``no_answer``), and the no-answer accuracy: the share of all
  questions where the model's choice between answering and "no answer" is the file's.
- **slices**, each with its questions (indices into ``examples``), EM, F1 and their intervals over its own
  questions: by **question word** (the first of who, what, when, where, why, how, which among the question's
  words, ignoring case; whom and whose count as who; none: other), by **gold answer length** in words (the first
  gold answer split on whitespace: no answer, 1, 2-3, 4-6, 7+) and by **context length** in words (the quartiles of
  the file's context lengths, fewer bins when they tie: bin b holds lengths above edge b-1 up to edge b). Each kind
  partitions the questions; only non-empty slices are listed.
- **errors**: the questions whose prediction is not an exact match, the lowest F1 first (file order on ties),
  with the question, context, gold answers, the prediction and its offsets, score and F1.

``compare_readers`` evaluates two readers on the same questions and gives B's EM and F1 minus A's, each with a paired
bootstrap interval (``mean_intervals`` of the per-question differences: the same resampled questions score both, so
what the questions share cancels; a reader compared with itself: exactly 0, interval (0, 0)), the questions only A or
only B answers exactly, and a sentence saying which answers better, judged by F1's interval, or that the file cannot
tell them apart. Both must be readers (their span heads may differ: another family, another fine-tune).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import CancelledError, InputError
from ..models.answering import Answer, answer, check_room, default_stride
from ..models.encoding import whole_number
from ..models.heads import QUESTION_ANSWERING
from ..models.registry import LoadedModel
from ..train.answer_metrics import BOOTSTRAP_SAMPLES, mean_intervals, score_answer
from ..train.data.messages import format_rows
from ..train.data.squad import QAExample, QAFile, read_squad

__all__ = ["AnswerComparison", "AnswerEvaluation", "AnswerSlice", "compare_readers", "compared_answers",
           "evaluate_answers", "question_word", "QUESTION_WORDS", "ANSWER_LENGTHS", "AUTO", "MAX_ERRORS_SHOWN"]

AUTO = "auto"  # no_answer_threshold: 0.0 when the file has unanswerable questions, else None
MAX_ERRORS_SHOWN = 200  # wrong answers listed in the JSON (``errors(None)`` gives them all)
QUESTION_WORDS = ("who", "what", "when", "where", "why", "how", "which", "other")
ANSWER_LENGTHS = (("no answer", 0, 0), ("1 word", 1, 1), ("2-3 words", 2, 3), ("4-6 words", 4, 6),
                  ("7+ words", 7, None))  # (name, fewest words, most words or None)
_ALIASES = {"whom": "who", "whose": "who"}
_WORD = re.compile(r"\w+", re.UNICODE)
_COMPARING = ("comparing two readers on a question answering file scores the answers each finds on the same "
              "questions; both models must be span readers")
_DOING = ("evaluating a question answering file (SQuAD JSON, or a question/context/answer_text/answer_start CSV) "
          "scores the answers a span reader finds")


def question_word(question: str) -> str:
    """The question's word among ``QUESTION_WORDS``: the first of who/what/when/where/why/how/which among its words
    (ignoring case; whom and whose are who), else "other"."""
    for word in _WORD.findall(question.casefold()):
        word = _ALIASES.get(word, word)
        if word in QUESTION_WORDS[:-1]:
            return word
    return "other"


@dataclass(frozen=True)
class AnswerSlice:
    """A group of questions and the reader's scores on them: ``kind`` "question word", "answer length" or "context
    length"; ``value`` the word, or the length range ("2-3"); ``questions``: indices into the evaluation's
    ``examples``."""

    kind: str
    name: str
    value: str
    questions: tuple[int, ...] = field(repr=False)
    exact: float
    f1: float
    interval: dict | None  # {"exact": (lo, hi), "f1": (lo, hi)}: 95% bootstrap over the slice's questions

    @property
    def n_questions(self) -> int:
        return len(self.questions)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "value": self.value, "n_questions": self.n_questions,
                "exact": self.exact, "f1": self.f1, "interval": _lists(self.interval)}


@dataclass(frozen=True, eq=False)
class AnswerEvaluation:
    """What ``evaluate_answers`` found. ``examples``, ``predictions``, ``exact_scores`` and ``f1_scores`` run in
    parallel, in file order."""

    model: str
    source: str  # the file's name
    format: str  # "squad" or "csv"
    examples: tuple[QAExample, ...]
    predictions: tuple[Answer, ...] = field(repr=False)
    exact_scores: tuple[float, ...] = field(repr=False)
    f1_scores: tuple[float, ...] = field(repr=False)
    interval: dict | None  # {"exact": (lo, hi), "f1": (lo, hi)}
    has_answer: dict | None  # {"n", "exact", "f1", "interval"} of the answerable questions; None: no unanswerable
    no_answer: dict | None  # the same of the unanswerable questions
    no_answer_accuracy: float | None  # None: the file has no unanswerable question
    slices: tuple[AnswerSlice, ...]
    options: dict  # n_best, max_answer_len, no_answer_threshold, stride, seed, samples
    notices: tuple[str, ...]

    @property
    def n_questions(self) -> int:
        return len(self.examples)

    @property
    def exact(self) -> float:
        return float(np.mean(self.exact_scores)) if self.exact_scores else 0.0

    @property
    def f1(self) -> float:
        return float(np.mean(self.f1_scores)) if self.f1_scores else 0.0

    def errors(self, limit: int | None = MAX_ERRORS_SHOWN) -> list[dict]:
        """The questions not answered exactly, the lowest F1 first (file order on ties): id, question, context,
        gold (the answer texts; [] for no answer), predicted, start, end, no_answer, score, f1."""
        wrong = [i for i, e in enumerate(self.exact_scores) if e < 1]
        wrong.sort(key=lambda i: self.f1_scores[i])  # stable: file order on ties
        out = []
        for i in wrong if limit is None else wrong[:limit]:
            e, p = self.examples[i], self.predictions[i]
            out.append({"id": e.id, "question": e.question, "context": e.context, "gold": [t for t, _ in e.answers],
                        "predicted": p.text, "start": p.start, "end": p.end, "no_answer": p.no_answer,
                        "score": p.score, "f1": self.f1_scores[i]})
        return out

    def to_dict(self, errors: int | None = MAX_ERRORS_SHOWN) -> dict:
        """The JSON of a question answering model's evaluation (``evaluate FILE --json``); ``errors``: how many of
        the wrong answers to list (None: all)."""
        n_wrong = sum(e < 1 for e in self.exact_scores)
        return {"model": self.model, "source": self.source, "format": self.format, "n_questions": self.n_questions,
                "n_unanswerable": sum(e.is_impossible for e in self.examples), "exact": self.exact, "f1": self.f1,
                "interval": _lists(self.interval), "has_answer": _group(self.has_answer),
                "no_answer": _group(self.no_answer), "no_answer_accuracy": self.no_answer_accuracy,
                "slices": [s.to_dict() for s in self.slices], "options": dict(self.options), "n_errors": n_wrong,
                "errors": self.errors(errors), "notices": list(self.notices)}


def _lists(interval: dict | None) -> dict | None:
    return None if interval is None else {k: list(v) for k, v in interval.items()}


def _group(group: dict | None) -> dict | None:
    return None if group is None else {**group, "interval": _lists(group["interval"])}


# --------------------------------------------------------------------------- one reader on a file
def evaluate_answers(lm: LoadedModel, source: str | os.PathLike | bytes | QAFile, name: str | None = None, *,
                     n_best: int = 5, max_answer_len: int = 30, no_answer_threshold: float | None | str = AUTO,
                     stride: int | None = None, batch_size: int = 32, seed: int = 0,
                     samples: int = BOOTSTRAP_SAMPLES, max_upload_mb: float | None = None,
                     max_questions: int | None = None, progress: Callable[[int, int], None] | None = None,
                     cancel: threading.Event | None = None) -> AnswerEvaluation:
    """Evaluate the question answering model ``lm`` on every question of a file (a path, its bytes with ``name``,
    or a read ``QAFile``): see the module's docstring. ``n_best``, ``max_answer_len``, ``no_answer_threshold``
    ("auto", a number or None), ``stride`` and ``batch_size`` go to ``answer``; ``seed`` and ``samples``: the
    bootstrap's; ``max_upload_mb``/``max_questions``: the intake's limits (default: ``lm.settings``' upload limit
    and rows). Bad input raises DataError/InputError saying what to fix, naming the questions."""
    lm.require_head(QUESTION_ANSWERING, _DOING)
    batch_size = whole_number(batch_size, "batch_size", 1)
    samples = whole_number(samples, "samples", 0)
    stride = default_stride(lm) if stride is None else whole_number(stride, "stride", 0)
    qf = source if isinstance(source, QAFile) else read_squad(
        source, name, max_upload_mb=lm.settings.max_upload_mb if max_upload_mb is None else max_upload_mb,
        max_questions=lm.settings.max_rows if max_questions is None else max_questions)
    examples = list(qf.examples)
    if no_answer_threshold == AUTO:
        no_answer_threshold = 0.0 if qf.n_impossible else None
    _check_questions(lm, examples, stride, qf.unit)
    options = {"n_best": n_best, "max_answer_len": max_answer_len, "no_answer_threshold": no_answer_threshold,
               "stride": stride, "batch_size": batch_size}
    predictions = _predict(lm, examples, options, progress, cancel)
    pairs = [score_answer([t for t, _ in e.answers], p.text) for e, p in zip(examples, predictions)]
    exact = np.array([float(em) for em, _ in pairs])  # (N,)
    f1 = np.array([f for _, f in pairs])  # (N,)
    impossible = np.array([e.is_impossible for e in examples], dtype=bool)  # (N,)
    chose_none = np.array([p.no_answer for p in predictions], dtype=bool)  # (N,)
    has_answer = no_answer = accuracy = None
    if impossible.any():
        has_answer = _scored(np.where(~impossible)[0], exact, f1, seed, samples)
        no_answer = _scored(np.where(impossible)[0], exact, f1, seed, samples)
        accuracy = float((chose_none == impossible).mean())
    return AnswerEvaluation(
        model=lm.name, source=qf.name, format=qf.format, examples=tuple(examples), predictions=tuple(predictions),
        exact_scores=tuple(exact.tolist()), f1_scores=tuple(f1.tolist()),
        interval=mean_intervals({"exact": exact, "f1": f1}, seed=seed, samples=samples), has_answer=has_answer,
        no_answer=no_answer, no_answer_accuracy=accuracy, slices=tuple(_slices(examples, exact, f1, seed, samples)),
        options={**options, "seed": seed, "samples": samples}, notices=qf.notices)


def _check_questions(lm: LoadedModel, examples: list[QAExample], stride: int, unit: str) -> None:
    """InputError naming every question (by id, or row) whose question or context is past ``max_chars``, or whose
    question leaves the context no room in the model's window; nothing is answered before."""
    limit = lm.settings.max_chars

    def named(items: list[QAExample]) -> str:
        return format_rows([e.id if unit == "row" else repr(e.id) for e in items], limit=5,
                           word="row" if unit == "row" else "id")

    for what in ("question", "context"):
        long = [e for e in examples if len(getattr(e, what)) > limit]
        if long:
            raise InputError(f"{named(long)}: the {what} is longer than {limit:,} characters, the limit "
                             f"(BERTVIZ_MAX_CHARS). Shorten {'them' if len(long) > 1 else 'it'} or raise the limit.")
    try:
        check_room(lm, [e.question for e in examples], stride)
        return
    except InputError:
        pass
    bad, reason = [], ""
    for e in examples:
        try:
            check_room(lm, [e.question], stride)
        except InputError as err:
            bad.append(e)
            reason = reason or str(err)  # the first one's, which says the limit and what to do
    raise InputError(f"{named(bad)} ({len(bad):,} in all): the question leaves no room for the context in "
                     f"{lm.name}'s window. The first: {reason}")


def _predict(lm: LoadedModel, examples: list[QAExample], options: dict, progress, cancel) -> list[Answer]:
    """``answer`` over every question, a chunk at a time (at most the settings' ``max_batch_texts``)."""
    total = len(examples)
    chunk = max(1, min(lm.settings.max_batch_texts, 8 * options["batch_size"]))
    out: list[Answer] = []
    for start in range(0, total, chunk):
        if cancel is not None and cancel.is_set():
            raise CancelledError(f"Evaluation cancelled after {start:,} of {total:,} questions; nothing was written.")
        part = examples[start:start + chunk]
        out += answer(lm, [e.question for e in part], [e.context for e in part], **options)
        if progress is not None:
            progress(start + len(part), total)
    return out


# --------------------------------------------------------------------------- two readers on one file
@dataclass(frozen=True, eq=False)
class AnswerComparison:
    """Two readers (A, B) on the same questions: each one's evaluation, B's EM and F1 minus A's with a paired
    bootstrap interval, and how many questions each answers exactly right."""

    a: AnswerEvaluation
    b: AnswerEvaluation
    difference: dict  # {"exact": B - A, "f1": B - A}
    interval: dict  # {"exact": (lo, hi), "f1": (lo, hi)}: 95% paired bootstrap over questions
    questions: dict  # {"both_right", "only_a_right", "only_b_right", "both_wrong", "disagree"}
    samples: int
    seed: int

    @property
    def better(self) -> str | None:
        """The model whose F1 is higher when the F1 difference's interval excludes 0; None when the file cannot
        tell them apart."""
        lo, hi = self.interval["f1"]
        if lo > 0 or hi < 0:
            return self.b.model if self.difference["f1"] > 0 else self.a.model
        return None

    @property
    def reading(self) -> str:
        """One sentence: which reader answers better on this file, or that the file cannot tell them apart (judged
        by F1's paired interval; EM's said beside it)."""
        d, iv = self.difference, self.interval
        span = (f"95% interval {iv['f1'][0]:+.3f} to {iv['f1'][1]:+.3f}; exact match B - A = {d['exact']:+.3f}, "
                f"{iv['exact'][0]:+.3f} to {iv['exact'][1]:+.3f}; paired bootstrap over {self.a.n_questions:,} "
                "questions")
        better = self.better
        if better is not None:
            return f"{better} answers better: F1 B - A = {d['f1']:+.3f} ({span}; the F1 interval excludes 0)."
        return (f"This file cannot tell them apart: F1 B - A = {d['f1']:+.3f} ({span}; the F1 interval includes 0). "
                "More questions would narrow it.")

    def to_dict(self) -> dict:
        """The comparison's JSON (``evaluate FILE --model A --compare-with B --json``: its "comparison")."""
        def scores(ev: AnswerEvaluation) -> dict:
            return {"model": ev.model, "exact": ev.exact, "f1": ev.f1, "interval": _lists(ev.interval),
                    "no_answer_accuracy": ev.no_answer_accuracy, "n_errors": sum(e < 1 for e in ev.exact_scores)}

        return {"models": [self.a.model, self.b.model], "n_questions": self.a.n_questions,
                "exact": [self.a.exact, self.b.exact], "f1": [self.a.f1, self.b.f1], "a": scores(self.a),
                "b": scores(self.b), "difference": dict(self.difference), "interval": _lists(self.interval),
                "questions": dict(self.questions), "better": self.better, "samples": self.samples,
                "seed": self.seed, "reading": self.reading}


def compare_readers(lm_a: LoadedModel, lm_b: LoadedModel, source: str | os.PathLike | bytes | QAFile,
                    name: str | None = None, *, n_best: int = 5, max_answer_len: int = 30,
                    no_answer_threshold: float | None | str = AUTO, stride: int | None = None, batch_size: int = 32,
                    seed: int = 0, samples: int = BOOTSTRAP_SAMPLES, max_upload_mb: float | None = None,
                    max_questions: int | None = None, progress: Callable[[int, int], None] | None = None,
                    cancel: threading.Event | None = None) -> AnswerComparison:
    """Evaluate readers A and B on the same questions of one file (read once, with A's limits unless given; both
    models checked against every question before any is answered) and compare them: B's EM and F1 minus A's, each
    with a 95% paired bootstrap interval (``mean_intervals`` of the per-question differences: each draw resamples
    the questions once and scores both readers on them, so a reader compared with itself gives exactly 0 and
    (0, 0)); the questions only A, only B, both or neither answers exactly; the questions where their answers
    differ. The options are ``evaluate_answers``' and apply to both (``stride`` None: each model's default);
    ``progress`` runs over both passes (0..N for A, N..2N for B). A model that is not a reader is refused
    (InputError naming its head)."""
    for lm in (lm_a, lm_b):
        lm.require_head(QUESTION_ANSWERING, _COMPARING)
    whole_number(batch_size, "batch_size", 1)
    samples = whole_number(samples, "samples", 0)
    qf = source if isinstance(source, QAFile) else read_squad(
        source, name, max_upload_mb=lm_a.settings.max_upload_mb if max_upload_mb is None else max_upload_mb,
        max_questions=lm_a.settings.max_rows if max_questions is None else max_questions)
    for lm in (lm_a, lm_b):  # a question one of them cannot read refuses the comparison before either answers
        _check_questions(lm, list(qf.examples), default_stride(lm) if stride is None else
                         whole_number(stride, "stride", 0), qf.unit)
    n = len(qf.examples)
    run = dict(n_best=n_best, max_answer_len=max_answer_len, no_answer_threshold=no_answer_threshold, stride=stride,
               batch_size=batch_size, seed=seed, samples=samples, cancel=cancel)
    a = evaluate_answers(lm_a, qf, progress=None if progress is None else (lambda d, _t: progress(d, 2 * n)), **run)
    b = evaluate_answers(lm_b, qf, progress=None if progress is None else (lambda d, _t: progress(n + d, 2 * n)),
                         **run)
    return compared_answers(a, b, seed=seed, samples=samples)


def compared_answers(a: AnswerEvaluation, b: AnswerEvaluation, *, seed: int = 0,
                     samples: int = BOOTSTRAP_SAMPLES) -> AnswerComparison:
    """Two evaluations of the same questions compared (``compare_readers`` without the answering): see there."""
    if [e.id for e in a.examples] != [e.id for e in b.examples]:
        raise InputError(f"{a.model} and {b.model} were evaluated on different questions ({a.source}: "
                         f"{a.n_questions:,}, {b.source}: {b.n_questions:,}): compare two evaluations of one file.")
    exact_a, exact_b = np.array(a.exact_scores), np.array(b.exact_scores)  # (N,) each
    f1_a, f1_b = np.array(a.f1_scores), np.array(b.f1_scores)  # (N,) each
    samples = max(1, samples)
    interval = mean_intervals({"exact": exact_b - exact_a, "f1": f1_b - f1_a}, seed=seed, samples=samples)
    if interval is None:  # no questions (the intake refuses an empty file): nothing to tell apart
        interval = {"exact": (0.0, 0.0), "f1": (0.0, 0.0)}
    right_a, right_b = exact_a >= 1, exact_b >= 1  # (N,) each
    disagree = sum((pa.no_answer, pa.text) != (pb.no_answer, pb.text) for pa, pb in zip(a.predictions, b.predictions))
    counts = {"both_right": int((right_a & right_b).sum()), "only_a_right": int((right_a & ~right_b).sum()),
              "only_b_right": int((~right_a & right_b).sum()), "both_wrong": int((~right_a & ~right_b).sum()),
              "disagree": int(disagree)}
    return AnswerComparison(a=a, b=b, difference={"exact": b.exact - a.exact, "f1": b.f1 - a.f1},
                            interval=interval, questions=counts, samples=samples, seed=seed)


# --------------------------------------------------------------------------- groups and slices
def _scored(idx: np.ndarray, exact: np.ndarray, f1: np.ndarray, seed: int, samples: int) -> dict:
    """{"n", "exact", "f1", "interval"} of the questions ``idx``."""
    e, f = exact[idx], f1[idx]
    return {"n": int(len(idx)), "exact": float(e.mean()) if len(idx) else 0.0,
            "f1": float(f.mean()) if len(idx) else 0.0,
            "interval": mean_intervals({"exact": e, "f1": f}, seed=seed, samples=samples)}


def _slices(examples: list[QAExample], exact: np.ndarray, f1: np.ndarray, seed: int,
            samples: int) -> list[AnswerSlice]:
    """By question word, by the first gold answer's length in words (fixed bins), by context length (quartiles)."""
    groups: list[tuple[str, str, str, list[int]]] = []
    words = [question_word(e.question) for e in examples]
    for w in QUESTION_WORDS:
        groups.append(("question word", f"question word {w}", w, [i for i, x in enumerate(words) if x == w]))
    lengths = [len(e.answers[0][0].split()) if e.answers else 0 for e in examples]
    for label, low, high in ANSWER_LENGTHS:
        idx = [i for i, n in enumerate(lengths) if n >= low and (high is None or n <= high)]
        value = label.split()[0] if low else "0"
        groups.append(("answer length", f"answer {label}", value, idx))
    groups += _context_bins([len(e.context.split()) for e in examples])
    out = []
    for kind, name, value, idx in groups:
        if idx:
            s = _scored(np.array(idx), exact, f1, seed, samples)
            out.append(AnswerSlice(kind, name, value, tuple(idx), s["exact"], s["f1"], s["interval"]))
    return out


def _context_bins(lengths: Sequence[int]) -> list[tuple[str, str, str, list[int]]]:
    """The questions by context length in words: quartile bins of the lengths (fewer when they tie)."""
    n = np.array(lengths, dtype=np.int64)  # (N,)
    if not len(n):
        return []
    edges = np.unique(np.quantile(n, [0.25, 0.5, 0.75], method="lower").astype(np.int64))  # (<=3,)
    bucket = np.searchsorted(edges, n, side="left")  # (N,) bin b: edges[b-1] < n <= edges[b]
    out = []
    for b in np.unique(bucket):
        idx = np.where(bucket == b)[0].tolist()
        lo, hi = int(n[idx].min()), int(n[idx].max())
        span = str(lo) if lo == hi else f"{lo}-{hi}"
        out.append(("context length", f"context {span} word{'s' * (hi != 1)}", span, idx))
    return out
