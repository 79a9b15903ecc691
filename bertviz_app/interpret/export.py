"""Honest colours for attributions, and explanations saved as files (standalone HTML, JSON).

numpy only (never torch, gradio or plotly): the UI, the CLI and ``plots`` all colour tokens
with the same ``ColourScale``.

**Colour scale.** Integrated Gradients splits the change ``f(x) - f(baseline)`` among the tokens,
so a score is drawn as a share of that change: full colour means one token accounts for the
whole change. The change is floored at ``Settings.min_change`` (logits: 4x it), so when the text
moves the output by almost nothing the colours stay pale instead of being stretched to look like
evidence (unless single tokens score that much on their own and cancel each other out), and
``change_warning`` says which of the two in words. Only where no change is known (bare scores)
does the scale fall back to the largest score of the text, and then it says so and prints that
maximum.

**Files.** ``explanation_html`` is one self-contained page: inline CSS, no script, no external
font or link, and a Content-Security-Policy that forbids fetching anything; every piece of text
is HTML-escaped. ``explanation_dict`` is ``Attribution.to_dict()`` plus the prediction, the model
and what is needed to read the file back (``explanation_from_dict``).
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import Settings
from ..errors import InputError
from ..results import MIXING_METHODS, NO_COMPLETENESS, Attribution, Faithfulness, Prediction, TokenInfo
from .words import merge_scores, word_groups

__all__ = [
    "ColourScale",
    "Explanation",
    "colour_scale",
    "per_text_scale",
    "change_warning",
    "is_signed",
    "tokens_html",
    "attribution_tokens_html",
    "token_background",
    "attribution_units",
    "explanation_html",
    "explanation_json",
    "explanation_dict",
    "explanation_from_dict",
    "write_html",
    "write_json",
    "write_text",
    "write_bytes",
    "export_files",
    "check_output_path",
    "slug",
    "prune",
]

FORMAT = "bertviz_app.explanation"
VERSION = 1
# d softmax_i / d logit_i = p_i (1 - p_i) <= 1/4, so a logit change of 4 * m moves the probability
# by at most about m: the same "too small to read" line in the logit's units.
LOGIT_FACTOR = 4.0
# methods whose scores add up to f(x) - f(baseline) (completeness / SHAP's efficiency), so they can
# be drawn as shares of it; the others (gradients, occlusion drops, LIME weights) get a per-text scale
SHARES_OF_THE_CHANGE = ("integrated_gradients", "kernel_shap")
# methods whose scores are magnitudes (saliency: the norm of a gradient): they say how much a token
# matters, never in which direction, so they are drawn in one neutral colour with a legend that says so
# (and the context-mixing measures: how much [CLS] takes from each token)
UNSIGNED_METHODS = ("saliency", *MIXING_METHODS)
# per-text scales whose scores are changes of the explained output (a gradient times its input, an
# occlusion drop, a LIME weight): full colour is never drawn for less than the smallest change worth
# reading (Settings.min_change), so a near-constant model's 1e-6 wiggles stay pale
OUTPUT_UNIT_METHODS = ("gradient_x_input", "occlusion", "lime")
MAX_ALPHA = 0.85  # strongest background, so black text stays readable on it
GREEN_RGB, RED_RGB = "44, 160, 44", "214, 39, 40"
MAGNITUDE_RGB = "31, 119, 180"  # blue: no "for" or "against" in it
PALE = 0.5  # colours drawn at most this strong (of full) read as pale


# --------------------------------------------------------------------------- colour scale
@dataclass(frozen=True)
class ColourScale:
    """How strongly a score is drawn: ``alpha(score) = min(1, |score| / full)``.

    ``change`` is f(x) - f(baseline) (None for a per-text scale); ``threshold`` the smallest
    change worth reading, in the output's units (a per-text scale's floor; 0: none); ``largest`` a
    per-text scale's largest |score|."""

    full: float
    change: float | None
    threshold: float
    output: str = "prob"
    largest: float | None = None

    @property
    def below_floor(self) -> bool:
        """A per-text scale whose largest score is under its floor: every colour is drawn pale."""
        return self.change is None and self.largest is not None and self.largest < self.threshold

    @property
    def absolute(self) -> bool:
        return self.change is not None

    @property
    def too_small(self) -> bool:
        return self.change is not None and abs(self.change) < self.threshold

    def alpha(self, score: float) -> float:
        return float(min(1.0, abs(float(score)) / self.full)) if self.full > 0 else 0.0

    def describe(self) -> str:
        """One line saying what full colour means, with its number."""
        if self.below_floor:
            return (f"Per-text colour scale with a floor: the largest |attribution| in this text, {self.largest:.3g}, "
                    f"is below {self.threshold:g}, the smallest change in the output worth reading, so full colour = "
                    f"{self.threshold:g} and the words stay pale: the model barely moves on any word here.")
        if not self.absolute:
            return (f"Per-text colour scale: full colour = the largest |attribution| in this text, {self.full:.4g} "
                    "(no f(x) - f(baseline) to compare with, so colours are not comparable between texts).")
        what = "probability" if self.output == "prob" else self.output
        if self.too_small:  # what the colours look like depends on the scores: change_warning says it
            return (f"Colour scale: full colour = {self.full:.4g}, the smallest change in the {what} worth reading "
                    f"(more than the whole change here, {_num(self.change)}), so only a token whose own score is "
                    "that large is drawn in full colour.")
        return (f"Colour scale: full colour = {self.full:.4g}, the whole change f(x) - f(baseline) in the {what}: "
                "a token that accounts for all of it. The same scale for every text.")


def _threshold(output: str, min_change: float | None) -> float:
    if min_change is None:  # callers that pass None on mean the default
        min_change = Settings.min_change
    return float(min_change) * (LOGIT_FACTOR if output == "logit" else 1.0)


def per_text_scale(scores: Sequence[float] | np.ndarray, output: str = "", floor: float = 0.0) -> ColourScale:
    """The fallback where no f(x) - f(baseline) is known: full colour at the largest |score|, or at ``floor``
    (scores in the output's units: the smallest change worth reading) when that is larger."""
    s = np.abs(np.asarray(scores, dtype=np.float64))
    top = float(s.max()) if s.size else 0.0
    if not (top > 0 and math.isfinite(top)):
        return ColourScale(full=floor or 1.0, change=None, threshold=floor, output=output, largest=None)
    return ColourScale(full=max(top, floor), change=None, threshold=floor, output=output, largest=top)


def colour_scale(attr, min_change: float = Settings.min_change, output: str | None = None) -> ColourScale:
    """The absolute scale of an ``Attribution`` (or ``ClsPath``: anything with f_x and f_baseline):
    full colour at max(|f(x) - f(baseline)|, the threshold). ``min_change``: default Settings."""
    output = output or getattr(attr, "output", "prob")
    method = getattr(attr, "method", "integrated_gradients")
    threshold = _threshold(output, min_change)
    if method not in SHARES_OF_THE_CHANGE:  # saliency, occlusion...: not shares of f(x) - f(baseline)
        return per_text_scale(attr.scores, output, threshold if method in OUTPUT_UNIT_METHODS else 0.0)
    change = float(attr.f_x) - float(attr.f_baseline)
    if not math.isfinite(change):
        return per_text_scale(attr.scores, output)
    full = max(abs(change), threshold)
    if full <= 0:  # min_change = 0 and the text gives exactly the baseline's output
        return per_text_scale(attr.scores, output)
    return ColourScale(full=full, change=change, threshold=threshold, output=output)


def _num(x: float) -> str:
    """+0.0040, or +5.0e-06 where four decimals would print a misleading +0.0000."""
    return f"{x:+.4f}" if x == 0 or abs(x) >= 1e-4 else f"{x:+.1e}"


def is_signed(method: str) -> bool:
    """Whether a method's scores have a direction (for / against the target), not just a size."""
    return method not in UNSIGNED_METHODS


def change_warning(attr, scale: ColourScale | None = None,
                   drawn: Sequence[float] | np.ndarray | None = None) -> str | None:
    """Plain words when f(x) - f(baseline) is too small to read anything into; else None.

    ``drawn``: the scores as drawn (e.g. word pieces summed; default ``attr.scores``). The words
    describe those colours: pale when every one is at most half strength, else tokens whose large
    scores cancel each other out (a sentence pair whose texts pull opposite ways, for one)."""
    scale = scale or colour_scale(attr)
    if not scale.too_small:
        return None
    what = "probability" if scale.output == "prob" else scale.output
    head = (f"The text changes the {what} of \u201c{attr.target}\u201d by only {_num(scale.change)} from the baseline "
            f"(less than {scale.threshold:g})")
    s = np.abs(np.asarray(attr.scores if drawn is None else drawn, dtype=np.float64))
    top = float(s.max()) if s.size else 0.0
    if scale.alpha(top) <= PALE:
        return (f"{head}: the model reads this text almost like the empty input, so there is almost nothing to "
                "attribute. Do not read much into these scores; the colours are kept pale on purpose.")
    return (f"{head}, yet single tokens score up to \u00b1{top:.4g}: their pushes towards and away from "
            f"\u201c{attr.target}\u201d cancel each other out, and the strong colours show those pushes, not a "
            "net effect. The change they add up to is too small to read anything into.")


# --------------------------------------------------------------------------- coloured tokens
def attribution_units(attr: Attribution, merge: bool) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(labels, scores, special) in tokens, or in words (pieces summed) when ``merge``."""
    special_tok = np.array([s is None for s in attr.info.sequence_ids], dtype=bool)
    scores = np.asarray(attr.scores, dtype=np.float64)  # (T,)
    if not merge:
        return list(attr.tokens), scores, special_tok
    groups = word_groups(attr.info)
    special = np.array([len(g) == 1 and special_tok[g[0]] for g in groups.groups], dtype=bool)
    return list(groups.words), merge_scores(scores, groups), special  # (W,)


def token_background(score: float, scale: ColourScale, signed: bool = True) -> tuple[str, float]:
    """A token's background: ("r, g, b", opacity) drawn over white, the same in the HTML and the SVG views."""
    rgb = MAGNITUDE_RGB if not signed else GREEN_RGB if score > 0 else RED_RGB
    return rgb, scale.alpha(score) * MAX_ALPHA


def tokens_html(labels: Sequence[str], scores: Sequence[float] | np.ndarray, special: Sequence[bool] | np.ndarray,
                target: str, scale: ColourScale, title: str = "", warning: str | None = None,
                signed: bool = True, mixing: bool = False) -> str:
    """Tokens on a green (for the target) / red (against) background whose strength is
    ``scale.alpha(score)``; the legend prints the scale. ``signed=False`` (a magnitude, e.g.
    saliency): one blue for every token, and a legend saying the colour is a size, not a direction.
    Every piece of text is escaped; the hover (title attribute) gives the exact value. Classes:
    bv-tokens, bv-tok, bv-legend, bv-warn."""
    s = np.asarray(scores, dtype=np.float64)
    spans = []
    for lab, v, sp in zip(labels, s, special):
        rgb, opacity = token_background(v, scale, signed)
        style = f"background: rgba({rgb}, {opacity:.2f});"
        if sp:
            style += " color: #777; font-size: 0.85em;"
        value = f"{v:+.4f}" if signed else f"{v:.4f}"
        spans.append(f'<span class="bv-tok" style="{style}" title="{html.escape(str(lab), quote=True)}: {value}">'
                     f"{html.escape(str(lab))}</span>")
    t = html.escape(str(target))
    if signed:
        key = (f'<span class="bv-tok" style="background: rgba({GREEN_RGB}, 0.7)">green</span> '
               f"pushes towards <b>{t}</b> · "
               f'<span class="bv-tok" style="background: rgba({RED_RGB}, 0.7)">red</span> '
               f"pushes away from <b>{t}</b>")
    elif mixing:  # a context-mixing measure's [CLS] row: the same whatever the class
        key = (f'<span class="bv-tok" style="background: rgba({MAGNITUDE_RGB}, 0.7)">blue</span> '
               "how much the last layer's [CLS] takes from the token (a share: no direction, and the same for "
               "every class)")
    else:
        key = (f'<span class="bv-tok" style="background: rgba({MAGNITUDE_RGB}, 0.7)">blue</span> '
               f"how strongly the output for <b>{t}</b> reacts to the token: a magnitude with no direction (it does "
               "not say whether the token speaks for or against the class)")
    legend = f'<div class="bv-legend">{key} · hover a token for its value.<br>{html.escape(scale.describe())}</div>'
    head = f"<div class='bv-title'>{html.escape(title)}</div>" if title else ""
    warn = f'<div class="bv-warn"><b>Warning:</b> {html.escape(warning)}</div>' if warning else ""
    return f'<div class="bv-tokens">{head}{warn}<div class="bv-line">{" ".join(spans)}</div>{legend}</div>'


def attribution_tokens_html(attr: Attribution, merge: bool = True, title: str = "",
                            min_change: float = Settings.min_change) -> str:
    """``tokens_html`` for an attribution on its absolute scale, with the too-small warning."""
    scale = colour_scale(attr, min_change)
    labels, scores, special = attribution_units(attr, merge)
    return tokens_html(labels, scores, special, attr.target, scale, title, change_warning(attr, scale, scores),
                       signed=is_signed(attr.method), mixing=attr.method in MIXING_METHODS)


# --------------------------------------------------------------------------- JSON
@dataclass(frozen=True, eq=False)
class Explanation:
    """What an explanation file holds (``explanation_from_dict`` reads one back)."""

    attribution: Attribution
    prediction: Prediction | None
    model: str
    faithfulness: Faithfulness | None = None


def _finite(x: float | None) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def explanation_dict(attr: Attribution, prediction: Prediction | None = None, model: str = "",
                     min_change: float = Settings.min_change, faith: Faithfulness | None = None,
                     windows: Sequence[dict] | None = None) -> dict:
    """``attr.to_dict()`` (under "attribution") plus the prediction, the model, the input text
    with its token offsets, the colour scale and (``faith``) its ERASER faithfulness. JSON-safe:
    non-finite numbers become null. ``windows``: a long document explained in windows
    (``long_documents``): each window's prediction and numbers (``WindowResult.to_dict``), kept
    under "windows" with how many were read."""
    scale = colour_scale(attr, min_change)
    a = attr.to_dict()
    a["relative_delta"] = _finite(a["relative_delta"])
    a["target_index"] = attr.target_index
    pred = None
    if prediction is not None:
        pred = prediction.to_dict() | {"n_tokens": prediction.n_tokens, "multi_label": prediction.multi_label}
    info = attr.info
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": model,
        "method": attr.method,
        "attribution": a,
        "input": {"text": info.text, "pair": info.pair, "offsets": [list(o) for o in info.offsets],
                  "sequence_ids": list(info.sequence_ids), "truncated": info.truncated},
        "prediction": pred,
        "colour_scale": {"full": scale.full, "absolute": scale.absolute, "change": scale.change,
                         "threshold": scale.threshold, "too_small": scale.too_small},
        "warning": change_warning(attr, scale),
        "faithfulness": None if faith is None else faith.to_dict(),
        **({} if windows is None else {"windows": {"count": len(windows), "predictions": [dict(w) for w in windows],
                                                   "scores_sum": float(np.sum(attr.scores, dtype=np.float64))}}),
    }


def _delta(a: dict) -> float:
    """The record's delta; a context-mixing measure's file has none (null): its identity
    f(x) - f(baseline) - sum(scores)."""
    if a.get("delta") is None:
        return float(a["f_x"]) - float(a["f_baseline"]) - float(np.sum(np.asarray(a["attributions"], dtype=np.float32)))
    return float(a["delta"])


def explanation_from_dict(d: dict) -> Explanation:
    """Read back what ``explanation_dict`` wrote (e.g. ``json.load`` of a saved file)."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise InputError(f"Not an explanation file (expected \"format\": \"{FORMAT}\").")
    a, src = d["attribution"], d["input"]
    info = TokenInfo(tokens=tuple(a["tokens"]), offsets=tuple(tuple(o) for o in src["offsets"]),
                     sequence_ids=tuple(src["sequence_ids"]), text=src["text"], pair=src["pair"],
                     truncated=bool(src["truncated"]))
    attr = Attribution(info=info, scores=np.asarray(a["attributions"], dtype=np.float32), target=a["target"],
                       target_index=int(a["target_index"]), output=a["output"], f_x=float(a["f_x"]),
                       f_baseline=float(a["f_baseline"]), delta=_delta(a), n_steps=int(a["n_steps"]),
                       baseline=a["baseline"], method=a.get("method", "integrated_gradients"),
                       n_forward=int(a.get("n_forward", 0)), n_backward=int(a.get("n_backward", 0)),
                       seconds=float(a.get("seconds", 0.0)),
                       tolerance=None if a.get("tolerance") is None else float(a["tolerance"]))
    pred = None
    if d.get("prediction"):
        p = d["prediction"]
        pred = Prediction(text=p["text"], pair=p.get("pair"), labels=tuple(p["scores"]),
                          probs=tuple(float(v) for v in p["scores"].values()), label=p["label"],
                          truncated=bool(p["truncated"]), n_tokens=int(p.get("n_tokens", len(info))),
                          multi_label=bool(p.get("multi_label", False)), windows=int(p.get("windows", 1)))
    f = d.get("faithfulness")
    faith = None if not f else Faithfulness(
        method=f["method"], target=f["target"], ks=tuple(f["ks"]), n_tokens=tuple(f["n_tokens"]),
        comprehensiveness_k=tuple(f["comprehensiveness_k"]), sufficiency_k=tuple(f["sufficiency_k"]),
        comprehensiveness=float(f["comprehensiveness"]), sufficiency=float(f["sufficiency"]), p_x=float(f["p_x"]),
        reading=f["reading"])
    return Explanation(attr, pred, d.get("model", ""), faith)


def explanation_json(attr: Attribution, prediction: Prediction | None = None, model: str = "",
                     min_change: float = Settings.min_change, faith: Faithfulness | None = None,
                     windows: Sequence[dict] | None = None) -> str:
    return json.dumps(explanation_dict(attr, prediction, model, min_change, faith, windows), ensure_ascii=False,
                      indent=1, allow_nan=False) + "\n"


# --------------------------------------------------------------------------- standalone HTML
_PAGE_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Arial, sans-serif; margin: 2em auto; max-width: 60em;
       padding: 0 1em; color: #222; background: #fff; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
.bv-tokens { line-height: 2.1; font-size: 1.05em; }
.bv-tok { padding: 2px 4px; border-radius: 4px; margin: 0 1px; white-space: pre-wrap; }
.bv-legend { margin-top: 6px; font-size: 0.85em; color: #555; line-height: 1.8; }
.bv-title { font-weight: 600; margin-bottom: 4px; }
.bv-warn { border-left: 4px solid #e69f00; background: #fff6e0; padding: 6px 10px; margin: 8px 0; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 10px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; font-family: ui-monospace, monospace; }
.text { white-space: pre-wrap; }
"""
# Defence in depth: even if some text slipped through unescaped, the page may fetch nothing
# and run no script.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


METHOD_TEXT = {
    "integrated_gradients": ("Integrated Gradients (Captum) on the word embeddings, along the [CLS] path to the "
                             "classifier"),
    "gradient_x_input": "gradient \u00d7 input on the word embeddings (one backward pass)",
    "saliency": "saliency: the L2 norm of the gradient on each word embedding (one backward pass; no sign)",
    "occlusion": "occlusion: the output's drop when each word is replaced by the baseline token",
    "kernel_shap": "KernelSHAP (Captum) over words, each kept or replaced by the baseline token",
    "lime": "LIME (Captum) over words, each kept or replaced by the baseline token",
    "raw": "raw attention: the heads' mean weights aggregated by rollout, the last layer's [CLS] row",
    "norm": "attention-norm (Kobayashi et al. 2020) aggregated across layers, the last layer's [CLS] row",
    "value_zeroing": "value zeroing (Mohebbi et al. 2023) aggregated across layers, the last layer's [CLS] row",
    "alti": "ALTI (Ferrando et al. 2022) aggregated across layers, the last layer's [CLS] row",
}


def _page_facts(attr: Attribution, model: str, what: str, change: float, faith: Faithfulness | None,
                windows: Sequence[dict] | None) -> list[tuple[str, str]]:
    """The page's "Numbers" table as (name, HTML value) rows."""
    rel = attr.relative_delta
    facts = [
        ("Model", _e(model or "(not given)")),
        ("Method", _e(METHOD_TEXT.get(attr.method, attr.method))),
        ("Target class", _e(attr.target)),
        ("Explained output", _e(what)),
        ("Baseline", f"{_e(attr.baseline)} (n_steps {attr.n_steps}"
                     + (f", chosen for a relative delta \u2264 {attr.tolerance:g})" if attr.tolerance is not None
                        else ", fixed)" if attr.method == "integrated_gradients" else ")")),
        ("f(x)", f"{attr.f_x:.6f}"),
        ("f(baseline)", f"{attr.f_baseline:.6f}"),
        *([("f(x) \u2212 f(baseline)", f"{change:+.6f} (what the attributions add up to)"),
           ("Convergence delta", f"{attr.delta:+.3e}"),
           ("Relative delta", f"{rel:.2%}" if math.isfinite(rel) else "undefined (no change to compare with)")]
          if attr.has_completeness else
          [("f(x) \u2212 f(baseline)", f"{change:+.6f}"), ("Completeness", _e(NO_COMPLETENESS))]),
        ("Text", f'<span class="text">{_e(attr.info.text)}</span>'),
    ]
    if faith is not None:
        ks = ", ".join(str(k) for k in faith.ks)
        facts += [
            ("Comprehensiveness (ERASER AOPC)", f"{faith.comprehensiveness:+.4f}: the probability lost when the top "
                                                f"{ks}% of tokens are removed (higher = more faithful)"),
            ("Sufficiency (ERASER AOPC)", f"{faith.sufficiency:+.4f}: the probability lost when only they are kept "
                                          "(lower = more faithful)"),
            ("Faithfulness, read plainly", _e(faith.reading)),
        ]
    if attr.info.pair is not None:
        facts.append(("Second text", f'<span class="text">{_e(attr.info.pair)}</span>'))
    if attr.info.truncated:
        facts.append(("Truncated", "yes: only the first tokens the model reads were explained"))
    if windows is not None:
        facts = [f for f in facts if not f[0].startswith(("f(x)", "f(baseline)", "Convergence", "Relative"))]
        facts += [
            ("Windows", f"{len(windows)}: the text was read in overlapping windows, each explained alone; a token "
                        "read by two windows gets their scores' mean, weighted by its distance from each window's "
                        "edge"),
            ("f(x), f(baseline)", f"{attr.f_x:.6f}, {attr.f_baseline:.6f} (the windows' means: each window's scores "
                                  "add up to its own change, listed below)"),
            ("Sum of the merged scores", f"{float(np.sum(attr.scores, dtype=np.float64)):+.6f} (not a change of any "
                                         "one input)"),
            ("Worst window's relative delta", f"{rel:.2%}" if math.isfinite(rel) else "undefined"),
        ]
    return facts


def _prediction_html(prediction: Prediction | None) -> str:
    """The page's "Prediction" table ("" without a prediction)."""
    if prediction is None:
        return ""
    rows = "".join(f"<tr><td>{_e(lab)}</td><td class='num'>{p:.4f}</td></tr>"
                   for lab, p in zip(prediction.labels, prediction.probs))
    return (f"<h2>Prediction: {_e(prediction.label)}</h2><table><tr><th>class</th><th>probability</th></tr>"
            f"{rows}</table>")


def _windows_html(windows: Sequence[dict] | None) -> str:
    """The page's "Windows" table of a long document ("" for one window)."""
    if windows is None:
        return ""

    def _rel(x):
        return "" if x is None else f"{x:.2%}"

    rows = "".join(
        f"<tr><td class='num'>{w['index']}</td><td>{_e(w['label'])}</td>"
        f"<td>{_e(', '.join(f'{k} {v:.4f}' for k, v in w['scores'].items()))}</td>"
        f"<td class='num'>{w['tokens'][0]}\u2013{w['tokens'][1] - 1}</td>"
        f"<td class='num'>{_e(w.get('f_x', ''))}</td><td class='num'>{_e(w.get('f_baseline', ''))}</td>"
        f"<td class='num'>{_e(_rel(w.get('relative_delta')))}</td></tr>" for w in windows)
    return ("<h2>Windows</h2><table><tr><th>#</th><th>prediction</th><th>probabilities</th><th>tokens</th>"
            f"<th>f(x)</th><th>f(baseline)</th><th>relative delta</th></tr>{rows}</table>")


def _every_token_html(attr: Attribution, change: float) -> str:
    """The page's "Every token" table: each token's attribution and its share of the change."""
    share = (lambda v: f"{v / change:+.1%}") if abs(change) > 1e-12 and attr.has_completeness else (lambda v: "")
    tok_rows = "".join(
        f"<tr><td class='num'>{i}</td><td>{_e(tok)}</td><td class='num'>{float(v):+.6f}</td>"
        f"<td class='num'>{share(float(v))}</td></tr>"
        for i, (tok, v) in enumerate(zip(attr.tokens, np.asarray(attr.scores, dtype=np.float64))))
    return ("<h2>Every token</h2><table><tr><th>#</th><th>token</th><th>attribution</th>"
            f"<th>share of the change</th></tr>{tok_rows}</table>")


def explanation_html(attr: Attribution, prediction: Prediction | None = None, model: str = "", merge: bool = True,
                     min_change: float = Settings.min_change, faith: Faithfulness | None = None,
                     windows: Sequence[dict] | None = None) -> str:
    """One standalone page: coloured words (or tokens), method, target, f(x), f(baseline),
    change, delta and relative delta, (``faith``) the ERASER faithfulness with its reading, the
    model, the prediction, and a table of every token with its attribution. Opens offline; all
    text escaped. ``windows`` (a long document, ``explanation_dict``): a table of the windows, and the
    numbers say that f(x) and f(baseline) are the windows' means, not what the merged scores add up to."""
    scale = colour_scale(attr, min_change)
    labels, scores, special = attribution_units(attr, merge)
    warning = change_warning(attr, scale, scores)
    unit = "word" if merge else "token"
    coloured = tokens_html(labels, scores, special, attr.target, scale,
                           title=f"{unit.capitalize()}s coloured by their attribution to \u201c{attr.target}\u201d",
                           warning=warning, signed=is_signed(attr.method), mixing=attr.method in MIXING_METHODS)
    what = "probability" if attr.output == "prob" else attr.output
    change = attr.f_x - attr.f_baseline
    facts = _page_facts(attr, model, what, change, faith, windows)
    facts_rows = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Explanation: {_e(attr.target)} \u2014 {_e(model or 'bertviz_app')}</title>"
        f"<style>{_PAGE_CSS}</style></head><body>"
        f"<h1>Why the model gives \u201c{_e(attr.target)}\u201d this {_e(what)}</h1>"
        f"{coloured}<h2>Numbers</h2><table>{facts_rows}</table>{_prediction_html(prediction)}"
        f"{_windows_html(windows)}{_every_token_html(attr, change)}"
        "</body></html>\n"
    )


# --------------------------------------------------------------------------- files
def check_output_path(path: str | os.PathLike) -> Path:
    """The path a file will be written to, or InputError saying why it cannot be (call it before
    a long computation whose result is to be saved there)."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise InputError(f"Cannot write {p}: it is a folder; give a file name inside it.")
    if not p.parent.is_dir():
        raise InputError(f"Cannot write {p}: the folder {p.parent} does not exist.")
    if not os.access(p.parent, os.W_OK):
        raise InputError(f"Cannot write {p}: permission denied. Choose a file in a folder you can write to.")
    return p


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` as UTF-8 (whole or not at all); a bad path raises InputError saying why."""
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` (whole or not at all); a bad path raises InputError saying why."""
    p = check_output_path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
        tmp = None
    except OSError as exc:
        why = "permission denied" if isinstance(exc, PermissionError) else (exc.strerror or str(exc))
        raise InputError(f"Cannot write {p}: {why}. Choose a file in a folder you can write to.") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return p


def write_html(path: str | os.PathLike, attr: Attribution, prediction: Prediction | None = None, model: str = "",
               merge: bool = True, min_change: float = Settings.min_change, faith: Faithfulness | None = None,
               windows: Sequence[dict] | None = None) -> Path:
    """Save ``explanation_html`` to ``path``; returns the path."""
    return write_text(path, explanation_html(attr, prediction, model, merge, min_change, faith, windows))


def write_json(path: str | os.PathLike, attr: Attribution, prediction: Prediction | None = None, model: str = "",
               min_change: float = Settings.min_change, faith: Faithfulness | None = None,
               windows: Sequence[dict] | None = None) -> Path:
    """Save ``explanation_dict`` as JSON to ``path``; returns the path."""
    return write_text(path, explanation_json(attr, prediction, model, min_change, faith, windows))


def slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:limit] or "class"


def export_files(folder: str | os.PathLike, attr: Attribution, prediction: Prediction | None = None, model: str = "",
                 merge: bool = True, keep_s: float | None = None,
                 faith: Faithfulness | None = None, min_change: float = Settings.min_change,
                 windows: Sequence[dict] | None = None) -> tuple[Path, Path]:
    """Write the HTML and JSON files of one explanation into ``folder`` (created if needed) under
    names made from the target and a hash of the content, so the same explanation exported
    twice is one pair of files. ``keep_s``: first delete this folder's explanation files older
    than that many seconds (a server's export folder stays small); ``min_change``: the colour scale's
    floor (the model's settings); ``windows``: a long document's windows (``explanation_dict``).
    Returns (html_path, json_path)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if keep_s is not None:
        prune(folder, keep_s)
    page = explanation_html(attr, prediction, model, merge, min_change, faith=faith, windows=windows)
    data = explanation_json(attr, prediction, model, min_change, faith=faith, windows=windows)
    digest = hashlib.sha256((page + data).encode("utf-8")).hexdigest()[:12]
    stem = f"explanation-{slug(attr.target)}-{digest}"
    return write_text(folder / f"{stem}.html", page), write_text(folder / f"{stem}.json", data)


def prune(folder: Path, keep_s: float, pattern: str = "explanation-*") -> None:
    """Delete the files (or folders) in ``folder`` matching ``pattern`` older than ``keep_s``
    seconds, so a server's export folder stays small."""
    import shutil
    import time

    cutoff = time.time() - keep_s
    for f in folder.glob(pattern):
        try:
            if f.stat().st_mtime >= cutoff:
                continue
            if f.is_dir():
                shutil.rmtree(f, ignore_errors=True)
            else:
                f.unlink()
        except OSError:  # another process removed it first
            pass
