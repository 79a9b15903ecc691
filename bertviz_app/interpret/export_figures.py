"""The coloured words of an attribution as a figure for a paper: vector SVG (each token a ``<text>``
on a coloured ``<rect>``, drawn by ``drawing.py``) and PNG (the same drawing through matplotlib), in
the colours of the HTML view (``export.token_background``), and the files the page offers for
download. The page's charts are exported in the browser (``ui/figures.py``)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..config import Settings
from ..results import MIXING_METHODS, Attribution
from .drawing import Box, Drawing, Group, Run, text_width, to_png, to_svg, wrap
from .export import (
    GREEN_RGB,
    MAGNITUDE_RGB,
    RED_RGB,
    ColourScale,
    attribution_units,
    change_warning,
    colour_scale,
    is_signed,
    prune,
    slug,
    token_background,
    write_bytes,
    write_text,
)

__all__ = ["tokens_drawing", "tokens_svg", "tokens_png", "attribution_tokens_svg", "attribution_tokens_png",
           "figure_name", "write_svg", "write_png", "figure_files"]

FIGURE_WIDTH = 760.0  # px: a page's text width; tokens wrap into lines of at most this
_SIZE, _SMALL, _PAD, _GAP, _LINE = 14.0, 12.0, 4.0, 5.0, 26.0  # font, legend font, box padding, gap, line pitch


def tokens_drawing(labels: Sequence[str], scores: Sequence[float] | np.ndarray, special: Sequence[bool] | np.ndarray,
                   target: str, scale: ColourScale, title: str = "", warning: str | None = None,
                   signed: bool = True, width: float = FIGURE_WIDTH, mixing: bool = False):
    """The coloured-token view of ``tokens_html`` as a ``drawing.Drawing``: every token a box in its
    colour (``token_background``, over white) with its text on it, wrapped into lines; the title, the
    warning and the legend (the scale's ``describe()``) as text around them."""
    s = np.asarray(scores, dtype=np.float64)
    items: list = []
    y = 8.0
    if title:
        for line in wrap(str(title), width, _SIZE + 1, bold=True):
            y += _LINE - 4
            items.append(Run(10, y, line, _SIZE + 1, bold=True, cls="bv-title"))
    if warning:
        for line in wrap(f"Warning: {warning}", width, _SMALL):
            y += _SMALL + 6
            items.append(Run(10, y, line, _SMALL, colour="#8a5a00", cls="bv-warn"))
    x, top, right = 10.0, y + 8, 10.0 + width
    for lab, v, sp in zip(labels, s, special):
        size = _SIZE * 0.85 if sp else _SIZE
        w = text_width(str(lab), size) + 2 * _PAD
        if x > 10 and x + w > right:  # the next line
            x, top = 10.0, top + _LINE
        rgb, opacity = token_background(v, scale, signed)
        value = f"{v:+.4f}" if signed else f"{v:.4f}"
        items.append(Group("bv-tok", f"{lab}: {value}", (
            Box(x, top, w, _LINE - 6, rgb, round(opacity, 2), radius=3),
            Run(x + _PAD, top + _LINE - 11, str(lab), size, colour="#777777" if sp else "#111111"))))
        x += w + _GAP
    y = top + _LINE + 12
    t = str(target)
    if signed:
        keys = [(GREEN_RGB, "green", f"pushes towards {t}"), (RED_RGB, "red", f"pushes away from {t}")]
    elif mixing:  # a context-mixing measure's [CLS] row, as in tokens_html
        keys = [(MAGNITUDE_RGB, "blue", "how much the last layer's [CLS] takes from the token (a share: no "
                                         "direction, the same for every class)")]
    else:
        keys = [(MAGNITUDE_RGB, "blue", f"how strongly the output for {t} reacts to the token (a magnitude, "
                                         "no direction)")]
    x = 10.0
    for rgb, name, meaning in keys:
        sw = text_width(name, _SMALL) + 2 * _PAD
        items.append(Box(x, y - _SMALL, sw, _SMALL + 5, rgb, 0.7, radius=3, cls="bv-legend"))
        items.append(Run(x + _PAD, y, name, _SMALL, cls="bv-legend"))
        items.append(Run(x + sw + 4, y, meaning, _SMALL, colour="#444444", cls="bv-legend"))
        x += sw + 4 + text_width(meaning, _SMALL) + 14
    for line in wrap(scale.describe(), width, _SMALL):
        y += _SMALL + 6
        items.append(Run(10, y, line, _SMALL, colour="#444444", cls="bv-legend"))
    widest = max([it.x + it.width for it in items if isinstance(it, Run)] + [right])
    return Drawing(widest + 10, y + 10, items, title=title or f"Tokens coloured by their attribution to {t}")


def tokens_svg(labels: Sequence[str], scores: Sequence[float] | np.ndarray, special: Sequence[bool] | np.ndarray,
               target: str, scale: ColourScale, title: str = "", warning: str | None = None,
               signed: bool = True, mixing: bool = False) -> str:
    """``tokens_html`` as a standalone vector SVG: each token a ``<text>`` on a ``<rect>`` of the same
    colour as in the HTML view, its exact value as the tooltip; every string XML-escaped."""
    return to_svg(tokens_drawing(labels, scores, special, target, scale, title, warning, signed, mixing=mixing))


def tokens_png(labels: Sequence[str], scores: Sequence[float] | np.ndarray, special: Sequence[bool] | np.ndarray,
               target: str, scale: ColourScale, title: str = "", warning: str | None = None,
               signed: bool = True, dpi_scale: float = 2.0, mixing: bool = False) -> bytes:
    """The same figure as ``tokens_svg`` as PNG bytes (matplotlib), ``dpi_scale`` pixels per SVG px."""
    return to_png(tokens_drawing(labels, scores, special, target, scale, title, warning, signed, mixing=mixing),
                  dpi_scale)


def _figure_args(attr: Attribution, merge: bool, title: str | None, min_change: float) -> tuple:
    scale = colour_scale(attr, min_change)
    labels, scores, special = attribution_units(attr, merge)
    if title is None:
        unit = "Words" if merge else "Tokens"
        title = f"{unit} coloured by {attr.method.replace('_', ' ')} towards \u201c{attr.target}\u201d"
    return (labels, scores, special, attr.target, scale, title, change_warning(attr, scale, scores),
            is_signed(attr.method))


def attribution_tokens_svg(attr: Attribution, merge: bool = True, title: str | None = None,
                           min_change: float = Settings.min_change) -> str:
    """``tokens_svg`` for an attribution on its absolute scale (the HTML view's), with the too-small warning."""
    return tokens_svg(*_figure_args(attr, merge, title, min_change), mixing=attr.method in MIXING_METHODS)


def attribution_tokens_png(attr: Attribution, merge: bool = True, title: str | None = None,
                           min_change: float = Settings.min_change, dpi_scale: float = 2.0) -> bytes:
    """``attribution_tokens_svg``'s figure as PNG bytes."""
    return tokens_png(*_figure_args(attr, merge, title, min_change), dpi_scale=dpi_scale,
                      mixing=attr.method in MIXING_METHODS)


def figure_name(attr: Attribution) -> str:
    """A file name (no suffix) that says what the figure holds: ``attributions_integrated_gradients``."""
    return f"attributions_{slug(attr.method, 60).replace('-', '_')}"



def write_svg(path: str | os.PathLike, attr: Attribution, merge: bool = True, title: str | None = None,
              min_change: float = Settings.min_change) -> Path:
    """Save ``attribution_tokens_svg`` (the coloured tokens as vector SVG) to ``path``; returns the path."""
    return write_text(path, attribution_tokens_svg(attr, merge, title, min_change))


def write_png(path: str | os.PathLike, attr: Attribution, merge: bool = True, title: str | None = None,
              min_change: float = Settings.min_change, dpi_scale: float = 2.0) -> Path:
    """Save ``attribution_tokens_png`` (the coloured tokens as PNG) to ``path``; returns the path."""
    return write_bytes(path, attribution_tokens_png(attr, merge, title, min_change, dpi_scale))


def figure_files(folder: str | os.PathLike, attr: Attribution, merge: bool = True, keep_s: float | None = None,
                 min_change: float = Settings.min_change) -> tuple[Path, Path]:
    """Write the coloured tokens as SVG and PNG into a folder of ``folder`` named by a hash of the
    content, under names that say what they hold (``figure_name``: attributions_integrated_gradients.svg,
    .png), so the downloads keep those names. ``keep_s``: as ``export_files``. Returns (svg, png)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if keep_s is not None:
        prune(folder, keep_s)
    svg = attribution_tokens_svg(attr, merge, None, min_change)
    sub = folder / f"explanation-figures-{hashlib.sha256(svg.encode('utf-8')).hexdigest()[:12]}"
    sub.mkdir(exist_ok=True)
    name = figure_name(attr)
    png = sub / f"{name}.png"
    if not png.exists():  # the same figure exported twice is drawn once
        write_bytes(png, attribution_tokens_png(attr, merge, None, min_change))
    return write_text(sub / f"{name}.svg", svg), png
