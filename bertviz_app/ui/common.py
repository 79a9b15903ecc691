"""Shared pieces of the web UI: error translation, the one "analyze everything" computation,
token views (merge word pieces, hide [CLS]/[SEP]) and escaped HTML for coloured tokens.

No module-level mutable state: per-user results travel in ``gr.State`` as a ``Record``;
models are cached by the core's ``load_model``.
"""

from __future__ import annotations

import dataclasses
import functools
import html
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr
import numpy as np

import bertviz_app as core

from . import visitor

log = logging.getLogger("bertviz_app.ui")

UNEXPECTED = "Unexpected error while handling this request; the details are in the server log."
PREDICTED = "(predicted class)"
BASELINE_CHOICES = [
    ("[PAD] tokens", "pad"),
    ("[MASK] tokens", "mask"),
    ("[UNK] tokens", "unk"),
    ("zero word vectors", "zero"),
]
# What the page calls each attribution method (methods.METHODS' names; "ig" is explain_csv's short name)
METHOD_LABELS = core.METHOD_LABELS  # one table of method names, shared with the core's readings
PATH_STEPS = 20  # Integrated Gradients steps per layer for the [CLS] path
DELTA_WARN = 0.05  # relative convergence delta above which the attribution gets a warning


# --------------------------------------------------------------------------- errors
def user_error(exc: BaseException) -> gr.Error:
    """BertvizError -> its own (user-safe) message; anything else -> a generic message, logged."""
    if isinstance(exc, gr.Error):
        return exc
    if isinstance(exc, core.BertvizError):
        return gr.Error(str(exc))
    log.error("Unexpected error in the UI", exc_info=exc)
    return gr.Error(UNEXPECTED)


def guard(fn: Callable) -> Callable:
    """Wrap an event handler so only clear, user-safe messages reach the browser or API client.
    ``functools.wraps`` keeps the signature and type hints gradio reads (gr.Progress, gr.api)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge
            raise user_error(exc) from None

    return wrapper


def guard_stream(fn: Callable) -> Callable:
    """``guard`` for a generator handler: the wrapper is itself a generator function (gradio
    streams only those), and an error raised between yields is translated the same way."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge
            raise user_error(exc) from None

    return wrapper


def load(name: str | None, default: str) -> core.LoadedModel:
    """Load what the user asked for. Folder paths typed in the browser or sent to the API are
    refused when BERTVIZ_ALLOW_LOCAL_PATHS=0; the operator's own default model is always allowed."""
    name = (name or "").strip() or default
    if visitor.public():  # another visitor's run answers as an unknown model; no folders by path
        visitor.check_model(name, default)
        try:
            return core.load_model(name, allow_paths=name == default)
        except core.ModelNotFoundError as exc:
            raise core.ModelNotFoundError(visitor.hide_others(str(exc))) from None
    allow = name == default or core.get_settings().allow_local_paths
    return core.load_model(name, allow_paths=allow)


def model_choices(default: str) -> list[str]:
    names = [m["name"] for m in visitor.visible(core.list_models()) if m["built"]]  # public mode: own runs only
    if default not in names:
        names.insert(0, default)
    return names


def model_line(lm: core.LoadedModel) -> str:
    n = len(lm.labels)
    kind = "multi-label" if lm.multi_label else "single-label"
    return (f"**Model:** {esc(lm.name)} · **device:** {esc(lm.device_label)} · {lm.num_layers} layers · "
            f"{n} classes ({kind}) · reads at most {lm.max_length} tokens")


def warnings_md(lm: core.LoadedModel) -> str:
    return "\n\n".join(f"**Warning:** {esc(w)}" for w in lm.warnings)


def esc(text: object) -> str:
    """Escape user text for Markdown output: HTML (Markdown passes raw HTML through) and Markdown
    syntax. Quotes stay as they are: an escaped &#x27; would then have its '#' escaped and show
    up literally, and quotes are harmless outside attributes."""
    s = html.escape(str(text), quote=False)
    for ch in "\\`*_[]|#":
        s = s.replace(ch, "\\" + ch)
    return s


def finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class CancelFlag:
    """Per-session cancel handle kept in ``gr.State(CancelFlag())``. Gradio deep-copies a State's
    initial value once per session, so each session gets its own fresh flag (a threading.Event
    cannot be deep-copied; a callable initial value would add an API endpoint)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __deepcopy__(self, memo):
        return CancelFlag()

    def arm(self) -> threading.Event:
        """A fresh event for the next run (an earlier run keeps its own, already set if cancelled)."""
        self.event = threading.Event()
        return self.event


# --------------------------------------------------------------------------- the analysis
@dataclass(frozen=True, eq=False)
class Record:
    """Everything one Analyze computed; kept per user in gr.State, re-rendered without recomputing."""

    model: str
    labels: tuple[str, ...]
    device_label: str
    prediction: core.Prediction
    maps: core.AttentionMaps
    lens: core.ClsLens
    # None while Integrated Gradients are still running (Analyze shows the rest first) or skipped
    attribution: core.Attribution | None = None
    path: core.ClsPath | None = None
    faith: core.Faithfulness | None = None  # ERASER faithfulness of ``attribution``
    baseline_jumps: bool = False  # the path from the attribution's baseline starts with a jump (core.baseline_jumps)


def target_arg(target: str | None) -> str | None:
    return None if not target or target == PREDICTED else target


def tolerance_arg(auto: bool) -> float | None:
    """The UI's "choose the steps automatically": a guaranteed relative delta of DELTA_WARN."""
    return DELTA_WARN if auto else None


def analyze_fast(lm: core.LoadedModel, text: str, pair: str | None,
                 progress: Callable[[float, str], Any] | None = None, window: bool = False) -> Record:
    """The quick part of Analyze (one forward pass each): prediction, attention, [CLS] lens.
    Shown at once; a long text's Integrated Gradients (``analyze_ig``) can take a minute.
    ``window``: a text past the model's length is classified whole (mean of the logits of
    windows overlapping by a quarter of the length); the charts still read its first window."""
    step = progress or (lambda *_: None)
    pair = pair if pair and pair.strip() else None
    step(0.05, "Predicting")
    # window stride: a quarter of the model's length shared by neighbours (128 tokens for BERT's 512)
    pred = core.predict_one(lm, text, pair, window=bool(window), stride=lm.max_length // 4)  # batched with /predict
    step(0.1, "Reading attention")
    maps = core.attention(lm, text, pair=pair)
    maps = core.AttentionMaps(info=maps.info, weights=maps.weights.astype(np.float16))  # halves per-user memory
    step(0.15, "[CLS] lens")
    lens = core.cls_lens(lm, text, pair=pair)
    return Record(lm.name, lm.labels, lm.device_label, pred, maps, lens)


def analyze_ig(lm: core.LoadedModel, rec: Record, target: str | None, baseline: str, n_steps: int,
               progress: Callable[[float, str], Any] | None = None, auto: bool = False) -> Record:
    """The slow part, added to ``rec``: Integrated Gradients, their ERASER faithfulness (one batched
    forward pass) and the [CLS] path."""
    step = progress or (lambda *_: None)
    text, pair = rec.prediction.text, rec.prediction.pair
    step(0.25, "Integrated Gradients")
    attr = core.attribute(lm, text, target=target_arg(target), baseline=baseline, n_steps=int(n_steps), pair=pair,
                          tolerance=tolerance_arg(auto))
    faith = core.faithfulness(lm, attr)
    step(0.6, "[CLS] path through the layers")
    path = core.cls_path(lm, text, target=attr.target, baseline=baseline, n_steps=PATH_STEPS, pair=pair)
    return dataclasses.replace(rec, attribution=attr, path=path, faith=faith,
                               baseline_jumps=core.baseline_jumps(lm, baseline))


def analyze_all(lm: core.LoadedModel, text: str, pair: str | None, target: str | None, baseline: str,
                n_steps: int, progress: Callable[[float, str], Any] | None = None, auto: bool = False) -> Record:
    """predict + attention + [CLS] lens + attribution + [CLS] path, once."""
    rec = analyze_fast(lm, text, pair, progress)
    return analyze_ig(lm, rec, target, baseline, n_steps, progress, auto)


# --------------------------------------------------------------------------- token views
@dataclass(frozen=True)
class TokenView:
    """Which units to show (tokens or words) and which of them are [CLS]/[SEP]."""

    labels: list[str]
    special: np.ndarray  # (N,) bool
    groups: core.WordGroups | None  # set when word pieces were merged

    def keep(self, hide_specials: bool) -> np.ndarray:
        return np.flatnonzero(~self.special) if hide_specials and (~self.special).any() else np.arange(len(self.labels))


def token_view(info: core.TokenInfo, merge: bool) -> TokenView:
    special_tok = np.array([s is None for s in info.sequence_ids], dtype=bool)
    if not merge:
        return TokenView(list(info.tokens), special_tok, None)
    groups = core.word_groups(info)
    special = np.array([len(g) == 1 and special_tok[g[0]] for g in groups.groups], dtype=bool)
    return TokenView(list(groups.words), special, groups)


def view_matrix(weights: np.ndarray, view: TokenView, keep: np.ndarray) -> np.ndarray:
    """(..., T, T) -> (..., N, N) in the view's units, restricted to ``keep``."""
    w = np.asarray(weights, dtype=np.float32)
    if view.groups is not None:
        w = core.merge_attention(w, view.groups)
    return w[..., keep[:, None], keep[None, :]] if w.ndim >= 2 else w


def view_scores(scores: np.ndarray, view: TokenView, keep: np.ndarray | None = None) -> np.ndarray:
    """(..., T) -> (..., N): attributions summed over a word's pieces."""
    s = np.asarray(scores, dtype=np.float64)
    if view.groups is not None:
        s = core.merge_scores(s, view.groups)
    return s if keep is None else s[..., keep]


# --------------------------------------------------------------------------- coloured tokens
def tokens_html(labels: list[str], scores: np.ndarray, special: np.ndarray, attr: core.Attribution,
                title: str = "") -> str:
    """Tokens coloured by their attribution on the core's absolute scale (``core.colour_scale``:
    a share of f(x) - f(baseline), the same for every text), with its warning when the change is
    too small to read. Every piece of text is escaped by the core."""
    scale = core.colour_scale(attr)
    return core.tokens_html(labels, scores, special, attr.target, scale, title, core.change_warning(attr, scale))


CSS = """
.bv-tokens { line-height: 2.1; font-size: 1.05em; }
.bv-tok { padding: 2px 4px; border-radius: 4px; margin: 0 1px; white-space: pre-wrap; }
.bv-legend { margin-top: 6px; font-size: 0.85em; color: var(--body-text-color-subdued); line-height: 1.8; }
.bv-title { font-weight: 600; margin-bottom: 4px; }
.bv-warn { border-left: 4px solid #e69f00; padding: 4px 10px; margin: 6px 0; line-height: 1.5; }
"""
