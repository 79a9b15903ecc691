"""The engine every attribution method of the class head shares (``AttributionEngine``): texts encoded together,
their word vectors and baselines, batched forward/backward passes of the [CLS] path, and Integrated Gradients at a
fixed number of Gauss-Legendre steps or adaptive to a tolerance on Gauss-Lobatto segments (the rules and the first
mesh below). ``attribution.attribute`` and ``attribute_many`` run it; the other methods (``methods``), long
documents and the token and span heads build on it."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from ..errors import InputError
from ..models.encoding import check_texts, encode_batch, token_info
from ..models.families import family_of
from ..models.forward import classifier_logits
from ..models.registry import LoadedModel
from ..results import Attribution, TokenInfo
from .attribution_options import (
    TOKEN_BUDGET,
    baseline_ids,
    check_args,
    forward_ids,
    halving_on_oom,
    speed_options,
    target_output,
)

__all__ = ["AttributionEngine", "FIRST_SEGMENTS", "FIRST_STEPS", "SEGMENT_STEPS", "SPLIT_SHARE"]

log = logging.getLogger(__name__)


# Adaptive (tolerance) mode: the path is cut into segments, each integrated with its own
# Gauss-Lobatto rule (its nodes include the segment's ends, shared with the neighbours), so the pass
# that gives the gradients also gives f at every segment end (f(x), f(baseline), the breakpoints):
# one forward/backward call per round and no separate forward passes. The first round uses
# FIRST_SEGMENTS ((lo, hi, points) each); each refinement halves the worst segments, with a
# SEGMENT_STEPS-point rule on each half (2 * SEGMENT_STEPS - 3 new evaluations per split).
# The first mesh is shorter near the baseline because that is where the path bends most: on 60
# held-out reviews (each text's path function sampled at 65 Chebyshev points, rules compared
# offline at tolerance 0.05) the error of two 7-point halves sat almost all in [0, 0.5] (mean
# relative error 0.067 there, 0.0008 on [0.5, 1]). Three 5-point segments [0, 0.3], [0.3, 0.5],
# [0.5, 1] (13 evaluations, as two 7-point halves) then 5-point halves (7 evaluations a split) needed
# 14.1 evaluations per text on those reviews against 16.3, and 13.7 against 14.7 on 60 other
# reviews that played no part in the choice.
FIRST_SEGMENTS = ((0.0, 0.3, 5), (0.3, 0.5, 5), (0.5, 1.0, 5))
SEGMENT_STEPS = 5
# A refinement halves the worst segments until what is left unsplit carries at most this share
# of the tolerance: fewer rounds (each is a forward/backward call) for a few more evaluations.
SPLIT_SHARE = 0.5


def _gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the n-point Gauss-Legendre rule on [0, 1] (Captum's "gausslegendre")."""
    x, w = np.polynomial.legendre.leggauss(n)
    return 0.5 * (x + 1), 0.5 * w


def _gauss_lobatto(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the n-point Gauss-Lobatto rule on [0, 1]: the ends (exactly 0.0 and 1.0)
    and the roots of P'_{n-1}; exact for polynomials of degree 2n - 3."""
    c = np.zeros(n)
    c[-1] = 1.0  # P_{n-1}
    inner = np.sort(np.polynomial.legendre.legroots(np.polynomial.legendre.legder(c)))
    x = np.concatenate([[-1.0], inner, [1.0]])
    w = 2.0 / (n * (n - 1) * np.polynomial.legendre.legval(x, c) ** 2)
    nodes = 0.5 * (x + 1)
    nodes[0], nodes[-1] = 0.0, 1.0
    return nodes, 0.5 * w


_LOBATTO = {n: _gauss_lobatto(n) for n in {SEGMENT_STEPS, *(n for _, _, n in FIRST_SEGMENTS)}}
# Gradient evaluations of the first round: every segment's points, shared ends counted once.
FIRST_STEPS = sum(n - 1 for _, _, n in FIRST_SEGMENTS) + 1


def _nodes(lo: float, hi: float, n: int) -> list[float]:
    """The n Gauss-Lobatto nodes of [lo, hi], ends exactly lo and hi (the keys a text's nodes are stored by)."""
    inner = _LOBATTO[n][0][1:-1]
    return [lo] + [float(lo + (hi - lo) * a) for a in inner] + [hi]


class _Segment:
    __slots__ = ("lo", "hi", "f_lo", "f_hi", "scores", "err")

    def __init__(self, lo: float, hi: float, f_lo: float, f_hi: float):
        self.lo, self.hi, self.f_lo, self.f_hi = lo, hi, f_lo, f_hi
        self.scores: np.ndarray | None = None  # (T,) attribution of this piece of the path
        self.err = 0.0  # scores.sum() - (f_hi - f_lo): this segment's share of the convergence delta


class AttributionEngine:
    """The shared batched forward/gradient engine of every attribution method.

    Several texts (``items``: (text, pair or None) each; all with a pair or none) of similar length
    are encoded together and padded to one length; the engine holds, per text row r, its word
    vectors ``emb[r]`` (G, T, D), the baseline's ``base[r]`` (the word vectors of [PAD]/[MASK]/[UNK],
    or zero vectors for the "zero" baseline; special tokens keep theirs) and ``diff = emb - base``,
    with ``ids``, ``base_ids``, ``mask`` and ``types`` (G, T) and the ``infos`` (TokenInfo) of each.
    Every method explains the same f: the target's probability (``output="prob"``) or logit of the
    composed [CLS] path (``forward.classifier_logits``: the family adapter's word embeddings,
    layers and head), run in float32 with this call's ``attention`` and ``cls_only`` (None: the
    model's settings, ``speed_options``).

    - ``forward(embeds, rows)``: f for any word vectors of the given text rows, one batched pass.
    - ``forward_ids(input_ids, attention_mask, token_type_ids)``: f for token ids (what Captum's
      Layer* methods hook into).
    - ``gradients(points)``: f and the per-token gradient x (x - b) at path points (r, alpha),
      in batched forward/backward passes of at most TOKEN_BUDGET tokens (``gradient_pass``),
      halved on out-of-memory.
    - ``evaluate_ends()``: f(x), f(baseline) and the target of every text (one forward).
    - ``integrated_gradients(n_steps, tolerance)``: one ``Attribution`` per text.

    ``targets[r]`` is the class explained for text r (``target_idx``, or its argmax at alpha = 1);
    ``f_x`` and ``f_b`` are filled by ``evaluate_ends`` or by the adaptive rule's first pass.

    Integrated Gradients of text r is the path integral of grad f(b + a (x - b)) . (x - b) over
    a in [0, 1], per token. Every quadrature node (r, a) is one row of one batched
    forward/backward pass (``torch.autograd.grad`` on the word vectors); a rule's
    attribution is its weighted sum of the nodes' per-token gradient x (x - b). Fixed steps:
    Captum's Gauss-Legendre rule on [0, 1] (the same nodes and weights as its IntegratedGradients).
    Adaptive: Gauss-Lobatto segments, whose ends are nodes, so f at the ends comes from the same
    pass (no ``evaluate_ends`` needed)."""

    def __init__(self, lm: LoadedModel, items: Sequence[tuple[str, str | None]], baseline: str = "pad",
                 output: str = "prob", target_idx: int | None = None, *, attention: str | None = None,
                 cls_only: bool | None = None):
        texts, pairs = [t for t, _ in items], [p for _, p in items]
        enc = encode_batch(lm, texts, pairs if pairs[0] is not None else None)  # all or none have a pair
        infos = [token_info(enc, r, t, p) for r, (t, p) in enumerate(items)]
        self._build(lm, infos, enc["input_ids"], enc["attention_mask"],
                    enc.get("token_type_ids", torch.zeros_like(enc["input_ids"])), baseline, output, target_idx,
                    attention, cls_only)

    @classmethod
    def for_tokens(cls, lm: LoadedModel, input_ids: Sequence[int], token_type_ids: Sequence[int] | None,
                   info: TokenInfo, target: str | int | None = None, baseline: str = "pad", output: str = "prob", *,
                   attention: str | None = None, cls_only: bool | None = None,
                   evaluate: bool = True) -> AttributionEngine:
        """One input given as its token ids (specials included, unpadded; ``info`` describes the
        same tokens), not as text: e.g. one window of a long document (``long_documents``), whose ids
        the tokenizer made from the whole text and which re-tokenizing its characters would not give
        back. f(x), f(baseline) and the target are evaluated unless ``evaluate`` is False."""
        check_args(baseline, 2, output)
        if len(input_ids) != len(info.tokens) or not 0 < len(input_ids) <= lm.max_length:
            raise InputError(f"{len(input_ids)} token ids for {len(info.tokens)} tokens (at most {lm.max_length}).")
        ids = torch.tensor([list(input_ids)], dtype=torch.long)  # (1, T)
        types = torch.zeros_like(ids) if token_type_ids is None else torch.tensor([list(token_type_ids)])  # (1, T)
        engine = cls.__new__(cls)
        engine._build(lm, [info], ids, torch.ones_like(ids), types, baseline, output, lm.label_index(target),
                      attention, cls_only)
        if evaluate:
            engine.evaluate_ends()
        return engine

    def _build(self, lm: LoadedModel, infos: list[TokenInfo], ids: torch.Tensor, mask: torch.Tensor,
               types: torch.Tensor, baseline: str, output: str, target_idx: int | None, attention: str | None,
               cls_only: bool | None) -> None:
        """Everything but the tokenizing: the rows' ids, mask and token types (G, T) -> word vectors."""
        self.lm, self.baseline, self.output = lm, baseline, output
        self.attention, self.cls_only = speed_options(lm, attention, cls_only)
        self.model = model = lm.fp32_model()
        device = next(model.parameters()).device
        self.infos = infos
        self.ids = ids.to(device)  # (G, T)
        self.mask = mask.to(device)  # (G, T)
        self.types = types.to(device)  # (G, T)
        self.base_ids = torch.cat([baseline_ids(lm, self.ids[r : r + 1], baseline)
                                   for r in range(len(infos))])  # (G, T)
        words = family_of(model).word_embeddings(model)  # the (V, E) lookup IG varies
        g = len(infos)
        self.targets: list[int | None] = [target_idx] * g
        self.f_x: list[float] = []
        self.f_b: list[float] = []
        with torch.no_grad():
            self.emb = words(self.ids)  # (G, T, D)
            if baseline == "zero":
                keep = (self.base_ids == self.ids).unsqueeze(-1)  # (G, T, 1): specials keep their vectors
                self.base = self.emb * keep  # zero vectors except [CLS]/[SEP]/[PAD]
            else:
                self.base = words(self.base_ids)  # (G, T, D)
            self.diff = self.emb - self.base  # (G, T, D)

    @classmethod
    def for_text(cls, lm: LoadedModel, text: str, pair: str | None = None, target: str | int | None = None,
                 baseline: str = "pad", output: str = "prob", *, attention: str | None = None,
                 cls_only: bool | None = None, evaluate: bool = True) -> AttributionEngine:
        """One text, checked (its length against ``lm.settings.max_chars``, the baseline, output
        and target), with f(x), f(baseline) and the target evaluated (``evaluate_ends``) unless
        ``evaluate`` is False."""
        check_args(baseline, 2, output)
        texts, pairs = check_texts([text], None if pair is None else [pair], optional_pairs=True,
                                   max_chars=lm.settings.max_chars, max_batch_texts=lm.settings.max_batch_texts)
        engine = cls(lm, [(texts[0], pairs[0] if pairs else None)], baseline, output, lm.label_index(target),
                     attention=attention, cls_only=cls_only)
        if evaluate:
            engine.evaluate_ends()
        return engine

    def __len__(self) -> int:
        return len(self.infos)

    def evaluate_ends(self) -> None:
        """f(x) and f(baseline) of every text, and its target where none was given (the argmax at x):
        one forward pass of 2G rows."""
        g = len(self)
        with torch.no_grad():
            out = self.forward(torch.cat([self.emb, self.base]), torch.arange(2 * g) % g)  # (2G, C)
        self.targets = [int(out[r].argmax()) if t is None else t for r, t in enumerate(self.targets)]
        self.f_x = [float(out[r, self.targets[r]]) for r in range(g)]
        self.f_b = [float(out[g + r, self.targets[r]]) for r in range(g)]

    def head(self, logits: torch.Tensor) -> torch.Tensor:
        """logits (B, C) -> what is attributed (B, C): the logits, or the probabilities predict reports."""
        return target_output(self.lm, self.output, logits)

    def forward(self, embeds: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Class outputs (R, C) for word vectors (R, T, D) of texts ``rows`` (R,)."""
        logits = classifier_logits(self.model, inputs_embeds=embeds, attention_mask=self.mask[rows],
                                   token_type_ids=self.types[rows], attention=self.attention,
                                   cls_only=self.cls_only)  # (R, C)
        return self.head(logits)  # (R, C)

    def forward_ids(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
        """Class outputs (B, C) for token ids (B, T) with one text's mask and token types (1, T),
        through the model's own forward (eager, every layer): the f Captum's Layer* methods see."""
        return forward_ids(self.model, self.lm, self.output, input_ids, attention_mask, token_type_ids)

    def gradients(self, points: list[tuple[int, float]]) -> tuple[list[float], np.ndarray]:
        """f and the per-token gradient x (x - b) (N, T) at the path points (text row r, alpha):
        batched forward/backward passes of at most TOKEN_BUDGET tokens, halved on out-of-memory.
        A text without a target takes the argmax at its alpha = 1 point, which must come before
        its other points."""
        batch = max(1, min(len(points), TOKEN_BUDGET // self.ids.shape[1]))
        return halving_on_oom(lambda b: self.gradient_pass(points, b), batch)

    def gradient_pass(self, points: list[tuple[int, float]], batch: int) -> tuple[list[float], np.ndarray]:
        """``gradients`` in chunks of exactly ``batch`` points (no retry on out-of-memory)."""
        f: list[float] = []
        grads: list[np.ndarray] = []
        device = self.ids.device
        for s in range(0, len(points), batch):
            chunk = points[s : s + batch]
            rows = torch.tensor([r for r, _ in chunk], device=device)  # (R,)
            alpha = torch.tensor([a for _, a in chunk], dtype=self.diff.dtype,
                                 device=device).view(-1, 1, 1)  # (R, 1, 1)
            with torch.enable_grad():
                x = (self.base[rows] + alpha * self.diff[rows]).requires_grad_()  # (R, T, D)
                out = self.forward(x, rows)  # (R, C)
                for k, (r, a) in enumerate(chunk):
                    if self.targets[r] is None and a == 1.0:
                        self.targets[r] = int(out[k].argmax())
                target = torch.tensor([self.targets[r] for r, _ in chunk], device=device)  # (R,)
                picked = out.gather(1, target.view(-1, 1)).squeeze(1)  # (R,)
                (grad,) = torch.autograd.grad(picked.sum(), x)  # (R, T, D)
            f += picked.detach().float().cpu().tolist()
            grads.append((grad * self.diff[rows]).sum(dim=-1).float().cpu().numpy())  # (R, T)
        return f, np.concatenate(grads)  # (N,), (N, T)

    def integrated_gradients(self, n_steps: int | None, tolerance: float | None) -> list[Attribution]:
        """Integrated Gradients of every text, in row order: ``tolerance`` None: exactly ``n_steps``
        Gauss-Legendre nodes; otherwise adaptive Gauss-Lobatto segments until the relative delta is
        within ``tolerance`` (or the settings' max_n_steps gradient evaluations are spent)."""
        g = len(self)
        if tolerance is None:
            if len(self.f_x) != g:
                self.evaluate_ends()
            nodes, weights = _gauss_legendre(int(n_steps))
            _, grads = self.gradients([(r, float(a)) for r in range(g) for a in nodes])
            grads = grads.reshape(g, len(nodes), -1)  # (G, n, T)
            segs = []
            for r in range(g):
                seg = _Segment(0.0, 1.0, self.f_b[r], self.f_x[r])
                seg.scores = np.einsum("n,nt->t", weights, grads[r])  # (T,)
                seg.err = float(seg.scores.sum()) - (seg.f_hi - seg.f_lo)
                segs.append([seg])
            used = [int(n_steps)] * g
        else:
            segs, used = self._adaptive(tolerance)
        return [self._result(r, segs[r], used[r], tolerance) for r in range(g)]

    def _adaptive(self, tolerance: float) -> tuple[list[list[_Segment]], list[int]]:
        """Gauss-Lobatto segments, the worst halved until every text's relative delta is within
        ``tolerance`` (or the settings' max_n_steps is spent)."""
        g = len(self.infos)
        # Every text's nodes: f and gradient x (x - b) per alpha; alpha = 1 first (it sets the target).
        self._nodes: list[dict[float, tuple[float, np.ndarray]]] = [{} for _ in range(g)]
        first = [1.0] + sorted({a for lo, hi, n in FIRST_SEGMENTS for a in _nodes(lo, hi, n)} - {1.0})
        self._evaluate([(r, a) for r in range(g) for a in first])
        self.f_x = [self._nodes[r][1.0][0] for r in range(g)]
        self.f_b = [self._nodes[r][0.0][0] for r in range(g)]
        segs = [[self._segment(r, lo, hi, n) for lo, hi, n in FIRST_SEGMENTS] for r in range(g)]
        used = [len(first)] * g
        per_split = 2 * (SEGMENT_STEPS - 2) + 1
        limit = self.lm.settings.max_n_steps
        given_up: set[int] = set()
        while True:
            splits: list[tuple[int, _Segment]] = []
            for r, pieces in enumerate(segs):
                if r in given_up:
                    continue
                gap = abs(self.f_x[r] - self.f_b[r])
                allowed = max(tolerance * gap, 1e-6)
                if abs(sum(p.err for p in pieces)) <= allowed:
                    continue
                rest = sum(abs(p.err) for p in pieces)
                for p in sorted(pieces, key=lambda p: -abs(p.err)):
                    if rest <= SPLIT_SHARE * allowed or used[r] + per_split > limit:
                        break
                    splits.append((r, p))
                    used[r] += per_split
                    rest -= abs(p.err)
                if not any(r == rr for rr, _ in splits):
                    given_up.add(r)
                    log.warning("attribute: relative delta %.3g > tolerance %g after %d gradient evaluations "
                                "(max_n_steps=%d)", abs(sum(p.err for p in pieces)) / max(gap, 1e-12), tolerance,
                                used[r], limit)
            if not splits:
                return segs, used
            todo = []
            for r, p in splits:
                m = (p.lo + p.hi) / 2
                todo += [(r, a) for a in _nodes(p.lo, m, SEGMENT_STEPS)[1:] + _nodes(m, p.hi, SEGMENT_STEPS)[1:-1]]
            self._evaluate(todo)
            for r, p in splits:
                m = (p.lo + p.hi) / 2
                segs[r].remove(p)
                segs[r] += [self._segment(r, p.lo, m, SEGMENT_STEPS), self._segment(r, m, p.hi, SEGMENT_STEPS)]

    def _evaluate(self, points: list[tuple[int, float]]) -> None:
        f, grads = self.gradients(points)
        for (r, a), fa, ga in zip(points, f, grads):
            self._nodes[r][a] = (fa, ga)

    def _segment(self, r: int, lo: float, hi: float, n: int) -> _Segment:
        """The n-point Gauss-Lobatto rule on [lo, hi] of text r, from its evaluated nodes."""
        weights = _LOBATTO[n][1]
        known = self._nodes[r]
        seg = _Segment(lo, hi, known[lo][0], known[hi][0])
        at = _nodes(lo, hi, n)
        seg.scores = (hi - lo) * np.einsum("n,nt->t", weights, np.stack([known[a][1] for a in at]))  # (T,)
        seg.err = float(seg.scores.sum()) - (seg.f_hi - seg.f_lo)
        return seg

    def _result(self, r: int, pieces: list[_Segment], used: int, tolerance: float | None) -> Attribution:
        info = self.infos[r]
        scores = np.sum([p.scores for p in pieces], axis=0)[: len(info.tokens)]  # (T,)
        return Attribution(
            info=info,
            scores=scores.astype(np.float32),
            target=self.lm.labels[self.targets[r]],
            target_index=self.targets[r],
            output=self.output,
            f_x=self.f_x[r],
            f_baseline=self.f_b[r],
            delta=float(sum(p.err for p in pieces)),
            n_steps=int(used),
            baseline=self.baseline,
            tolerance=tolerance,
        )
