"""Integrated Gradients along the [CLS] path, with the numbers that say how far to trust them.

- ``attribute``: token attributions on the word embeddings: Integrated Gradients on the word
  vectors, batched forward/backward passes with ``torch.autograd.grad`` (the same integral and
  nodes as Captum's LayerIntegratedGradients on the word-embedding layer; the "zero" baseline
  starts from all-zero word vectors).
- ``cls_path``: the same attribution taken at the output of the embeddings and of every encoder
  layer (layers x tokens): how the evidence moves into the [CLS] position with depth.
- ``cls_lens``: class probabilities read from each layer's [CLS] state through the model's head
  (BERT: pooler and classifier).
Every family in ``families.py`` works the same way: its adapter names the word embeddings, the
layers and the head (the first position, [CLS] or <s>, is what every head reads).
Attributions always run in float32 (``LoadedModel.fp32_model``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from captum.attr import IntegratedGradients

from ..config import Settings
from ..errors import InputError, ResourceError
from ..models.encoding import check_texts, encode, encode_batch, token_info, whole_number
from ..models.families import family_of
from ..models.forward import ATTENTIONS, classifier_logits, logits_from_depth
from ..models.inference import probabilities
from ..models.registry import LoadedModel
from ..results import DEFAULT_TOLERANCE, Attribution, ClsLens, ClsPath, TokenInfo

__all__ = ["attribute", "attribute_many", "cls_path", "cls_lens", "steps_mode", "check_args", "speed_options",
           "baseline_ids", "baseline_jumps", "recommended_baseline", "usable_baselines", "AttributionEngine",
           "BASELINES", "OUTPUTS", "TOKEN_BUDGET", "GROUP_TEXTS", "group_size"]

BASELINES = ("pad", "mask", "unk", "zero")
OUTPUTS = ("prob", "logit")
# Tokens x steps per internal batch: keeps a 512-token explanation within ~2 GB on a CPU.
TOKEN_BUDGET = 4096
log = logging.getLogger(__name__)


def speed_options(lm: LoadedModel, attention: str | None = None,
                  cls_only_last_layer: bool | None = None) -> tuple[str, bool]:
    """The speed options of one attribution call, (attention, cls_only): its arguments, or the
    model's settings' ``ig_attention`` and ``cls_only_last_layer`` where they are None."""
    settings = lm.settings
    attention = settings.ig_attention if attention is None else attention
    if attention not in ATTENTIONS:
        raise InputError(f"attention must be one of {', '.join(ATTENTIONS)}, got {attention!r}.")
    return attention, settings.cls_only_last_layer if cls_only_last_layer is None else bool(cls_only_last_layer)


def steps_mode(n_steps: int | None = None, tolerance: float | None = None) -> tuple[int | None, float | None]:
    """The (n_steps, tolerance) one Integrated Gradients call runs with, from its arguments:
    ``tolerance`` given: adaptive steps for that relative delta (``n_steps`` is ignored);
    ``n_steps`` alone: exactly that many steps; neither: adaptive at ``DEFAULT_TOLERANCE``.
    Exactly one of the two returned values is None."""
    if tolerance is not None:
        return None, tolerance
    if n_steps is not None:
        return n_steps, None
    return None, DEFAULT_TOLERANCE


def check_args(baseline: str, n_steps: int | None, output: str, tolerance: float | None = None, *,
               max_n_steps: int = Settings.max_n_steps) -> None:
    """Refuse (InputError, saying what to use) a baseline not in BASELINES, an output not in OUTPUTS,
    a tolerance outside (0, 1), or fixed ``n_steps`` outside 2..``max_n_steps`` (callers with a model
    pass ``lm.settings.max_n_steps``). ``n_steps`` None with a tolerance: adaptive, nothing to check."""
    if tolerance is not None and (
        isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1
    ):
        raise InputError(f"tolerance must be a relative delta between 0 and 1 (e.g. 0.01), got {tolerance!r}.")
    if baseline not in BASELINES:
        raise InputError(f"Unknown baseline {baseline!r}: choose one of {', '.join(BASELINES)}.")
    if output not in OUTPUTS:
        raise InputError(f"Unknown output {output!r}: choose prob or logit.")
    if n_steps is None and tolerance is not None:  # adaptive: the steps are chosen, not given
        return
    limit = max_n_steps
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or not 2 <= n_steps <= limit:
        raise InputError(f"n_steps must be a whole number from 2 to {limit}, got {n_steps!r}.")


@dataclass
class _Setup:
    """Everything one attribution needs, computed once."""

    model: torch.nn.Module
    info: TokenInfo
    ids: torch.Tensor  # (1, T)
    base_ids: torch.Tensor  # (1, T)
    mask: torch.Tensor  # (1, T)
    types: torch.Tensor  # (1, T)
    target_idx: int
    f_x: float
    f_b: float
    internal_batch_size: int
    output: str
    lm: LoadedModel

    def head(self, logits: torch.Tensor) -> torch.Tensor:
        return _head(self.lm, self.output, logits)

    def forward_ids(self, input_ids, attention_mask, token_type_ids):
        return _forward_ids(self.model, self.lm, self.output, input_ids, attention_mask, token_type_ids)


def _head(lm: LoadedModel, output: str, logits: torch.Tensor) -> torch.Tensor:
    """logits (B, C) -> what is attributed (B, C): the logits, or the probabilities predict reports."""
    return logits if output == "logit" else probabilities(lm, logits)


def _forward_ids(model, lm: LoadedModel, output: str, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 token_type_ids: torch.Tensor) -> torch.Tensor:
    """Class outputs (B, C) for token ids (B, T) with one text's mask and token types (1, T),
    through the model's own forward (eager, every layer)."""
    n = input_ids.shape[0]
    logits = model(**family_of(model).inputs(
        input_ids=input_ids,
        attention_mask=attention_mask.expand(n, -1),
        token_type_ids=token_type_ids.expand(n, -1),
    )).logits  # (B, C)
    return _head(lm, output, logits)


def baseline_jumps(lm: LoadedModel, baseline: str) -> bool:
    """Does the straight path from ``baseline`` start with a jump? True where the model's depth-0
    embedding is LayerNorm(word vector) alone (DeBERTa-v3) and the baseline's word vector is zero
    (the "zero" baseline, or a [PAD] row kept at zero by ``padding_idx``): every point of the path
    but the first then gives the same embeddings, so Integrated Gradients from it need many more
    steps and measure that jump rather than the words. ``recommended_baseline`` avoids it."""
    model = lm.fp32_model()
    fam = family_of(model)
    if fam is None or not fam.scale_free_embeddings(model):
        return False
    if baseline == "zero":
        return True
    token_id = getattr(lm.tokenizer, f"{baseline}_token_id", None)
    if token_id is None:
        return False
    return not bool(fam.word_embeddings(model).weight[token_id].detach().abs().sum())


def recommended_baseline(lm: LoadedModel) -> str:
    """"pad", or the first of "mask" and "unk" whose path does not start with a jump
    (``baseline_jumps``) on models where [PAD]'s does."""
    for name in ("pad", "mask", "unk"):
        if getattr(lm.tokenizer, f"{name}_token_id", None) is not None and not baseline_jumps(lm, name):
            return name
    return "pad"


def baseline_token(baseline: str) -> str:
    """The token a baseline replaces every word with ("zero" starts from [PAD]'s ids, then zeroes their vectors)."""
    return "pad" if baseline == "zero" else baseline


def usable_baselines(lm: LoadedModel) -> tuple[str, ...]:
    """The ``BASELINES`` this model's tokenizer can build, in that order: those whose token it has
    (``baseline_ids`` refuses the others); a page offers only these."""
    return tuple(b for b in BASELINES if getattr(lm.tokenizer, f"{baseline_token(b)}_token_id", None) is not None)


def baseline_ids(lm: LoadedModel, input_ids: torch.Tensor, baseline: str) -> torch.Tensor:
    """Every token replaced by [PAD]/[MASK]/[UNK], keeping [CLS] and [SEP] where they are."""
    tok = lm.tokenizer
    name = baseline_token(baseline)
    token_id = getattr(tok, f"{name}_token_id")
    if token_id is None:
        raise InputError(f"This model's tokenizer has no [{name.upper()}] token: choose another baseline.")
    special = torch.tensor(
        tok.get_special_tokens_mask(input_ids[0].tolist(), already_has_special_tokens=True), dtype=torch.bool
    ).to(input_ids.device)  # (T,)
    out = input_ids.clone()  # (1, T)
    out[0, ~special] = token_id
    return out


def _setup(lm: LoadedModel, text, pair, target, baseline: str, n_steps: int, output: str) -> _Setup:
    """One text with a token baseline (pad/mask/unk), for ``cls_path``: it has no "zero" baseline."""
    check_args(baseline, n_steps, output, max_n_steps=lm.settings.max_n_steps)
    model = lm.fp32_model()
    inputs, info = encode(lm, text, pair)
    ids = inputs["input_ids"]  # (1, T)
    mask = inputs["attention_mask"]  # (1, T)
    types = inputs.get("token_type_ids", torch.zeros_like(ids))  # (1, T)
    base_ids = baseline_ids(lm, ids, baseline)  # (1, T)
    target_idx = lm.label_index(target)
    s = _Setup(model, info, ids, base_ids, mask, types, -1, 0.0, 0.0,
               max(1, min(n_steps, TOKEN_BUDGET // ids.shape[1])), output, lm)
    with torch.no_grad():
        both = s.forward_ids(torch.cat([ids, base_ids]), mask, types)  # (2, C)
    s.target_idx = int(both[0].argmax()) if target_idx is None else target_idx
    s.f_x, s.f_b = float(both[0, s.target_idx]), float(both[1, s.target_idx])
    return s


def attribute(
    lm: LoadedModel,
    text: str,
    target: str | int | None = None,
    baseline: str = "pad",
    n_steps: int | None = None,
    pair: str | None = None,
    output: str = "prob",
    tolerance: float | None = None,
    *,
    attention: str | None = None,
    cls_only_last_layer: bool | None = None,
) -> Attribution:
    """Signed per-token attribution of class ``target`` (default: the predicted class).

    ``scores.sum() + delta == f(x) - f(baseline)`` where f is the class probability
    (``output="prob"``) or logit, and ``delta`` is the convergence delta (Captum's definition).

    Steps (``steps_mode``): by default as many as it takes for ``relative_delta <= DEFAULT_TOLERANCE``
    (0.05, what the page does); ``tolerance=t``: as many as it takes for t; ``n_steps=n`` alone:
    exactly n Gauss-Legendre points on [0, 1] (``n_steps=50``: the fixed 50 steps of Captum's
    default). The result's ``tolerance`` and ``n_steps`` say which was used.

    ``tolerance``: a guaranteed relative delta, at the fewest gradient evaluations we
    can manage. The straight path is split into segments; each segment gets its own
    Gauss-Lobatto rule, whose nodes include the segment's ends, so the pass that computes the
    gradients also gives f at the ends and every segment's own convergence error is known exactly
    (no separate forward passes). Segments with the largest errors are halved
    until ``relative_delta <= tolerance`` (or ``|delta| <= 1e-6``). Only if the settings'
    ``max_n_steps`` gradient evaluations are spent first is a looser result returned (its
    ``relative_delta`` says so, and a warning is logged). ``n_steps`` is then ignored, and the
    result's ``n_steps`` is the number of gradient evaluations actually used.

    Speed options, for this call only (None: the settings' ``ig_attention`` and
    ``cls_only_last_layer``): ``attention`` "sdpa" or "eager" for the IG passes, and
    ``cls_only_last_layer``. They change the scores by float rounding at most, and never the shared model.
    """
    n_steps, tolerance = steps_mode(n_steps, tolerance)
    attention, cls_only = speed_options(lm, attention, cls_only_last_layer)
    key = ("attribute", text, pair, target, baseline, n_steps, output, tolerance,
           lm.settings.max_n_steps if tolerance is not None else None, attention, cls_only)
    return lm.memo(key, lambda: attribute_many(lm, [text], target=target, baseline=baseline, n_steps=n_steps,
                                               pairs=None if pair is None else [pair], output=output,
                                               tolerance=tolerance, attention=attention,
                                               cls_only_last_layer=cls_only)[0])


def attribute_many(
    lm: LoadedModel,
    texts: list[str],
    target: str | int | None = None,
    baseline: str = "pad",
    n_steps: int | None = None,
    pairs: list[str | None] | None = None,
    output: str = "prob",
    tolerance: float | None = None,
    *,
    attention: str | None = None,
    cls_only_last_layer: bool | None = None,
    group: int | None = None,
) -> list[Attribution]:
    """``attribute`` for many texts at once, in input order: up to ``group`` texts of similar length share
    their forward/backward passes (None: ``group_size(lm)``); the same attributions as one call per text, up
    to float rounding. ``target`` applies to every text (None: each text's predicted class). Steps
    (``n_steps``, ``tolerance``; default: adaptive at ``DEFAULT_TOLERANCE``), ``attention`` and
    ``cls_only_last_layer`` as for ``attribute``."""
    group = group_size(lm) if group is None else whole_number(group, "group", 1)
    n_steps, tolerance = steps_mode(n_steps, tolerance)
    check_args(baseline, n_steps, output, tolerance, max_n_steps=lm.settings.max_n_steps)
    attention, cls_only = speed_options(lm, attention, cls_only_last_layer)
    texts, pairs = check_texts(texts, pairs, optional_pairs=True, max_chars=lm.settings.max_chars,
                               max_batch_texts=lm.settings.max_batch_texts)
    items = list(zip(texts, pairs or [None] * len(texts)))
    target_idx = lm.label_index(target)
    results: list[Attribution | None] = [None] * len(items)
    with lm.run_lock:
        # Texts with and without a second text never share a batch (their encodings differ).
        order = sorted(range(len(items)),
                       key=lambda i: (items[i][1] is not None, len(items[i][0]) + len(items[i][1] or "")))
        groups: list[list[int]] = []
        for i in order:
            if (not groups or len(groups[-1]) == group
                    or (items[groups[-1][0]][1] is None) != (items[i][1] is None)):
                groups.append([])
            groups[-1].append(i)
        for idx in groups:
            engine = AttributionEngine(lm, [items[i] for i in idx], baseline, output, target_idx,
                                       attention=attention, cls_only=cls_only)
            for i, res in zip(idx, engine.integrated_gradients(n_steps, tolerance)):
                results[i] = res
    return results  # type: ignore[return-value]


# Texts explained together on an accelerator (sorted by length, so they pad little); the internal batches
# are still capped by TOKEN_BUDGET.
GROUP_TEXTS = 8


def group_size(lm: LoadedModel) -> int:
    """Texts ``attribute_many`` explains together by default: ``GROUP_TEXTS`` on an accelerator, where a
    batch runs its rows in parallel (an H200: groups of 8 took 0.34x as long as one text at a time, 16 0.31x
    with their passes then split by ``TOKEN_BUDGET``), and 1 on the CPU, where a group padded to its longest text
    and refined in shared rounds took 1.24x as long as one text at a time (bench/ig_groups.py: 160 reviews, the
    default model's architecture, 2 threads; groups of 4: 1.06x)."""
    return 1 if lm.device.type == "cpu" else GROUP_TEXTS


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
        return _head(self.lm, self.output, logits)

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
        return _forward_ids(self.model, self.lm, self.output, input_ids, attention_mask, token_type_ids)

    def gradients(self, points: list[tuple[int, float]]) -> tuple[list[float], np.ndarray]:
        """f and the per-token gradient x (x - b) (N, T) at the path points (text row r, alpha):
        batched forward/backward passes of at most TOKEN_BUDGET tokens, halved on out-of-memory.
        A text without a target takes the argmax at its alpha = 1 point, which must come before
        its other points."""
        batch = max(1, min(len(points), TOKEN_BUDGET // self.ids.shape[1]))
        return _halving_on_oom(lambda b: self.gradient_pass(points, b), batch)

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


def cls_path(
    lm: LoadedModel,
    text: str,
    target: str | int | None = None,
    baseline: str = "pad",
    n_steps: int = 20,
    pair: str | None = None,
    output: str = "prob",
    *,
    cls_only_last_layer: bool | None = None,
) -> ClsPath:
    """Layer Integrated Gradients at the embedding output and every encoder layer's output.

    Row l, column t: how much the hidden state of token t after depth l contributes to the
    target class. At the last layer only [CLS] can contribute (the head reads [CLS] alone),
    so the rows show evidence flowing from the word positions into [CLS]. Each row is its own
    attribution from the same baseline, so each row sums to f(x) - f(baseline) - deltas[l].
    The "zero" baseline is taken as "pad" here (a zero vector has no defined deeper states).

    This is Layer IG computed as Captum IntegratedGradients on each depth's hidden state with a
    forward pass that runs only the layers above it: the same integral as LayerIntegratedGradients
    on that layer (a test checks they agree) at about half the layer passes, with no hooks.
    ``cls_only_last_layer`` (None: the settings') as for ``attribute``; the passes run eager.
    """
    _, cls_only = speed_options(lm, None, cls_only_last_layer)
    key = ("cls_path", text, pair, target, baseline, n_steps, output, cls_only)
    return lm.memo(key, lambda: _cls_path(lm, text, target, baseline, n_steps, pair, output, cls_only))


def _cls_path(lm: LoadedModel, text, target, baseline: str, n_steps: int, pair, output: str,
              cls_only: bool = True) -> ClsPath:
    path_baseline = "pad" if baseline == "zero" else baseline
    with lm.run_lock:
        s = _setup(lm, text, pair, target, path_baseline, n_steps, output)
        fam = family_of(s.model)
        n_layers = len(fam.layers(s.model))
        with torch.no_grad():
            kw = fam.inputs(input_ids=torch.cat([s.ids, s.base_ids]), attention_mask=s.mask.expand(2, -1),
                            token_type_ids=s.types.expand(2, -1), output_hidden_states=True)
            states = fam.base(s.model)(**kw).hidden_states  # L + 1 x (2, T, D)
        rows, deltas = [], []
        for depth in range(n_layers + 1):
            x, b = states[depth][:1], states[depth][1:]  # (1, T, D) input and baseline states at this depth
            ig = IntegratedGradients(_from_depth(s, depth, cls_only))
            attrs, delta = _ig_retrying(
                ig,
                x,
                s.internal_batch_size,
                baselines=b,
                target=s.target_idx,
                n_steps=int(n_steps),
                return_convergence_delta=True,
            )
            rows.append(attrs.sum(dim=-1)[0].detach().float().cpu().numpy())  # (T,)
            deltas.append(float(delta.reshape(-1)[0]))
    return ClsPath(
        info=s.info,
        layer_names=_layer_names(n_layers),
        scores=np.stack(rows),  # (L + 1, T)
        deltas=np.asarray(deltas, dtype=np.float32),
        target=lm.labels[s.target_idx],
        f_x=s.f_x,
        f_baseline=s.f_b,
        n_steps=int(n_steps),
        baseline=path_baseline,
    )


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc).lower()
    said = "out of memory" in text or "can't allocate memory" in text or "not enough memory" in text
    return isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and said)


def _halving_on_oom(run, batch: int):
    """``run(batch)``, halving the batch on out-of-memory and trying again; at a batch of one it
    gives up with a ResourceError (a clear message) instead of taking the server down."""
    batch = max(1, int(batch))
    while True:
        try:
            return run(batch)
        except (RuntimeError, MemoryError) as exc:
            if not _is_oom(exc):
                raise
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if batch == 1:
                raise ResourceError(
                    "Out of memory while computing attributions, even one step at a time: shorten the text "
                    "or lower n_steps."
                ) from exc
            log.warning("attribution ran out of memory with internal batch %d; retrying with %d", batch, batch // 2)
            batch //= 2


def _ig_retrying(ig, inputs, internal_batch_size: int, **kwargs):
    """``ig.attribute`` with ``_halving_on_oom`` on its internal batch."""
    return _halving_on_oom(lambda b: ig.attribute(inputs, internal_batch_size=b, **kwargs), internal_batch_size)


def _from_depth(s: _Setup, depth: int, cls_only: bool = True):
    """f(hidden state after ``depth``) -> class outputs: the encoder layers above, pooler, classifier
    (the last layer for [CLS] alone with ``cls_only``). One unpadded sequence, so no attention mask
    is needed."""

    def forward(hidden):  # (B, T, D)
        return s.head(logits_from_depth(s.model, hidden, depth, attention="eager", cls_only=cls_only))  # (B, C)

    return forward


def _layer_names(n_layers: int) -> tuple[str, ...]:
    return ("embeddings", *(f"layer {i}" for i in range(1, n_layers + 1)))


def cls_lens(lm: LoadedModel, text: str, pair: str | None = None) -> ClsLens:
    """Class probabilities from each depth's [CLS] hidden state through the model's head (BERT:
    pooler + classifier; other families: their own head, see ``families.py``)."""
    inputs, _ = encode(lm, text, pair)
    model = lm.model
    fam = family_of(model)
    with lm.run_lock, torch.inference_mode():
        out = fam.base(model)(**fam.inputs(**inputs), output_hidden_states=True)
        cls = torch.stack([h[0, :1] for h in out.hidden_states])  # (L + 1, 1, D): position 0 at each depth
        logits = lm.head.logits(fam, model, cls)  # (L + 1, C), e.g. BERT: classifier(tanh(W h + b))
        probs = lm.head.decode(logits, multi_label=lm.multi_label)  # the model's own softmax, uncalibrated
    return ClsLens(layer_names=_layer_names(len(out.hidden_states) - 1), labels=lm.labels, probs=probs.cpu().numpy())
