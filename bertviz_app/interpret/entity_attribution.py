"""Why a tagger tags what it tags: attributions for a token classification model's entities and tokens (issue 32).

``explain_entities(lm, text)`` explains a ``*ForTokenClassification`` model's entities in ``text`` (every one, or
those whose indices are given; ``token=`` adds single word-pieces) with Integrated Gradients on the word
embeddings, one ``EntityAttribution`` record per target, every target of the text in one batched computation.
``occlude_entities`` explains the same targets by occlusion (each word, and each piece, replaced by the baseline
token), one batched forward pass for all of them.

The target (the scalar explained). For an entity labelled X over the word-pieces P = p_1 .. p_n (the pieces whose
characters overlap the entity's):

    F(x) = sum over p in P of log softmax(logits(x)[p])[label(p)]

with label(p_1) = B-X and label(p_k) = I-X for the later pieces (IO tags: X at every piece; a label set with I-X
and no B-X: I-X at every piece). Why this one: the head predicts every piece independently given the input, so
that sum is the log-probability of the whole labelled span ("these pieces are one X entity") under the model's own
per-piece factorisation. One scalar then explains the entity as a whole, not piece by piece; it is a sum, so the
attributions of the entity are the sums of the attributions of its pieces' log-probabilities (IG is linear in
the target); and log-probabilities neither saturate near 1 as probabilities do (an entity tagged at 0.999 still
has a gradient) nor depend on an arbitrary logit offset as raw logits do. ``target="prob"`` explains exp(F), the
joint probability of the labelled span, instead.

For one token (``token=i``, an index into the tagging's ``tokens``: the word-pieces, special tokens left out): the
log-probability of its predicted label, or of ``label`` when given: "why is this word O" is the predicted "O" of
a piece outside every entity; ``label="B-PER"`` asks what speaks for or against that label there.

Integrated Gradients: the straight path from the baseline's word vectors (every piece replaced by [PAD], [MASK] or
[UNK], or zero vectors; special tokens keep theirs) to the text's, through the model's composed forward
(``forward.classifier_logits``, every position), with the classifier's engine (``ig_engine.AttributionEngine``):
its fixed Gauss-Legendre steps or adaptive Gauss-Lobatto segments refined until the relative convergence delta is
within ``tolerance``, its batching within a token budget. Completeness: the pieces' scores add up to
F(x) - F(baseline); ``delta`` = sum(scores) - (F(x) - F(baseline)) (Captum's sign) says how far the quadrature is
from it. Special tokens never move along the path, so they carry no score and are left out.

Batching: the engine's rows are the targets (each a copy of the same text with its own F), so all the
interpolation points of all the targets of a text stack into the same forward/backward passes: explaining ten
entities costs ten times the rows of one, in the same few passes, never ten calls.

Words: each word of the tokenizer (the tagging's ``words``, its ``word_ids()``) gets the sum of its pieces'
scores; a word repeated in the text is a word at each of its positions, never merged with its twin.

Long texts: the text is tagged as ``tag`` tags it (windows of ``lm.max_length`` tokens sharing ``stride``), and each
target is explained on the window where its pieces are most central (the most context on both sides), the window
the model read it in; pieces outside that window have no score (0) and the record says which window (``window``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from ..errors import InputError
from ..models.forward import classifier_logits
from ..models.heads import TOKEN_CLASSIFICATION
from ..models.inference import window_plan
from ..models.registry import LoadedModel
from ..models.tagging import OUTSIDE, Tagging, check_aggregation, default_stride, tag
from ..results import TokenInfo
from .attribution_options import check_args, steps_mode
from .ig_engine import AttributionEngine

__all__ = ["explain_entities", "occlude_entities", "EntityAttribution", "WordScore", "TARGETS", "Target",
           "entity_pieces", "piece_labels", "own_piece_labels", "variant_values", "LogitsTargetEngine", "TargetEngine",
           "prepare_targets", "entity_record", "with_word_scores", "window_words"]

TARGETS = ("logprob", "prob")


@dataclass(frozen=True)
class WordScore:
    """One word of the tokenizer and the sum of its pieces' scores."""

    word: str
    start: int
    end: int
    score: float
    pieces: tuple[int, int]  # [a, b) into the record's tokens

    def to_dict(self) -> dict:
        return {"word": self.word, "start": self.start, "end": self.end, "score": self.score,
                "pieces": list(self.pieces)}


@dataclass(frozen=True)
class Target:
    """What one record explains: an entity (``entity`` its index in the tagging) or one piece (``token``)."""

    kind: str  # "entity" or "token"
    text: str  # the entity's (or the piece's) characters: source[start:end]
    label: str  # the entity's label (no B-/I- prefix), or the label explained at the token
    start: int
    end: int
    pieces: tuple[int, int]  # [a, b): its word-pieces, indices into the tagging's tokens
    piece_labels: tuple[str, ...]  # the label whose log-probability is summed at each of its pieces
    entity: int | None = None
    token: int | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "index": self.entity if self.kind == "entity" else self.token, "text": self.text,
                "label": self.label, "start": self.start, "end": self.end, "pieces": list(self.pieces),
                "piece_labels": list(self.piece_labels)}


@dataclass(frozen=True, eq=False)
class EntityAttribution:
    """One target's attribution: a score per word-piece of the text (special tokens left out) and per word.
    Integrated Gradients: ``scores.sum() == f_x - f_baseline + delta``."""

    text: str
    target: Target
    objective: str  # "logprob" (F) or "prob" (exp F)
    method: str  # "integrated_gradients" or "occlusion"
    tokens: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]
    scores: np.ndarray  # (P,) float32, parallel to tokens (0 outside the window read)
    words: tuple[WordScore, ...]
    f_x: float
    f_baseline: float  # IG: F at the baseline; occlusion: F with every piece replaced by the baseline token
    delta: float | None  # IG's convergence delta; None for occlusion (no completeness)
    n_steps: int | None
    tolerance: float | None
    baseline: str
    window: int  # the window of the text it was explained on (0: the first, or the only one)

    @property
    def relative_delta(self) -> float | None:
        if self.delta is None:
            return None
        gap = abs(self.f_x - self.f_baseline)
        return float(abs(self.delta) / gap) if gap > 1e-12 else float("inf") if abs(self.delta) > 1e-12 else 0.0

    def to_dict(self) -> dict:
        """The JSON of ``bertviz-app explain TEXT --entity K --json``."""
        return {"text": self.text, "target": self.target.to_dict() | {"objective": self.objective},
                "method": self.method, "tokens": list(self.tokens), "scores": [float(s) for s in self.scores],
                "words": [w.to_dict() for w in self.words], "f_x": self.f_x, "f_baseline": self.f_baseline,
                "delta": self.delta, "relative_delta": self.relative_delta, "n_steps": self.n_steps,
                "tolerance": self.tolerance, "baseline": self.baseline, "window": self.window}


def piece_labels(labels: Sequence[str], label: str, n: int) -> tuple[str, ...]:
    """The labels an entity's target sums over its ``n`` pieces: B-X then I-X (IO: X everywhere; I-X without B-X:
    I-X everywhere), ``label`` being X, from the model's ``labels``."""
    have = set(labels)
    later = f"I-{label}" if f"I-{label}" in have else label
    first = f"B-{label}" if f"B-{label}" in have else later
    if first not in have or later not in have:
        raise InputError(f"The model has no label for {label!r} (its labels: {', '.join(labels)}).")
    return (first,) + (later,) * (n - 1)


def own_piece_labels(labels: Sequence[str], label: str, given: Sequence[str]) -> tuple[str, ...]:
    """``piece_labels`` with the tagger's own reading kept where it names this entity: a piece the tagger gave B-X,
    I-X or X keeps that label (an entity the tagger started with I-X, which the words' aggregation reads as one
    entity, is explained as the tagger read it); a piece it gave anything else takes the rule's label."""
    rule = piece_labels(labels, label, len(given))
    mine = {f"B-{label}", f"I-{label}", label}
    return tuple(g if g in mine else r for g, r in zip(given, rule))


def entity_pieces(offsets: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """[a, b): the pieces whose characters overlap [start, end) (an entity's pieces; DeBERTa-v2's pieces count the
    space before a word, so overlap, not containment)."""
    hit = [i for i, (s, e) in enumerate(offsets) if s < end and e > start]
    if not hit:
        raise InputError(f"No word-piece covers characters {start}..{end}.")
    return hit[0], hit[-1] + 1


def _targets(lm: LoadedModel, t: Tagging, entities, token, label) -> list[Target]:
    """The records' targets: the chosen entities (None: every one), then the chosen tokens."""
    if entities is None and token is None:
        entities = range(len(t.entities))
    chosen = []
    for k in _indices(entities, "entity"):
        if k >= len(t.entities):
            listed = "; ".join(f"{i}: {e.text!r} ({e.label})" for i, e in enumerate(t.entities[:10]))
            raise InputError(f"entity {k} is past this text's entities: it has {len(t.entities)}"
                             + (f" (numbered from 0: {listed})" if listed else "; explain a token instead (token=I)"))
        e = t.entities[k]
        a, b = entity_pieces(t.offsets, e.start, e.end)
        chosen.append(Target("entity", e.text, e.label, e.start, e.end, (a, b),
                             own_piece_labels(lm.labels, e.label, t.labels[a:b]), entity=k))
    for i in _indices(token, "token"):
        if i >= len(t.tokens):
            raise InputError(f"token {i} is past this text's word-pieces: it has {len(t.tokens)} (numbered from 0, "
                             "special tokens left out).")
        name = t.labels[i] if label is None else _label_name(lm, label)
        s, e = t.offsets[i]
        chosen.append(Target("token", t.text[s:e], name, s, e, (i, i + 1), (name,), token=i))
    if not chosen:
        raise InputError("Nothing to explain: no entity or token was chosen." if t.entities else
                         "Nothing to explain: this text has no entities; pass token=I to explain one word-piece "
                         f"(e.g. why it is {OUTSIDE}).")
    return chosen


def _indices(which, what: str) -> list[int]:
    if which is None:
        return []
    items = [which] if isinstance(which, (int, np.integer)) and not isinstance(which, bool) else which
    try:
        out = [int(k) for k in items if not isinstance(k, bool) and int(k) == k]
    except (TypeError, ValueError):
        out = []
    if len(out) != len(list(items)) or any(k < 0 for k in out):
        raise InputError(f"{what} must be a whole number from 0 (or a list of them), got {which!r}.")
    return out


def _label_name(lm: LoadedModel, label) -> str:
    idx = lm.label_index(label)
    if idx is None:
        raise InputError(f"Unknown label {label!r}: the model's labels are {', '.join(lm.labels)}.")
    return lm.labels[idx]


@dataclass
class _Window:
    """One window of the text as the model reads it: its ids, token types and which tagging piece each of its
    text positions is."""

    ids: list[int]
    types: list[int] | None
    info: TokenInfo
    first: int  # the tagging piece index of its first text position
    positions: list[int]  # the window position of each of its text pieces, in order

    def covers(self, a: int, b: int) -> bool:
        return self.first <= a and b <= self.first + len(self.positions)

    def centrality(self, a: int, b: int) -> int:
        return min(a - self.first, self.first + len(self.positions) - b)


def _windows(lm: LoadedModel, text: str, stride: int) -> list[_Window]:
    """The text's windows as ``tag`` reads them (``inference.window_plan``): window k + 1's first text piece is
    window k's ``stride``-th from its end."""
    enc, _, _, _ = window_plan(lm, [text], None, stride)
    out, first = [], 0
    for e in enc.encodings:
        at = [i for i, s in enumerate(e.sequence_ids) if s == 0]
        info = TokenInfo(tokens=tuple(e.tokens), offsets=tuple(tuple(o) for o in e.offsets),
                         sequence_ids=tuple(e.sequence_ids), text=text, pair=None, truncated=False)
        types = list(e.type_ids) if "token_type_ids" in enc else None
        out.append(_Window(list(e.ids), types, info, first, at))
        first += len(at) - stride
    return out


def _window_of(windows: list[_Window], target: Target) -> int:
    """The window where the target's pieces are most central (the earlier on a tie)."""
    a, b = target.pieces
    fits = [w for w, win in enumerate(windows) if win.covers(a, b)]
    if not fits:
        raise InputError(f"The {target.kind} {target.text!r} spans more word-pieces than one window holds.")
    return max(fits, key=lambda w: (windows[w].centrality(a, b), -w))


class LogitsTargetEngine(AttributionEngine):
    """The classifier's attribution engine with its target read from the logits at every position
    (``target_values``, a subclass's: an entity's, an answer span's). Its rows are the targets of one input (each
    row a copy of the same window), so a path point is the same input for every target: ``gradient_pass`` runs the
    forward once per distinct point and reads each target's gradient by a backward pass of its own."""

    def target_values(self, logits: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def logits(self, embeds: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """The head's logits at every position (R, T, C) for word vectors (R, T, D): the composed forward."""
        return classifier_logits(self.model, inputs_embeds=embeds, attention_mask=self.mask[rows],
                                 token_type_ids=self.types[rows], attention=self.attention, cls_only=False)

    def forward(self, embeds: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """F of each row's target (R, 1) for word vectors (R, T, D)."""
        return self.target_values(self.logits(embeds, rows), rows)

    def gradient_pass(self, points: list[tuple[int, float]], batch: int) -> tuple[list[float], np.ndarray]:
        """``AttributionEngine.gradient_pass`` with the forward shared by the targets: the distinct path points
        (alphas), at most ``batch`` a pass, go through the model once, every target at those points reads its F
        from the same logits, and each target's gradient comes from its own backward pass through that graph (kept
        between them). K targets at one point cost one forward and K backwards, not K of each; the numbers are the
        same (the points of a batch never mix)."""
        f = np.zeros(len(points), dtype=np.float64)
        grads = np.zeros((len(points), self.ids.shape[1]), dtype=np.float32)
        at: dict[float, list[int]] = {}  # alpha -> the points (indices into ``points``) there
        for i, (_, a) in enumerate(points):
            at.setdefault(a, []).append(i)
        alphas = list(at)
        device = self.ids.device
        for s in range(0, len(alphas), batch):
            chunk = alphas[s : s + batch]
            pairs = [(i, u) for u, a in enumerate(chunk) for i in at[a]]  # (point, its row in this pass)
            rows = torch.tensor([points[i][0] for i, _ in pairs], device=device)  # (P,) each point's target
            here = torch.tensor([u for _, u in pairs], device=device)  # (P,)
            alpha = torch.tensor(chunk, dtype=self.diff.dtype, device=device).view(-1, 1, 1)  # (U, 1, 1)
            first = torch.zeros(len(chunk), dtype=torch.long, device=device)  # (U,) row 0: the same window as any
            with torch.enable_grad():
                x = (self.base[first] + alpha * self.diff[first]).requires_grad_()  # (U, T, D)
                values = self.target_values(self.logits(x, first)[here], rows)[:, 0]  # (P,)
                owners: dict[int, list[int]] = {}  # target row -> its entries in ``pairs``
                for j, (i, _) in enumerate(pairs):
                    owners.setdefault(points[i][0], []).append(j)
                for n, js in enumerate(owners.values()):
                    (g,) = torch.autograd.grad(values[js].sum(), x, retain_graph=n < len(owners) - 1)  # (U, T, D)
                    g = (g * self.diff[first]).sum(dim=-1).float().cpu().numpy()  # (U, T)
                    for j in js:
                        i, u = pairs[j]
                        grads[i] = g[u]
            f[[i for i, _ in pairs]] = values.detach().double().cpu().numpy()
        return f.tolist(), grads


class TargetEngine(LogitsTargetEngine):
    """The classifier's attribution engine with one row per target of one input: every row holds the same text,
    and row r's output is its target's F (``target_values``), so the engine's batched passes, fixed and adaptive
    Integrated Gradients, explain all the targets at once."""

    @classmethod
    def for_targets(cls, lm: LoadedModel, window: _Window, targets: list[Target], objective: str, baseline: str,
                    internal_batch_size: int | None = None) -> TargetEngine:
        engine = cls.for_tokens(lm, window.ids, window.types, window.info, target=0, baseline=baseline,
                                cls_only=False, evaluate=False)
        k = len(targets)
        engine.infos = [window.info] * k
        for name in ("ids", "mask", "types", "base_ids", "emb", "base", "diff"):
            setattr(engine, name, getattr(engine, name).expand(k, *getattr(engine, name).shape[1:]))
        engine.targets = [0] * k  # column 0 of ``forward``: each row's own F
        engine.objective = objective
        engine.internal_batch_size = internal_batch_size
        lab = {name: i for i, name in enumerate(lm.labels)}
        width = max(b - a for a, b in (t.pieces for t in targets))
        pos = torch.zeros(k, width, dtype=torch.long)
        ids = torch.zeros(k, width, dtype=torch.long)
        weight = torch.zeros(k, width)
        for r, t in enumerate(targets):
            a, b = t.pieces
            pos[r, : b - a] = torch.tensor(window.positions[a - window.first : b - window.first])
            ids[r, : b - a] = torch.tensor([lab[name] for name in t.piece_labels])
            weight[r, : b - a] = 1.0
        device = engine.ids.device
        engine.positions, engine.label_ids, engine.weights = pos.to(device), ids.to(device), weight.to(device)
        return engine

    def target_values(self, logits: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """(R, 1): each row's F from token logits (R, T, C), for the targets of ``rows``."""
        logp = torch.log_softmax(logits.float(), dim=-1)  # (R, T, C)
        pos = self.positions[rows]  # (R, M)
        at = logp.gather(1, pos.unsqueeze(-1).expand(-1, -1, logp.shape[-1]))  # (R, M, C)
        picked = at.gather(2, self.label_ids[rows].unsqueeze(-1)).squeeze(-1)  # (R, M)
        f = (picked * self.weights[rows]).sum(dim=1, keepdim=True)  # (R, 1)
        return f if self.objective == "logprob" else f.exp()

    def gradients(self, points):
        if self.internal_batch_size is None:
            return super().gradients(points)
        return self.gradient_pass(points, self.internal_batch_size)


def prepare_targets(lm: LoadedModel, text, entities, token, label, target, baseline, aggregation, stride):
    """Checks, the tagging, the targets and the windows of one call."""
    lm.require_head(TOKEN_CLASSIFICATION, "explaining entities explains a tagger's labels of word-pieces")
    if target not in TARGETS:
        raise InputError(f"target must be one of {', '.join(TARGETS)}, got {target!r}.")
    check_args(baseline, 2, "prob")
    stride = default_stride(lm) if stride is None else stride
    t = tag(lm, text, aggregation=check_aggregation(aggregation), stride=stride)[0]
    targets = _targets(lm, t, entities, token, label)
    windows = _windows(lm, t.text, stride)
    if sum(len(w.positions) for w in windows) - stride * (len(windows) - 1) != len(t.tokens):
        raise InputError("The text's windows do not give back its word-pieces.")  # tag's own windows: never
    groups: dict[int, list[int]] = {}
    for r, tg in enumerate(targets):
        groups.setdefault(_window_of(windows, tg), []).append(r)
    return t, targets, windows, groups


def entity_record(t: Tagging, target: Target, window: _Window, w: int, token_scores: np.ndarray, method: str,
                  objective, f_x, f_b, delta, n_steps, tolerance, baseline) -> EntityAttribution:
    """A record from one target's scores over its window's positions (T,)."""
    scores = np.zeros(len(t.tokens), dtype=np.float32)
    scores[window.first : window.first + len(window.positions)] = np.asarray(token_scores)[window.positions]
    scores.flags.writeable = False
    words = tuple(WordScore(x.text, x.start, x.end, float(scores[x.pieces[0] : x.pieces[1]].sum()), x.pieces)
                  for x in t.words)
    return EntityAttribution(text=t.text, target=target, objective=objective, method=method, tokens=t.tokens,
                             offsets=t.offsets, scores=scores, words=words, f_x=float(f_x), f_baseline=float(f_b),
                             delta=None if delta is None else float(delta), n_steps=n_steps, tolerance=tolerance,
                             baseline=baseline, window=w)


def explain_entities(lm: LoadedModel, text: str, entities: int | Sequence[int] | None = None, *,
                     token: int | Sequence[int] | None = None, label: str | int | None = None,
                     target: str = "logprob", baseline: str = "pad", n_steps: int | None = None,
                     tolerance: float | None = None, internal_batch_size: int | None = None,
                     aggregation: str = "simple", stride: int | None = None) -> list[EntityAttribution]:
    """Integrated Gradients of a tagger's entities (and tokens) in ``text``: one record per target, in order (the
    chosen entities, then the chosen tokens), all of a window's targets in one batched computation. See the
    module's docstring for the targets and why.

    ``entities``: indices into ``tag(lm, text)[0].entities`` (None: every entity, unless ``token`` is given);
    ``token``: indices into its ``tokens`` (word-pieces, special tokens left out), explained for ``label`` (None:
    each one's predicted label, e.g. "O"). ``target``: "logprob" (F, the default) or "prob" (exp F).
    ``baseline``: "pad", "mask", "unk" or "zero". Steps as ``attribute``'s: ``tolerance`` (adaptive until the
    relative delta is within it), else ``n_steps`` fixed Gauss-Legendre steps, else adaptive at the default
    tolerance. ``internal_batch_size``: path points per forward/backward pass (None: a token budget, halved on
    out-of-memory). ``aggregation`` and ``stride``: ``tag``'s. A model of another head, an index past the text's
    entities or tokens, a bad option: InputError saying what to send."""
    n_steps, tolerance = steps_mode(n_steps, tolerance)
    check_args(baseline, n_steps, "prob", tolerance, max_n_steps=lm.settings.max_n_steps)
    if internal_batch_size is not None and (isinstance(internal_batch_size, bool)
                                            or not isinstance(internal_batch_size, int) or internal_batch_size < 1):
        raise InputError(f"internal_batch_size must be a whole number of at least 1, got {internal_batch_size!r}.")
    t, targets, windows, groups = prepare_targets(lm, text, entities, token, label, target, baseline, aggregation,
                                                  stride)
    out: list[EntityAttribution | None] = [None] * len(targets)
    with lm.run_lock:
        for w, rows in groups.items():
            engine = TargetEngine.for_targets(lm, windows[w], [targets[r] for r in rows], target, baseline,
                                              internal_batch_size)
            for r, a in zip(rows, engine.integrated_gradients(n_steps, tolerance)):
                out[r] = entity_record(t, targets[r], windows[w], w, a.scores, "integrated_gradients", target, a.f_x,
                                 a.f_baseline, a.delta, a.n_steps, a.tolerance, baseline)
    return out  # type: ignore[return-value]


def occlude_entities(lm: LoadedModel, text: str, entities: int | Sequence[int] | None = None, *,
                     token: int | Sequence[int] | None = None, label: str | int | None = None,
                     target: str = "logprob", baseline: str = "pad", aggregation: str = "simple",
                     stride: int | None = None, batch_size: int = 64) -> list[EntityAttribution]:
    """Occlusion of the same targets as ``explain_entities`` (same arguments): a piece's score is F(x) minus F with
    that piece's word vector replaced by the baseline's ([PAD]'s, [MASK]'s, [UNK]'s or zero), a word's is
    F(x) minus F with all of its pieces replaced (not the sum of its pieces': occluding a word is not occluding
    its pieces one at a time). Every variant of a window is one row of batched forward passes read by every
    target of that window. No completeness (``delta`` None); ``f_baseline`` is F with every piece replaced."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a whole number of at least 1, got {batch_size!r}.")
    t, targets, windows, groups = prepare_targets(lm, text, entities, token, label, target, baseline, aggregation,
                                                  stride)
    out: list[EntityAttribution | None] = [None] * len(targets)
    with lm.run_lock:
        for w, rows in groups.items():
            win = windows[w]
            engine = TargetEngine.for_targets(lm, win, [targets[r] for r in rows], target, baseline)
            inside = window_words(t, win)
            words = [x for x, _ in inside]
            variants = [[], list(win.positions)] + [[p] for p in win.positions] + [p for _, p in inside]
            f = variant_values(engine, variants, batch_size)  # (V, K)
            n = len(win.positions)
            for j, r in enumerate(rows):
                token_scores = np.zeros(engine.ids.shape[1], dtype=np.float32)
                token_scores[win.positions] = f[0, j] - f[2 : 2 + n, j]
                rec = entity_record(t, targets[r], win, w, token_scores, "occlusion", target, f[0, j], f[1, j], None,
                              None, None, baseline)
                drops = {x.pieces: float(f[0, j] - f[2 + n + i, j]) for i, x in enumerate(words)}
                out[r] = with_word_scores(rec, drops)
    return out  # type: ignore[return-value]


def window_words(t: Tagging, win: _Window) -> list[tuple]:
    """(word, its pieces' positions in the window) for each word of ``t`` wholly inside window ``win``."""
    span = range(win.first, win.first + len(win.positions))
    return [(x, win.positions[x.pieces[0] - win.first : x.pieces[1] - win.first]) for x in t.words
            if x.pieces[0] in span and x.pieces[1] - 1 in span]


def variant_values(engine: LogitsTargetEngine, variants: list[list[int]], batch_size: int) -> np.ndarray:
    """(V, K): every target's F (the engine's ``target_values``: an entity's, an answer span's) on the input with each
    variant's positions given the baseline's word vectors (the engine's ``base``: [PAD]/[MASK]/[UNK]'s, or zero
    vectors), through the same composed forward from word vectors as Integrated Gradients (so RoBERTa's positions
    never shift at a [PAD] id)."""
    k = len(engine)
    rows = torch.arange(k, device=engine.ids.device)
    values = []
    with torch.no_grad():
        for s in range(0, len(variants), batch_size):
            chunk = variants[s : s + batch_size]
            x = engine.emb[:1].repeat(len(chunk), 1, 1)  # (B, T, D)
            for i, positions in enumerate(chunk):
                x[i, positions] = engine.base[0, positions]
            n = len(chunk)
            logits = classifier_logits(engine.model, inputs_embeds=x, attention_mask=engine.mask[:1].expand(n, -1),
                                       token_type_ids=engine.types[:1].expand(n, -1),
                                       attention=engine.attention, cls_only=False)  # (B, T, C)
            f = engine.target_values(logits.repeat_interleave(k, dim=0), rows.repeat(n))  # (B * K, 1): row b * K + j
            values.append(f.view(n, k).cpu().numpy())  # (B, K)
    return np.concatenate(values)


def with_word_scores(rec: EntityAttribution, drops: dict[tuple[int, int], float]) -> EntityAttribution:
    """``rec`` with each word's own occlusion score (words outside the window read keep 0)."""
    words = tuple(WordScore(x.word, x.start, x.end, drops.get(x.pieces, 0.0), x.pieces) for x in rec.words)
    return replace(rec, words=words)
