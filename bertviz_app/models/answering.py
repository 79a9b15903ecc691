"""Extractive question answering: the span of a context that answers a question (issue 33).

``answer(lm, questions, contexts)`` runs a ``*ForQuestionAnswering`` model (the span head,
``heads.QUESTION_ANSWERING``) and answers one ``Answer`` record per question, decoded as transformers'
question-answering pipeline decodes it (transformers 4's ``pipelines/question_answering.py``: ``preprocess``,
``select_starts_ends``, ``decode_spans``, ``postprocess``; transformers 5 removed that pipeline, the models remain):

- the question and the context are one pair, question first (every tokenizer of the seven families pads on the
  right), cut into windows of ``lm.max_length`` tokens that share ``stride`` context tokens
  (``truncation="only_second"``, ``return_overflowing_tokens``): the whole question is in every window;
- in each window the start and end logits outside the context are set to -10000, except the first position
  ([CLS] / <s>, SQuAD 2.0's "no answer"), and each goes through a softmax over the window's positions;
- the no-answer score is p(start = first) x p(end = first), the lowest over the windows;
- spans: p(start) x p(end) for start <= end < start + ``max_answer_len`` over the context's positions (the first
  position zeroed), the ``2 n_best + 10`` best of each window, each widened to the tokenizer's whole words
  (``token_to_word`` / ``word_to_chars``) and so to characters of the context as given (``text == context[start:
  end]``);
- spans of one text (compared ignoring case) add up their scores, across windows too (the first one's characters
  are kept), and the ``n_best`` best are reported, best first;
- the answer is the best span unless the no-answer score beats its score by more than ``no_answer_threshold``
  (SQuAD 2.0's null-score threshold; 0: the pipeline's ``handle_impossible_answer=True``; None: never "no
  answer", the pipeline's default). Then the answer is "" at 0:0 with the no-answer score.

Windows of all the questions are batched (sorted by length, padded per batch, one forward pass per batch through
the composed forward, ``forward.classifier_logits``, in inference mode). Spans of probability 0 (the pipeline pads
its top list with them when a context has fewer spans than asked for) are never reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .encoding import check_text, whole_number
from .heads import QUESTION_ANSWERING
from .inference import PREDICT_ATTENTIONS, length_batches
from .registry import LoadedModel

__all__ = ["answer", "Answer", "AnswerSpan", "default_stride", "MASKED_LOGIT", "check_room", "window_logits",
           "span_probabilities", "best_spans", "span_characters"]

MASKED_LOGIT = -10000.0  # the logit the pipeline gives positions outside the context before its softmax


@dataclass(frozen=True)
class AnswerSpan:
    """One candidate answer: ``text == context[start:end]``, its score p(start) x p(end) (summed over the spans of
    the same text)."""

    text: str
    start: int
    end: int
    score: float

    def to_dict(self) -> dict:
        return {"answer": self.text, "start": self.start, "end": self.end, "score": self.score}


@dataclass(frozen=True)
class Answer:
    """What ``answer`` answers for one question: the answer (a span, or "" when there is none), the n-best spans,
    the no-answer score and how many windows the context took."""

    question: str
    context: str
    text: str  # context[start:end]; "" where the context holds no answer
    start: int
    end: int
    score: float  # the answer's score (the no-answer score where there is none)
    no_answer: bool
    no_answer_score: float  # p(start = [CLS]) x p(end = [CLS]), the lowest over the windows
    n_best: tuple[AnswerSpan, ...]  # the best spans, best first (no "no answer" among them)
    windows: int

    def to_dict(self) -> dict:
        """The JSON of ``bertviz-app answer --json`` and ``POST /v1/answer``."""
        return {"question": self.question, "answer": self.text, "start": self.start, "end": self.end,
                "score": self.score, "no_answer": self.no_answer, "no_answer_score": self.no_answer_score,
                "n_best": [s.to_dict() for s in self.n_best], "windows": self.windows}


def default_stride(lm: LoadedModel) -> int:
    """The pipeline's default ``doc_stride``: 128 context tokens, or half the window where that is less."""
    return min(128, lm.max_length // 2)


def _pairs(questions, contexts, max_chars: int, max_batch: int) -> tuple[list[str], list[str]]:
    """One context per question: a single context (or question) is shared by all; each checked."""
    qs = [questions] if isinstance(questions, str) or questions is None else list(questions)
    cs = [contexts] if isinstance(contexts, str) or contexts is None else list(contexts)
    if not qs:
        raise InputError("No question given: ask at least one question.")
    if not cs:
        raise InputError("No context given: give the text the answer is to be found in.")
    if len(cs) == 1 and len(qs) > 1:
        cs = cs * len(qs)
    elif len(qs) == 1 and len(cs) > 1:
        qs = qs * len(cs)
    if len(qs) != len(cs):
        raise InputError(f"{len(qs)} questions but {len(cs)} contexts: give one context, or one per question.")
    if len(qs) > max_batch:
        raise InputError(f"{len(qs):,} questions in one call; the limit is {max_batch:,}. Split the input.")
    many = len(qs) > 1
    qs = [check_text(q, f"Question {i + 1}" if many else "The question", max_chars) for i, q in enumerate(qs)]
    cs = [check_text(c, f"Context {i + 1}" if many else "The context", max_chars) for i, c in enumerate(cs)]
    return qs, cs


def check_room(lm: LoadedModel, questions: list[str], stride: int) -> None:
    """InputError unless each question leaves the context room in a window, more than ``stride`` tokens (else no
    window would read a new context token)."""
    specials = lm.tokenizer.num_special_tokens_to_add(pair=True)
    lengths = [len(ids) for ids in lm.tokenizer(questions, add_special_tokens=False)["input_ids"]]
    for i, n in enumerate(lengths):
        which = f"Question {i + 1}" if len(questions) > 1 else "The question"
        room = lm.max_length - specials - n  # context tokens one window holds
        if room < 1:
            raise InputError(
                f"{which} is {n} word-pieces; {lm.name} reads {lm.max_length} in all, question and context together "
                f"({specials} special tokens among them): shorten the question to fewer than "
                f"{max(1, lm.max_length - specials - stride)} word-pieces.")
        if stride >= room:
            raise InputError(
                f"stride {stride} (context tokens shared by neighbouring windows) leaves no new context in a window: "
                f"with this question a window holds {room} context tokens. Use a stride below {room}, or a shorter "
                f"question.")


def answer(lm: LoadedModel, questions: str | Sequence[str], contexts: str | Sequence[str], *, n_best: int = 5,
           max_answer_len: int = 30, no_answer_threshold: float | None = 0.0, stride: int | None = None,
           batch_size: int = 32, attention: str | None = None) -> list[Answer]:
    """Answer every question (a string or a list; order kept) from its context (one context for all, or one per
    question) with a question answering model: see the module's docstring. ``n_best``: spans reported;
    ``max_answer_len``: the longest span, in tokens; ``no_answer_threshold``: "no answer" when the no-answer score
    exceeds the best span's by more than this (None: never); ``stride`` (None: ``default_stride``): context tokens
    shared by neighbouring windows. ``batch_size``: windows per forward pass. ``attention``: "auto", "eager" or
    "sdpa" (None: the settings'). A model of another head, an empty question or context, a question longer than
    the model reads, a bad option: InputError saying what to send."""
    lm.require_head(QUESTION_ANSWERING, "answer finds a question's answer in a context")
    settings = lm.settings
    questions, contexts = _pairs(questions, contexts, settings.max_chars, settings.max_batch_texts)
    n_best = whole_number(n_best, "n_best", 1)
    max_answer_len = whole_number(max_answer_len, "max_answer_len", 1)
    stride = default_stride(lm) if stride is None else whole_number(stride, "stride", 0)
    batch_size = whole_number(batch_size, "batch_size", 1)
    if no_answer_threshold is not None:
        if isinstance(no_answer_threshold, bool) or not isinstance(no_answer_threshold, (int, float)) \
                or not math.isfinite(no_answer_threshold):
            raise InputError(f"no_answer_threshold must be a number (or null: never answer \"no answer\"), got "
                             f"{no_answer_threshold!r}.")
        no_answer_threshold = float(no_answer_threshold)
    attention = settings.predict_attention if attention is None else attention
    if attention not in PREDICT_ATTENTIONS:
        raise InputError(f"attention must be one of {', '.join(PREDICT_ATTENTIONS)}, got {attention!r}.")
    if lm.tokenizer.padding_side != "right":  # none of the seven families; the pipeline would put the context first
        raise InputError(f"{lm.name}'s tokenizer pads on the left; answer reads the question first and needs one "
                         "that pads on the right.")
    check_room(lm, questions, stride)
    enc = lm.tokenizer(questions, contexts, truncation="only_second", max_length=lm.max_length, stride=stride,
                       return_overflowing_tokens=True, return_offsets_mapping=True)
    owner = list(enc["overflow_to_sample_mapping"])  # window -> question
    logits = window_logits(lm, enc, batch_size, attention)
    by_question: list[list[int]] = [[] for _ in questions]
    for w, i in enumerate(owner):
        by_question[i].append(w)
    return [_answer(lm, q, c, enc, by_question[i], logits, n_best, max_answer_len, no_answer_threshold)
            for i, (q, c) in enumerate(zip(questions, contexts))]


def window_logits(lm: LoadedModel, enc, batch_size: int, attention: str) -> list[np.ndarray]:
    """Each window's (T, 2) float32 start and end logits, no padding (``inference.length_batches``)."""
    lengths = [len(ids) for ids in enc["input_ids"]]
    out: list[np.ndarray | None] = [None] * len(lengths)
    for idx, logits in length_batches(lm, enc, batch_size, attention, cls_only=False):
        rows = logits.float().cpu().numpy()  # (B, T, 2)
        for row, i in enumerate(idx):
            out[i] = rows[row, : lengths[i]]
    return out


def span_probabilities(lm: LoadedModel, encoding, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p(start), p(end), allowed) over one window's positions: the logits outside the context (but for [CLS]) set
    to ``MASKED_LOGIT``, then a softmax over the positions (the pipeline's ``select_starts_ends``)."""
    allowed = np.array([s == 1 for s in encoding.sequence_ids])  # (T,): the context's tokens
    cls = lm.tokenizer.cls_token_id
    if cls is not None:
        allowed |= np.array(encoding.ids) == cls  # [CLS] stays: "no answer"
    x = np.where(allowed[:, None], logits.astype(np.float64), MASKED_LOGIT)  # (T, 2)
    x = np.exp(x - x.max(axis=0, keepdims=True))
    p = x / x.sum(axis=0, keepdims=True)  # (T, 2)
    return p[:, 0].copy(), p[:, 1].copy(), allowed


def best_spans(p_start: np.ndarray, p_end: np.ndarray, allowed: np.ndarray, k: int, max_len: int):
    """The ``k`` best (start, end, score) of one window, best first: start <= end < start + max_len, both in the
    context, score p(start) x p(end) > 0. Ties go to the earlier (start, end), as a stable sort of every pair of
    the window would order them; only the band of ``max_len`` ends after each start is scored, and only the
    candidates at or above the k-th best score are sorted (the pipeline's ``argpartition``, kept exact on ties)."""
    n = len(p_start)
    width = min(max_len, n)
    ends = np.arange(n)[:, None] + np.arange(width)  # (T, W): the end of the span [start, start + d]
    valid = (ends < n) & allowed[:, None]
    ends = np.minimum(ends, n - 1)
    valid &= allowed[ends]
    flat = np.where(valid, p_start[:, None] * p_end[ends], 0.0).ravel()  # (T * W,), in (start, end) order
    if k < flat.size:
        kth = np.partition(flat, flat.size - k)[flat.size - k]  # the k-th best score
        candidates = np.flatnonzero(flat >= kth)
    else:
        candidates = np.arange(flat.size)
    top = candidates[np.argsort(-flat[candidates], kind="stable")][:k]
    top = top[flat[top] > 0]
    starts, offsets = np.divmod(top, width)
    return [(int(s), int(s + d), float(flat[t])) for s, d, t in zip(starts, offsets, top)]


def span_characters(encoding, s: int, e: int) -> tuple[int, int]:
    """A token span's characters in the context, widened to the tokenizer's whole words (the pipeline's
    ``align_to_words``); a token of no word: its own offsets."""
    try:
        return (encoding.word_to_chars(encoding.token_to_word(s), sequence_index=1)[0],
                encoding.word_to_chars(encoding.token_to_word(e), sequence_index=1)[1])
    except (TypeError, ValueError, IndexError):
        return encoding.offsets[s][0], encoding.offsets[e][1]


def _answer(lm: LoadedModel, question: str, context: str, enc, windows: list[int], logits: list[np.ndarray],
            n_best: int, max_answer_len: int, threshold: float | None) -> Answer:
    spans: list[list] = []  # [text, start, end, score], first seen first
    by_text: dict[str, list] = {}
    no_answer_score = math.inf
    for w in windows:
        encoding = enc.encodings[w]
        p_start, p_end, allowed = span_probabilities(lm, encoding, logits[w])
        no_answer_score = min(no_answer_score, float(p_start[0] * p_end[0]))
        p_start[0] = p_end[0] = 0.0  # the first position is "no answer", never a span's end
        for s, e, score in best_spans(p_start, p_end, allowed, 2 * n_best + 10, max_answer_len):
            a, b = span_characters(encoding, s, e)
            text = context[a:b]
            same = by_text.get(text.lower())
            if same is not None:
                same[3] += score
            else:
                by_text[text.lower()] = row = [text, a, b, score]
                spans.append(row)
    spans.sort(key=lambda r: -r[3])  # stable: the first seen first on a tie
    best = tuple(AnswerSpan(text=t, start=a, end=b, score=float(sc)) for t, a, b, sc in spans[:n_best])
    none = threshold is not None and (not best or no_answer_score > best[0].score + threshold)
    if none or not best:
        return Answer(question=question, context=context, text="", start=0, end=0, score=no_answer_score,
                      no_answer=True, no_answer_score=no_answer_score, n_best=best, windows=len(windows))
    top = best[0]
    return Answer(question=question, context=context, text=top.text, start=top.start, end=top.end, score=top.score,
                  no_answer=False, no_answer_score=no_answer_score, n_best=best, windows=len(windows))
