"""Why a question answering model answers what it answers: attributions of an answer span (issue 33).

``explain_answer(lm, question, context)`` explains a ``*ForQuestionAnswering`` model's answer with Integrated
Gradients on the word embeddings of the question and the context together: the predicted span (the default), any
span of the context chosen by its characters, or SQuAD 2.0's "no answer"; as a whole (``part="span"``), or its start
or its end alone, each part one record, all the parts of a call in one batched computation.

The target (the scalar explained). In the window the span is read in, the start and the end logits outside the
context are set to -10000 but for the first position ([CLS] / <s>), and each goes through a softmax over the
window's positions, exactly as ``answer`` computes them (``answering.span_probabilities``). For a span whose first
token is at position s and last at e:

    F(x) = log p(start = s) + log p(end = e)

the log of the span's score p(start) x p(end) (before ``answer`` adds up spans of the same text). Why this one: a
log-probability does not saturate (a span answered at 0.999 still has a gradient, as its probability would not),
and it does not depend on the logits' arbitrary offset (raw logits would); it is a sum, and Integrated Gradients is
linear in the target, so the span's attributions are the start's (``part="start"``: log p(start = s)) plus the
end's (``part="end"``: log p(end = e)). ``target="prob"`` explains the score itself, p(start) x p(end) (for a part:
its probability). "No answer" is s = e = the first position.

Integrated Gradients: the straight path from the baseline's word vectors (every question and context token replaced
by [PAD], [MASK] or [UNK], or zero vectors; special tokens keep theirs) to the input's, through the model's composed
forward (``forward.classifier_logits``, every position), with the classifier's engine (``attribution
.AttributionEngine``, as ``entity_attribution.TargetEngine``): fixed Gauss-Legendre steps or adaptive Gauss-Lobatto
segments refined until the relative convergence delta is within ``tolerance``. Completeness: the tokens' scores add
up to F(x) - F(baseline); ``delta`` = sum(scores) - (F(x) - F(baseline)). The record says which tokens are the
question's and which the context's (``sides``), and its words are the tokenizer's words of each side.

Long contexts: the context is read in ``answer``'s windows; the span is explained on one window: the predicted
span on the window where its score is the highest among the windows' spans of its text (the one ``answer`` found
it in), a chosen span on the window holding it where its score is the highest, "no answer" on the window whose
no-answer score is the lowest (the one ``answer`` reports). The record says which (``window``, of ``windows``).

``occlude_answer`` explains the same targets by occlusion: each word of the question and of the context replaced by
the baseline's word vectors, one batched forward pass for all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import InputError
from ..models.answering import (
    MASKED_LOGIT,
    answer,
    best_spans,
    check_room,
    default_stride,
    span_characters,
    span_probabilities,
    whole_number,
    window_logits,
)
from ..models.encoding import check_text
from ..models.families import family_of
from ..models.heads import QUESTION_ANSWERING
from ..models.registry import LoadedModel
from ..results import TokenInfo
from .attribution_options import baseline_token, check_args, steps_mode
from .entity_attribution import LogitsTargetEngine, variant_values

__all__ = ["explain_answer", "occlude_answer", "SpanAttribution", "SpanTarget", "SideWord", "PARTS", "TARGETS", "SIDES",
           "SpanEngine", "prepare_span", "side_words", "span_record"]

PARTS = ("span", "start", "end")
TARGETS = ("logprob", "prob")
SIDES = ("question", "context")


@dataclass(frozen=True)
class SideWord:
    """One word of the question or of the context (characters into its own side's text) and the sum of its
    tokens' scores (occlusion: the drop with the whole word removed)."""

    side: str  # "question" or "context"
    word: str
    start: int
    end: int
    score: float
    tokens: tuple[int, int]  # [a, b) into the record's tokens (window positions)

    def to_dict(self) -> dict:
        return {"side": self.side, "word": self.word, "start": self.start, "end": self.end, "score": self.score,
                "tokens": list(self.tokens)}


@dataclass(frozen=True)
class SpanTarget:
    """What one record explains: a span of the context (``kind`` "predicted" or "chosen") or "no-answer", as a
    whole or its start or its end (``part``)."""

    kind: str  # "predicted", "chosen" or "no-answer"
    part: str  # "span", "start" or "end"
    text: str  # context[start:end] ("" for no answer)
    start: int  # characters into the context
    end: int
    first: int  # the window positions of its start and end tokens (0 and 0: no answer)
    last: int
    p_start: float  # p(start = first), p(end = last) in that window, as answer computes them
    p_end: float

    def to_dict(self) -> dict:
        return {"kind": self.kind, "part": self.part, "text": self.text, "start": self.start, "end": self.end,
                "tokens": [self.first, self.last], "p_start": self.p_start, "p_end": self.p_end}


@dataclass(frozen=True, eq=False)
class SpanAttribution:
    """One target's attribution: a score per token of the window read (special tokens 0) and per word of each
    side. Integrated Gradients: ``scores.sum() == f_x - f_baseline + delta``."""

    question: str
    context: str
    target: SpanTarget
    objective: str  # "logprob" (F) or "prob" (exp F)
    method: str  # "integrated_gradients", "occlusion", "lime" or "kernel_shap" (``span_methods``)
    tokens: tuple[str, ...]  # the window's tokens, specials included
    sides: tuple[str | None, ...]  # "question", "context" or None (a special token), parallel to tokens
    offsets: tuple[tuple[int, int], ...]  # characters into each token's own side
    scores: np.ndarray  # (T,) float32, parallel to tokens
    words: tuple[SideWord, ...]
    f_x: float
    f_baseline: float
    delta: float | None  # IG's convergence delta; None for occlusion, LIME and KernelSHAP
    n_steps: int | None
    tolerance: float | None
    baseline: str
    window: int  # the window explained (0: the first, or the only one)
    windows: int  # how many windows the context took

    @property
    def relative_delta(self) -> float | None:
        if self.delta is None:
            return None
        gap = abs(self.f_x - self.f_baseline)
        return float(abs(self.delta) / gap) if gap > 1e-12 else float("inf") if abs(self.delta) > 1e-12 else 0.0

    def side_total(self, side: str) -> float:
        """The summed scores of one side's tokens ("question" or "context")."""
        return float(sum(s for s, x in zip(self.scores, self.sides) if x == side))

    def to_dict(self) -> dict:
        """The JSON of ``bertviz-app explain --question Q --context C --json``."""
        return {"question": self.question, "context": self.context,
                "target": self.target.to_dict() | {"objective": self.objective}, "method": self.method,
                "tokens": list(self.tokens), "sides": list(self.sides), "scores": [float(s) for s in self.scores],
                "words": [w.to_dict() for w in self.words],
                "totals": {side: self.side_total(side) for side in SIDES}, "f_x": self.f_x,
                "f_baseline": self.f_baseline, "delta": self.delta, "relative_delta": self.relative_delta,
                "n_steps": self.n_steps, "tolerance": self.tolerance, "baseline": self.baseline,
                "window": self.window, "windows": self.windows}


@dataclass
class _Plan:
    """One call's window, the span's tokens in it, and the parts to explain."""

    enc: object
    w: int  # the window explained
    kind: str
    first: int
    last: int
    text: str
    start: int
    end: int
    p_start: float
    p_end: float
    allowed: np.ndarray  # (T,) bool: the positions answer's softmax reads unmasked


def _parts(part) -> list[str]:
    items = [part] if isinstance(part, str) else list(part) if part is not None else []
    if not items or any(p not in PARTS for p in items):
        raise InputError(f"part must be one of {', '.join(PARTS)} (or a list of them), got {part!r}.")
    return items


def _span_chars(span, context: str) -> tuple[int, int]:
    """A chosen span's characters, checked and trimmed of the spaces at its ends."""
    try:
        a, b = (int(v) for v in span)
        ok = all(not isinstance(v, bool) and int(v) == v for v in span)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError(f"span must be None (the predicted answer), \"no-answer\", or (start, end) characters of the "
                         f"context, got {span!r}.")
    if not 0 <= a < b <= len(context):
        raise InputError(f"span {a}:{b} is not within the context, which has {len(context)} characters: give "
                         f"0 <= start < end <= {len(context)}.")
    while a < b and context[a].isspace():
        a += 1
    while b > a and context[b - 1].isspace():
        b -= 1
    if a == b:
        raise InputError(f"span {span[0]}:{span[1]} is only spaces: it holds no token of the context.")
    return a, b


def _plan(lm: LoadedModel, question: str, context: str, span, max_answer_len: int, stride: int) -> _Plan:
    """Windows as ``answer`` reads them, their probabilities, and the window and tokens of the span explained."""
    check_room(lm, [question], stride)
    enc = lm.tokenizer([question], [context], truncation="only_second", max_length=lm.max_length, stride=stride,
                       return_overflowing_tokens=True, return_offsets_mapping=True)
    logits = window_logits(lm, enc, 32, lm.settings.predict_attention)
    probs = [span_probabilities(lm, enc.encodings[w], logits[w]) for w in range(len(logits))]
    if isinstance(span, str) and span in ("no-answer", "no_answer", "none"):
        w = min(range(len(probs)), key=lambda k: (probs[k][0][0] * probs[k][1][0], k))
        ps, pe, allowed = probs[w]
        return _Plan(enc, w, "no-answer", 0, 0, "", 0, 0, float(ps[0]), float(pe[0]), allowed)
    if span is None:
        top = answer(lm, question, context, n_best=1, max_answer_len=max_answer_len, no_answer_threshold=None,
                     stride=stride)[0]
        if not top.n_best:
            raise InputError("The model finds no span in this context (every span has probability 0).")
        best = None
        for w, (ps, pe, allowed) in enumerate(probs):
            ps, pe = ps.copy(), pe.copy()
            ps[0] = pe[0] = 0.0
            for s, e, score in best_spans(ps, pe, allowed, 12, max_answer_len):
                a, b = span_characters(enc.encodings[w], s, e)
                if context[a:b].lower() == top.text.lower() and (best is None or score > best[0]):
                    best = (score, w, s, e, a, b)
        _, w, s, e, a, b = best
        ps, pe, allowed = probs[w]
        return _Plan(enc, w, "predicted", s, e, context[a:b], a, b, float(ps[s]), float(pe[e]), allowed)
    a, b = _span_chars(span, context)
    held = []  # (score, window, first, last) of each window holding the whole span
    longest = 0
    for w, (ps, pe, _) in enumerate(probs):
        e_ = enc.encodings[w]
        at = [i for i, (sid, (x, y)) in enumerate(zip(e_.sequence_ids, e_.offsets)) if sid == 1 and x < b and y > a]
        if not at or e_.offsets[at[0]][0] > a or e_.offsets[at[-1]][1] < b:
            continue
        s, e = at[0], at[-1]
        longest = max(longest, e - s + 1)
        if e - s + 1 <= max_answer_len:
            held.append((float(ps[s] * pe[e]), w, s, e))
    if not held:
        if longest:
            raise InputError(f"span {a}:{b} ({context[a:b]!r}) is {longest} tokens, past the longest answer "
                             f"({max_answer_len} tokens): choose a shorter span or raise max_answer_len.")
        raise InputError(f"span {a}:{b} ({context[a:b]!r}) maps to no tokens of the context in one window: choose "
                         "characters of the context's words (a span no longer than a window).")
    _, w, s, e = max(held, key=lambda h: (h[0], -h[1]))
    ps, pe, allowed = probs[w]
    return _Plan(enc, w, "chosen", s, e, context[a:b], a, b, float(ps[s]), float(pe[e]), allowed)


class SpanEngine(LogitsTargetEngine):
    """The classifier's attribution engine with one row per part of one window: every row holds the same window,
    and row r's output is its part's F (``target_values``)."""

    @classmethod
    def for_parts(cls, lm: LoadedModel, plan: _Plan, parts: list[str], objective: str, baseline: str,
                  question: str, context: str) -> SpanEngine:
        e = plan.enc.encodings[plan.w]
        info = TokenInfo(tokens=tuple(e.tokens), offsets=tuple(tuple(o) for o in e.offsets),
                         sequence_ids=tuple(e.sequence_ids), text=question, pair=context, truncated=False)
        types = list(e.type_ids) if "token_type_ids" in plan.enc else None
        engine = cls.for_tokens(lm, e.ids, types, info, target=None, baseline=baseline, cls_only=False,
                                evaluate=False)
        engine._every_word_moves(lm, [s is not None for s in e.sequence_ids], baseline)
        k = len(parts)
        engine.infos = [info] * k
        for name in ("ids", "mask", "types", "base_ids", "emb", "base", "diff"):
            setattr(engine, name, getattr(engine, name).expand(k, *getattr(engine, name).shape[1:]))
        engine.targets = [0] * k  # column 0 of ``forward``: each row's own F
        engine.objective = objective
        device = engine.ids.device
        engine.allowed = torch.tensor(plan.allowed, device=device)  # (T,)
        engine.first, engine.last = plan.first, plan.last
        engine.weights = torch.tensor([[p in ("span", "start"), p in ("span", "end")] for p in parts],
                                      dtype=torch.float32, device=device)  # (K, 2): start's and end's share
        return engine

    def _every_word_moves(self, lm: LoadedModel, moves: list[bool], baseline: str) -> None:
        """The baseline at every question and context position: the tokenizer's special-tokens mask counts [UNK]
        as special, so ``baseline_ids`` keeps an unknown word's vector; here every token the tokenizer made of the
        question or the context moves along the path (an unknown word is still a word the model read)."""
        at = torch.tensor(moves, device=self.ids.device)  # (T,)
        token_id = getattr(lm.tokenizer, f"{baseline_token(baseline)}_token_id")
        self.base_ids = torch.where(at, torch.full_like(self.ids, token_id), self.ids)  # (1, T)
        words = family_of(self.model).word_embeddings(self.model)
        with torch.no_grad():
            self.base = words(self.base_ids)
            if baseline == "zero":
                self.base = self.base * ~at.view(1, -1, 1)  # zero vectors except the special tokens
            self.diff = self.emb - self.base

    def target_values(self, logits: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """(R, 1): each row's F from span logits (R, T, 2): answer's masking, a softmax over the positions."""
        x = torch.where(self.allowed.view(1, -1, 1), logits.float(), torch.full_like(logits.float(), MASKED_LOGIT))
        logp = torch.log_softmax(x, dim=1)  # (R, T, 2)
        both = torch.stack([logp[:, self.first, 0], logp[:, self.last, 1]], dim=1)  # (R, 2)
        f = (both * self.weights[rows]).sum(dim=1, keepdim=True)  # (R, 1)
        return f if self.objective == "logprob" else f.exp()


def prepare_span(lm, question, context, span, part, target, baseline, max_answer_len, stride):
    """The checked arguments of one call and its plan: (question, context, parts, plan), the plan holding the windows
    as ``answer`` reads them, the window explained and the span's tokens in it (``span_methods`` plans with it too).
    A model of another head, an empty question or context, a bad span, part, target or baseline: InputError."""
    lm.require_head(QUESTION_ANSWERING, "explaining an answer explains a question answering model's span")
    if target not in TARGETS:
        raise InputError(f"target must be one of {', '.join(TARGETS)}, got {target!r}.")
    check_args(baseline, 2, "prob")
    parts = _parts(part)
    max_answer_len = whole_number(max_answer_len, "max_answer_len", 1)
    stride = default_stride(lm) if stride is None else whole_number(stride, "stride", 0)
    question = check_text(question, "The question", lm.settings.max_chars)
    context = check_text(context, "The context", lm.settings.max_chars)
    if not (span is None or isinstance(span, str) and span in ("no-answer", "no_answer", "none")
            or not isinstance(span, str)):
        raise InputError(f"span must be None (the predicted answer), \"no-answer\", or (start, end) characters of "
                         f"the context, got {span!r}.")
    return question, context, parts, _plan(lm, question, context, span, max_answer_len, stride)


def side_words(enc, question: str, context: str) -> list[tuple[str, str, int, int, int, int]]:
    """(side, word, start, end, first token, end token) of every word of the window ``enc``, question's first (the
    order of a record's ``words``)."""
    out, seen = [], {}
    for i, (sid, wid) in enumerate(zip(enc.sequence_ids, enc.word_ids)):
        if sid is None or wid is None:
            continue
        key = (sid, wid)
        if key in seen:
            seen[key][1] = i + 1
        else:
            seen[key] = [i, i + 1]
    for (sid, wid), (a, b) in seen.items():
        s, e = enc.word_to_chars(wid, sequence_index=sid)
        text = question if sid == 0 else context
        out.append((SIDES[sid], text[s:e], s, e, a, b))
    return out


def span_record(question, context, plan: _Plan, part, scores, method, objective, f_x, f_b, delta, n_steps,
                tolerance, baseline, word_scores=None) -> SpanAttribution:
    e = plan.enc.encodings[plan.w]
    scores = np.asarray(scores, dtype=np.float32).copy()
    scores.flags.writeable = False
    words = tuple(SideWord(side, text, s, t, float(scores[a:b].sum()) if word_scores is None
                           else float(word_scores[k]), (a, b))
                  for k, (side, text, s, t, a, b) in enumerate(side_words(e, question, context)))
    target = SpanTarget(plan.kind, part, plan.text, plan.start, plan.end, plan.first, plan.last, plan.p_start,
                        plan.p_end)
    return SpanAttribution(question=question, context=context, target=target, objective=objective, method=method,
                           tokens=tuple(e.tokens), sides=tuple(None if s is None else SIDES[s]
                                                               for s in e.sequence_ids),
                           offsets=tuple(tuple(o) for o in e.offsets), scores=scores, words=words,
                           f_x=float(f_x), f_baseline=float(f_b), delta=None if delta is None else float(delta),
                           n_steps=n_steps, tolerance=tolerance, baseline=baseline, window=plan.w,
                           windows=len(plan.enc.encodings))


def explain_answer(lm: LoadedModel, question: str, context: str, span: tuple[int, int] | str | None = None, *,
                   part: str | Sequence[str] = "span", target: str = "logprob", baseline: str = "pad",
                   n_steps: int | None = None, tolerance: float | None = None, max_answer_len: int = 30,
                   stride: int | None = None) -> list[SpanAttribution]:
    """Integrated Gradients of a question answering model's answer: one record per ``part`` ("span": log p(start)
    + log p(end), "start", "end"; a list: several, in one batched computation), in order. See the module's
    docstring for the target and why.

    ``span``: None (the predicted answer, ``answer``'s best span), ``"no-answer"`` (the first position's start
    and end, SQuAD 2.0), or (start, end) characters of the context (the tokens overlapping them; refused unless
    they are tokens of the context within ``max_answer_len`` tokens). ``target``: "logprob" or "prob" (its
    exponent, the span's score p(start) x p(end)). ``baseline``: "pad", "mask", "unk" or "zero". Steps as
    ``attribute``'s: ``tolerance`` (adaptive until the relative delta is within it), else ``n_steps`` fixed
    Gauss-Legendre steps, else adaptive at the default tolerance. ``stride``: ``answer``'s. A model of another
    head, an empty question or context, a bad span or option: InputError saying what to send."""
    n_steps, tolerance = steps_mode(n_steps, tolerance)
    check_args(baseline, n_steps, "prob", tolerance, max_n_steps=lm.settings.max_n_steps)
    question, context, parts, plan = prepare_span(lm, question, context, span, part, target, baseline,
                                                  max_answer_len, stride)
    with lm.run_lock:
        engine = SpanEngine.for_parts(lm, plan, parts, target, baseline, question, context)
        results = engine.integrated_gradients(n_steps, tolerance)
    return [span_record(question, context, plan, p, a.scores, "integrated_gradients", target, a.f_x, a.f_baseline,
                    a.delta, a.n_steps, a.tolerance, baseline) for p, a in zip(parts, results)]


def occlude_answer(lm: LoadedModel, question: str, context: str, span: tuple[int, int] | str | None = None, *,
                   part: str | Sequence[str] = "span", target: str = "logprob", baseline: str = "pad",
                   max_answer_len: int = 30, stride: int | None = None,
                   batch_size: int = 64) -> list[SpanAttribution]:
    """Occlusion of the same targets as ``explain_answer`` (same arguments): a token's score is F(x) minus F with
    its word vector replaced by the baseline's, a word's is F(x) minus F with all of its tokens replaced. One row
    per variant of batched forward passes, read by every part. No completeness (``delta`` None); ``f_baseline``
    is F with every question and context token replaced."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a whole number of at least 1, got {batch_size!r}.")
    question, context, parts, plan = prepare_span(lm, question, context, span, part, target, baseline,
                                                  max_answer_len, stride)
    e = plan.enc.encodings[plan.w]
    positions = [i for i, s in enumerate(e.sequence_ids) if s is not None]
    words = side_words(e, question, context)
    variants = [[], positions] + [[p] for p in positions] + [list(range(a, b)) for *_, a, b in words]
    with lm.run_lock:
        engine = SpanEngine.for_parts(lm, plan, parts, target, baseline, question, context)
        f = variant_values(engine, variants, batch_size)  # (V, K): one column per part
    n = len(positions)
    out = []
    for j, p in enumerate(parts):
        scores = np.zeros(len(e.ids), dtype=np.float32)
        scores[positions] = f[0, j] - f[2 : 2 + n, j]
        out.append(span_record(question, context, plan, p, scores, "occlusion", target, f[0, j], f[1, j], None, None,
                           None, baseline, word_scores=f[0, j] - f[2 + n :, j]))
    return out
