"""Documents of any length: attributions and attention over the same overlapping windows predict
reads a long text in (``inference.window_plan``), merged into one record over the whole text.

- ``document_windows``: the windows of one text: each window's token ids (specials included),
  its tokens with offsets into the *whole* text, and where its tokens sit in the document.
- ``explain_windows``: any attribution method (``methods.METHOD_CLASSES``) on each window in turn
  (one window's engine alive at a time, so memory is bounded by one window's batch), for one
  target (the document's pooled prediction unless given), merged into one ``Attribution`` over
  every token of the document (``DocumentExplanation``), with each window's prediction.
- ``attention_windows``: the attention of the window the user picks, and for the whole text the
  merged [CLS] row and rollout [CLS] row (``DocumentAttention``); generic over a function giving a
  window's [CLS] scores (``cls_fn``), so other context-mixing measures plug in.
- ``merge_windows`` / ``edge_weights``: the merge. A token read by several windows gets the
  weighted mean of their scores, each window weighing it by its distance from that window's edge
  plus one: a token at a window's cut edge (little context on one side) gets weight 1 from that
  window, one ``d`` tokens inside gets ``d + 1``, so across an overlap the weight passes linearly
  from one window to the next. The document's own first and last tokens are no cut: they weigh
  as the window's middle. Special tokens ([CLS], [SEP]) and a second text (repeated in every
  window) are averaged over all windows.

A text that fits the model is one window with every weight 1: the same scores as the plain
explanation.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import InputError
from ..models.encoding import check_texts
from ..models.families import family_of
from ..models.inference import check_window, pool_logits, probabilities, window_logits, window_plan
from ..models.registry import LoadedModel
from ..results import AttentionMaps, Attribution, Prediction, TokenInfo
from .attention_maps import cls_rows, rollout
from .attribution_options import TOKEN_BUDGET, check_args, speed_options, steps_mode
from .ig_engine import AttributionEngine
from .methods import MAX_SAMPLES, WordFeatures, method_class, refuse_if_slow
from .mixing_measures import MixingMaps, check_measure, context_mixing_inputs

__all__ = ["DocumentWindow", "DocumentWindows", "WindowResult", "DocumentExplanation", "DocumentAttention",
           "document_windows", "explain_windows", "attention_windows", "window_maps", "merge_windows", "edge_weights",
           "raw_cls_scores", "default_stride", "DEFAULT_STRIDE"]


@dataclass(frozen=True, eq=False)
class DocumentWindow:
    """One window: the ids the model reads and where each of its tokens sits in the document."""

    index: int
    input_ids: tuple[int, ...]  # (T_w,) specials included, what predict's window reads
    token_type_ids: tuple[int, ...] | None
    info: TokenInfo  # its tokens; offsets into the whole text (``info.text`` is the whole text)
    positions: np.ndarray  # (T_w,) int: the document token each window token is
    weights: np.ndarray  # (T_w,) float: its merge weight (``edge_weights``)
    token_span: tuple[int, int]  # [start, end) of its text tokens among the document's tokens
    char_span: tuple[int, int]  # [start, end) of its text in the whole text

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass(frozen=True, eq=False)
class DocumentWindows:
    """A text cut as predict cuts it: its windows and the document's own tokens (``info``: the
    first window's leading specials, every text token once, the first window's trailing part)."""

    info: TokenInfo
    windows: tuple[DocumentWindow, ...]
    stride: int
    encoding: object  # the tokenizer's output (``window_logits`` reads it)

    def __len__(self) -> int:
        return len(self.windows)


def edge_weights(n_text: int, left_cut: bool, right_cut: bool) -> np.ndarray:
    """(n_text,) the merge weight of each of a window's text tokens: its distance from the nearest
    cut edge plus one (1 at a cut edge); a side that is the document's own start or end is no cut."""
    k = np.arange(n_text, dtype=np.float64)
    big = float(n_text)
    left = k if left_cut else np.full(n_text, big)
    right = (n_text - 1 - k) if right_cut else np.full(n_text, big)
    return np.minimum(left, right) + 1.0


DEFAULT_STRIDE = 128


def default_stride(lm: LoadedModel, stride: int | None) -> int:
    """``stride``, or where None predict's 128 (at most half the model's length)."""
    return min(DEFAULT_STRIDE, lm.max_length // 2) if stride is None else stride


def document_windows(lm: LoadedModel, text: str, pair: str | None = None, stride: int | None = None) -> DocumentWindows:
    """``text`` (and ``pair``) checked and cut into predict's windows (``inference.window_plan``);
    ``stride`` None: ``default_stride``."""
    stride = default_stride(lm, stride)
    texts, pairs = check_texts([text], None if pair is None else [pair], optional_pairs=True,
                               max_chars=lm.settings.max_chars, max_batch_texts=lm.settings.max_batch_texts)
    check_window(lm, stride, "mean")
    text, pair = texts[0], (pairs[0] if pairs else None)
    enc, _, _, _ = window_plan(lm, [text], None if pair is None else [pair], stride)
    n = len(enc["input_ids"])
    seqs = [list(enc.encodings[w].sequence_ids) for w in range(n)]
    text_idx = [[j for j, s in enumerate(seq) if s == 0] for seq in seqs]
    if not text_idx[0]:
        raise InputError("The text gives no tokens the model reads (only characters its tokenizer drops): "
                         "enter words to explain.")
    # The document's tokens: window 0's leading specials, every text token once, window 0's trailing
    # part ([SEP], a second text and its [SEP]). Window w + 1 repeats the last ``stride`` text tokens
    # of window w (as ``window_plan`` counts them); checked on the offsets below.
    first = seqs[0]
    head_n = text_idx[0][0]
    tail0 = text_idx[0][-1] + 1
    tokens0, offsets0 = enc.encodings[0].tokens, enc["offset_mapping"][0]
    doc_tokens = list(tokens0[:head_n])
    doc_offsets = [tuple(o) for o in offsets0[:head_n]]
    doc_seq = list(first[:head_n])
    starts = []
    pos = 0
    for w in range(n):
        idx = text_idx[w]
        start = 0 if w == 0 else pos - min(stride, pos)
        have = pos - start  # tokens of this window already in the document
        for k, j in enumerate(idx):
            o = tuple(enc["offset_mapping"][w][j])
            if k < have:
                if tuple(doc_offsets[head_n + start + k]) != o:
                    raise RuntimeError("windows do not overlap as expected")  # a tokenizer we do not know
                continue
            doc_tokens.append(enc.encodings[w].tokens[j])
            doc_offsets.append(o)
            doc_seq.append(0)
        starts.append(start)
        pos = start + len(idx)
    n_text = pos
    doc_tokens += tokens0[tail0:]
    doc_offsets += [tuple(o) for o in offsets0[tail0:]]
    doc_seq += first[tail0:]
    info = TokenInfo(tokens=tuple(doc_tokens), offsets=tuple((int(a), int(b)) for a, b in doc_offsets),
                     sequence_ids=tuple(doc_seq), text=text, pair=pair, truncated=False)
    windows = []
    for w in range(n):
        idx, seq = text_idx[w], seqs[w]
        lo, hi = idx[0], idx[-1] + 1
        positions = np.empty(len(seq), dtype=np.int64)
        positions[:lo] = np.arange(lo)
        positions[lo:hi] = head_n + starts[w] + np.arange(hi - lo)
        positions[hi:] = head_n + n_text + np.arange(len(seq) - hi)
        weights = np.ones(len(seq))
        weights[lo:hi] = edge_weights(hi - lo, w > 0, w < n - 1)
        offs = tuple((int(a), int(b)) for a, b in enc["offset_mapping"][w])
        winfo = TokenInfo(tokens=tuple(enc.encodings[w].tokens), offsets=offs, sequence_ids=tuple(seq), text=text,
                          pair=pair, truncated=n > 1)
        types = tuple(enc["token_type_ids"][w]) if "token_type_ids" in enc else None
        windows.append(DocumentWindow(
            index=w, input_ids=tuple(enc["input_ids"][w]), token_type_ids=types, info=winfo, positions=positions,
            weights=weights, token_span=(head_n + starts[w], head_n + starts[w] + hi - lo),
            char_span=(offs[lo][0], offs[hi - 1][1])))
    return DocumentWindows(info=info, windows=tuple(windows), stride=stride, encoding=enc)


def merge_windows(doc: DocumentWindows, per_window: Sequence[np.ndarray]) -> np.ndarray:
    """Each window's scores (..., T_w) -> the document's (..., T): at every document token the mean
    of the windows that read it, weighted by ``DocumentWindow.weights``."""
    lead = np.asarray(per_window[0]).shape[:-1]
    total = np.zeros((*lead, len(doc.info)), dtype=np.float64)
    weight = np.zeros(len(doc.info), dtype=np.float64)
    for w, scores in zip(doc.windows, per_window):
        s = np.asarray(scores, dtype=np.float64)
        if s.shape[-1] != len(w):
            raise ValueError(f"window {w.index} has {len(w)} tokens, its scores {s.shape[-1]}")
        np.add.at(total, (..., w.positions), s * w.weights)
        np.add.at(weight, w.positions, w.weights)
    return total / weight


# --------------------------------------------------------------------------- explanations
@dataclass(frozen=True, eq=False)
class WindowResult:
    """One window's prediction (its own probabilities), where it lies and its own attribution."""

    index: int
    token_span: tuple[int, int]
    char_span: tuple[int, int]
    label: str
    labels: tuple[str, ...]
    probs: tuple[float, ...]
    attribution: Attribution | None = None  # the window explained alone (for the document's target)

    def to_dict(self) -> dict:
        out = {"index": self.index, "label": self.label, "scores": dict(zip(self.labels, self.probs)),
               "tokens": list(self.token_span), "chars": list(self.char_span)}
        a = self.attribution
        if a is not None:
            out |= {"f_x": a.f_x, "f_baseline": a.f_baseline, "delta": float(a.delta),
                    "relative_delta": _finite(a.relative_delta), "sum_of_scores": float(np.sum(a.scores)),
                    "n_steps": a.n_steps}
        return out


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


@dataclass(frozen=True, eq=False)
class DocumentExplanation:
    """One attribution method over a whole document, read in windows.

    ``attribution`` covers every token of the document once (offsets into the whole text), its
    scores the windows' merged (``merge_windows``). Its ``f_x`` and ``f_baseline`` are the
    windows' means (so the colour scale is one window's change) and its ``relative_delta`` the
    worst window's; its scores do not add up to ``f_x - f_baseline``: each window's own scores
    add up to that window's change (up to its delta, ``windows[i].attribution``), and the merged
    sum is reported as it is (``scores_sum``) beside the windows' changes (``windows_change``)."""

    attribution: Attribution
    prediction: Prediction  # the document's, the windows' logits pooled as predict_windows does
    windows: tuple[WindowResult, ...]
    stride: int
    seconds: float = 0.0

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.attribution.tokens

    @property
    def scores_sum(self) -> float:
        return float(np.sum(self.attribution.scores, dtype=np.float64))

    @property
    def windows_change(self) -> tuple[float, ...]:
        """Each window's f(x) - f(baseline): what its own scores add up to (up to its delta)."""
        return tuple(w.attribution.f_x - w.attribution.f_baseline for w in self.windows if w.attribution)

    def window_dicts(self) -> list[dict]:
        """Each window's prediction and numbers (what ``export``'s ``windows=`` takes)."""
        return [w.to_dict() for w in self.windows]

    def to_dict(self) -> dict:
        """The merged attribution's JSON (one score per document token), plus ``windows`` (how many
        were read), each window's prediction and numbers, the document's prediction, the offsets."""
        a = self.attribution.to_dict()
        a["relative_delta"] = _finite(self.attribution.relative_delta)
        return a | {
            "windows": len(self.windows), "stride": self.stride,
            "offsets": [list(o) for o in self.attribution.info.offsets],
            "prediction": self.prediction.to_dict() | {"windows": len(self.windows)},
            "window_predictions": self.window_dicts(),
            "scores_sum": self.scores_sum, "windows_change": list(self.windows_change),
            "truncated": False, "seconds": round(self.seconds, 4),
        }


def _predict_windows(lm: LoadedModel, doc: DocumentWindows, pool: str) -> tuple[Prediction, np.ndarray]:
    """The document's prediction and each window's probabilities (W, C); ``TOKEN_BUDGET`` tokens
    of windows per forward pass, so no more than one attribution batch is in memory."""
    logits = window_logits(lm, doc.encoding, batch_size=max(1, TOKEN_BUDGET // lm.max_length))  # (W, C)
    pooled = probabilities(lm, torch.from_numpy(pool_logits(logits, pool)[None])).numpy()[0]  # (C,)
    probs = probabilities(lm, torch.from_numpy(logits)).numpy()  # (W, C)
    info = doc.info
    pred = Prediction(text=info.text, pair=info.pair, labels=lm.labels, probs=tuple(float(x) for x in pooled),
                      label=lm.labels[int(pooled.argmax())], truncated=False, n_tokens=len(info),
                      multi_label=lm.multi_label, windows=len(doc))
    return pred, probs


def explain_windows(
    lm: LoadedModel,
    text: str,
    method: str = "integrated_gradients",
    target: str | int | None = None,
    baseline: str = "pad",
    pair: str | None = None,
    output: str = "prob",
    *,
    stride: int | None = None,
    pool: str = "mean",
    n_steps: int | None = None,
    tolerance: float | None = None,
    n_samples: int | None = None,
    seed: int = 0,
) -> DocumentExplanation:
    """``method`` (any name in ``methods.METHOD_CLASSES``) on every window of ``text`` (predict's
    windows, ``stride`` tokens shared by neighbours; None: ``default_stride``), one window at a time, merged into one
    attribution over the whole document (``DocumentExplanation``). ``target``: the class every
    window explains (None: the document's predicted class, the windows' logits pooled by ``pool``).
    The other options are ``methods.explain``'s. Kept in the model's LRU."""
    cls = method_class(method)
    stride = default_stride(lm, stride)
    check_window(lm, stride, pool)
    n_steps, tolerance = steps_mode(n_steps, tolerance)
    check_args(baseline, n_steps, output, tolerance, max_n_steps=lm.settings.max_n_steps)
    if n_samples is not None and (isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer))
                                  or not 2 <= n_samples <= MAX_SAMPLES):
        raise InputError(f"n_samples must be a whole number from 2 to {MAX_SAMPLES}, got {n_samples!r}.")
    key = ("explain_windows", method, text, pair, target, baseline, output, stride, pool, n_steps, tolerance,
           n_samples if cls.sampled else None, seed if cls.sampled else None, *speed_options(lm))
    return lm.memo(key, lambda: _explain_windows(lm, text, cls, target, baseline, pair, output, stride, pool,
                                                 dict(n_steps=n_steps, tolerance=tolerance, n_samples=n_samples,
                                                      seed=seed)))


def _explain_windows(lm, text, cls, target, baseline, pair, output, stride, pool, options) -> DocumentExplanation:
    start = time.perf_counter()
    with lm.run_lock:
        doc = document_windows(lm, text, pair, stride)
        pred, probs = _predict_windows(lm, doc, pool)
        target_idx = lm.label_index(target)
        if target_idx is None:
            target_idx = lm.labels.index(pred.label)
        if cls.per_word:  # refuse before any window runs: the estimate for all of them
            probe = WordFeatures(_engine(lm, doc.windows[0], target_idx, baseline, output))
            n_words = sum(len(WordFeatures(_engine(lm, w, target_idx, baseline, output, evaluate=False)))
                          for w in doc.windows)
            refuse_if_slow(cls.name, n_words, probe.seconds_per_row(), options["n_samples"],
                           lm.settings.max_method_seconds)
            del probe
        results = []
        # Integrated Gradients find f(x) and f(baseline) on their own path (no separate forward pass)
        ends = cls.name != "integrated_gradients"
        for w in doc.windows:
            engine = _engine(lm, w, target_idx, baseline, output, evaluate=ends)
            a = cls(engine).attribute(**options)
            del engine  # one window's word vectors at a time
            if len(a.scores) != len(w) or a.info.tokens != w.info.tokens:
                raise InputError(f"{cls.name} cannot explain a document in windows: it does not score the window's "
                                 "own tokens. Choose another method, or explain the first part of the text alone.")
            p = probs[w.index]
            results.append(WindowResult(index=w.index, token_span=w.token_span, char_span=w.char_span,
                                        label=lm.labels[int(p.argmax())], labels=lm.labels,
                                        probs=tuple(float(x) for x in p), attribution=a))
    merged = merge_windows(doc, [r.attribution.scores for r in results]).astype(np.float32)  # (T,)
    attrs = [r.attribution for r in results]
    f_x = float(np.mean([a.f_x for a in attrs]))
    f_b = float(np.mean([a.f_baseline for a in attrs]))
    worst = max(attrs, key=lambda a: a.relative_delta if np.isfinite(a.relative_delta) else np.inf)
    rel = worst.relative_delta if np.isfinite(worst.relative_delta) else 0.0
    delta = float(np.sign(worst.delta) * rel * abs(f_x - f_b)) if abs(f_x - f_b) > 1e-12 else float(worst.delta)
    seconds = time.perf_counter() - start
    first = attrs[0]
    attr = dataclasses.replace(
        first, info=doc.info, scores=merged, f_x=f_x, f_baseline=f_b, delta=delta,
        n_steps=int(sum(a.n_steps for a in attrs)), n_forward=int(sum(a.n_forward for a in attrs)),
        n_backward=int(sum(a.n_backward for a in attrs)), seconds=seconds)
    return DocumentExplanation(attribution=attr, prediction=pred, windows=tuple(results), stride=stride,
                               seconds=seconds)


def _engine(lm: LoadedModel, w: DocumentWindow, target_idx: int, baseline: str, output: str,
            evaluate: bool = True) -> AttributionEngine:
    """The engine of one window, built from the window's own token ids. This is exact: they are
    the ids predict's window reads (the tokenizer's overflow window, specials included), so the
    window's f(x) is the logit predict pooled. Building it from the window's characters instead
    would not be: a window that starts inside a word starts with a continuation piece ("##ing"),
    which re-tokenized alone becomes another token; byte-level BPE marks a leading space, so the
    first piece would change too, and the window could even come out a different length."""
    return AttributionEngine.for_tokens(lm, w.input_ids, w.token_type_ids, w.info, target_idx, baseline, output,
                                        evaluate=evaluate)


# --------------------------------------------------------------------------- attention
@dataclass(frozen=True, eq=False)
class DocumentAttention:
    """Attention over a long document: the picked window's maps (``maps``, its tokens' offsets into
    the whole text) and, over every document token, the windows' [CLS] rows and rollout [CLS] rows
    per layer, merged (``merge_windows``). An entry is the token's share of its window's [CLS]
    (the windows' weighted mean where two read it), so entries compare across windows and a row
    sums to about the number of windows, not to 1."""

    maps: AttentionMaps | MixingMaps  # the picked window (MixingMaps: the measure's)
    window: int
    info: TokenInfo  # the whole document's tokens
    cls_row: np.ndarray  # (L, T) where [CLS] looks in each layer (mean of heads), merged
    rollout_cls: np.ndarray  # (L, T) rollout's [CLS] row up to each layer, merged
    spans: tuple[tuple[int, int], ...]  # each window's [start, end) among the document's tokens
    char_spans: tuple[tuple[int, int], ...]
    measure: str = "raw"

    @property
    def windows(self) -> int:
        return len(self.spans)

    def to_dict(self) -> dict:
        r = lambda a: np.round(a, 6).tolist()  # noqa: E731
        return {"tokens": list(self.maps.tokens), "weights": r(self.maps.weights), "window": self.window,
                "windows": self.windows, "measure": self.measure,
                "window_span": {"tokens": list(self.spans[self.window]), "chars": list(self.char_spans[self.window])},
                "document": {"tokens": list(self.info.tokens), "offsets": [list(o) for o in self.info.offsets],
                             "cls_row": r(self.cls_row), "rollout_cls": r(self.rollout_cls)},
                "truncated": False}


def _window_inputs(lm: LoadedModel, w: DocumentWindow) -> dict:
    """The model inputs (1, T_w) of one window's own token ids."""
    ids = torch.tensor([list(w.input_ids)], device=lm.device)  # (1, T_w)
    kw = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if w.token_type_ids is not None:
        kw["token_type_ids"] = torch.tensor([list(w.token_type_ids)], device=lm.device)
    return kw


def _window_maps(lm: LoadedModel, w: DocumentWindow) -> AttentionMaps:
    """Every layer's and head's attention over one window's own token ids (``attention_maps``'s
    model, eager attention)."""
    kw = _window_inputs(lm, w)
    fam = family_of(lm.model)
    with lm.run_lock, torch.inference_mode():
        out = lm.model(**(fam.inputs(**kw) if fam is not None else kw), output_attentions=True)
    if not out.attentions or out.attentions[0] is None:
        raise RuntimeError("The model returned no attention maps; it must be loaded with attn_implementation='eager'.")
    return AttentionMaps(info=w.info, weights=torch.stack([a[0] for a in out.attentions]).float().cpu().numpy())


def raw_cls_scores(maps: AttentionMaps) -> tuple[np.ndarray, np.ndarray]:
    """A window's (L, T_w) [CLS] rows (mean of heads) and rollout [CLS] rows: the "raw" measure."""
    return cls_rows(maps), rollout(maps)[:, 0]


def _check_index(doc: DocumentWindows, window) -> None:
    """InputError unless ``window`` is the index of one of ``doc``'s windows (a text that fits: one window)."""
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or not 0 <= window < len(doc):
        n = len(doc)
        read = "this text fits the model: it is read in 1 window" if n == 1 else f"this text is read in {n} windows"
        raise InputError(f"window must be a whole number from 0 to {n - 1} ({read}), got {window!r}.")


def window_maps(lm: LoadedModel, text: str, pair: str | None = None, window: int = 0, stride: int | None = None,
                measure: str = "raw") -> MixingMaps:
    """The ``measure`` of window ``window`` (0-based) alone, over its own ids: the maps ``attention_windows``
    gives for that window, without reading the others (a page switching windows)."""
    measure = check_measure(lm, measure)
    doc = document_windows(lm, text, pair, default_stride(lm, stride))
    _check_index(doc, window)
    w = doc.windows[int(window)]
    return context_mixing_inputs(lm, _window_inputs(lm, w), measure, info=w.info)


def attention_windows(lm: LoadedModel, text: str, pair: str | None = None, window: int = 0, stride: int | None = None,
                      cls_fn: Callable[[LoadedModel, DocumentWindow], tuple[np.ndarray, np.ndarray]] | None = None,
                      measure: str = "raw") -> DocumentAttention:
    """The attention of window ``window`` (0-based) of ``text`` and the [CLS] rows of every window
    merged over the whole document. ``cls_fn(lm, window) -> (cls rows (L, T_w), aggregated [CLS]
    rows (L, T_w))`` gives a window's [CLS] scores (default: raw attention and its rollout,
    ``raw_cls_scores``). Without ``cls_fn``, ``measure`` (``mixing_measures.MEASURES``) is computed over
    each window's own ids: the picked window's maps are its ``MixingMaps`` and a window's [CLS] rows
    are its per-layer and aggregated [CLS] rows (raw: attention and rollout, as ``raw_cls_scores``).
    Windows are read one at a time."""
    measure = check_measure(lm, measure)
    stride = default_stride(lm, stride)
    doc = document_windows(lm, text, pair, stride)
    _check_index(doc, window)
    picked = None
    rows, rolls = [], []
    for w in doc.windows:
        if cls_fn is None:  # the measure over the window's own ids: rows = combined[:, 0], rolls = aggregated[:, 0]
            maps = context_mixing_inputs(lm, _window_inputs(lm, w), measure, info=w.info)
            a, b = maps.combined[:, 0], maps.aggregated[:, 0]
        else:
            maps = _window_maps(lm, w) if w.index == window else None
            a, b = cls_fn(lm, w)
        if w.index == window:
            picked = maps
        rows.append(a)
        rolls.append(b)
        del maps
    return DocumentAttention(
        maps=picked, window=int(window), info=doc.info,
        cls_row=merge_windows(doc, rows).astype(np.float32), rollout_cls=merge_windows(doc, rolls).astype(np.float32),
        spans=tuple(w.token_span for w in doc.windows), char_spans=tuple(w.char_span for w in doc.windows),
        measure=measure)
