"""A figure as a list of boxes and text runs, written as vector SVG (by hand) or PNG (matplotlib).

Used for the coloured-token view (``export_figures.tokens_svg`` / ``tokens_png``): text stays text
(``<text>`` elements a reader can select and search), every box is a ``<rect>``, nothing is
embedded as a bitmap. Stdlib only; matplotlib is imported only to draw a PNG.

**Text widths.** Laying tokens out in lines needs their widths before any renderer sees them, so
they are measured with the advance widths of DejaVu Sans (the font matplotlib ships, and the first
the SVG asks for). Each SVG text run also carries ``textLength``, so a viewer that substitutes
another font still fits the run into its box instead of overrunning the next token.

**Untrusted text.** Every string is XML-escaped (``&``, ``<``, ``>``, both quotes) and characters
XML 1.0 cannot hold (controls other than tab/newline, lone surrogates) become U+FFFD, so the file
always parses; otherwise the text comes back as given (``xml:space="preserve"`` keeps its spaces).
"""

from __future__ import annotations

import io
import re
import unicodedata
from dataclasses import dataclass

__all__ = ["Box", "Run", "Group", "Drawing", "text_width", "wrap", "xml_text", "to_svg", "to_png"]

FONT_FAMILY = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
# DejaVu Sans advance widths of the printable ASCII characters (32..126), in hundredths of an em
# (read from the font with matplotlib's FreeType; bold runs are ~10% wider).
_ASCII = (32, 40, 46, 84, 64, 95, 78, 27, 39, 39, 50, 84, 32, 36, 32, 34, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 34,
          34, 84, 84, 84, 53, 100, 68, 69, 70, 77, 63, 58, 77, 75, 29, 29, 66, 56, 86, 75, 79, 60, 79, 69, 63, 61, 73,
          68, 99, 69, 61, 69, 39, 34, 39, 84, 50, 50, 61, 63, 55, 63, 62, 35, 63, 63, 28, 28, 58, 28, 97, 63, 61, 63,
          63, 41, 52, 39, 63, 59, 82, 59, 59, 52, 64, 34, 64, 84)
BOLD_FACTOR = 1.1
# XML 1.0 Char: tab, newline, carriage return, U+0020..U+D7FF, U+E000..U+FFFD, U+10000..U+10FFFF
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _char_em(ch: str) -> float:
    o = ord(ch)
    if 32 <= o < 127:
        return _ASCII[o - 32] / 100
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0.0
    return 1.0 if unicodedata.east_asian_width(ch) in ("W", "F") else 0.62


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Width in px of ``text`` at ``size`` px (DejaVu Sans metrics)."""
    return sum(_char_em(c) for c in str(text)) * size * (BOLD_FACTOR if bold else 1.0)


def wrap(text: str, width: float, size: float, bold: bool = False) -> list[str]:
    """``text`` broken at spaces into lines at most ``width`` px wide (a longer word gets a line of its own)."""
    lines: list[str] = []
    line = ""
    for word in str(text).split(" "):
        trial = f"{line} {word}" if line else word
        if line and text_width(trial, size, bold) > width:
            lines.append(line)
            line = word
        else:
            line = trial
    lines.append(line)
    return lines


def xml_text(text: object) -> str:
    """``text`` safe inside an XML element or a quoted attribute."""
    s = _NOT_XML.sub("\ufffd", str(text))
    for raw, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&#39;")):
        s = s.replace(raw, entity)
    return s


@dataclass(frozen=True)
class Box:
    """A filled rectangle; ``rgb`` "r, g, b" (0-255) drawn at ``opacity`` over what is below."""

    x: float
    y: float
    w: float
    h: float
    rgb: str
    opacity: float = 1.0
    radius: float = 0.0
    cls: str = ""
    title: str = ""  # a tooltip (SVG <title>)


@dataclass(frozen=True)
class Run:
    """One line of text whose baseline starts at (x, y); ``width`` its measured width (``text_width``)."""

    x: float
    y: float
    text: str
    size: float
    colour: str = "#222222"
    bold: bool = False
    cls: str = ""

    @property
    def width(self) -> float:
        return text_width(self.text, self.size, self.bold)


@dataclass(frozen=True)
class Group:
    """Items drawn together under one tooltip, e.g. one token's box and its text."""

    cls: str
    title: str
    items: tuple


@dataclass
class Drawing:
    """``items`` drawn in order on a white ``width`` x ``height`` px page; ``title`` names the figure."""

    width: float
    height: float
    items: list
    title: str = ""


def _n(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _svg_item(it: Box | Run | Group) -> str:
    if isinstance(it, Box):
        tip = f"<title>{xml_text(it.title)}</title>" if it.title else ""
        cls = f' class="{xml_text(it.cls)}"' if it.cls else ""
        rx = f' rx="{_n(it.radius)}"' if it.radius else ""
        op = f' fill-opacity="{it.opacity:.2f}"' if it.opacity < 1 else ""
        rect = (f'<rect{cls} x="{_n(it.x)}" y="{_n(it.y)}" width="{_n(it.w)}" height="{_n(it.h)}"{rx} '
                f'fill="rgb({it.rgb})"{op}')
        return f"{rect}>{tip}</rect>" if tip else f"{rect}/>"
    if isinstance(it, Run):
        cls = f' class="{xml_text(it.cls)}"' if it.cls else ""
        weight = ' font-weight="bold"' if it.bold else ""
        fit = (f' textLength="{_n(it.width)}" lengthAdjust="spacingAndGlyphs"' if it.width > 0 else "")
        return (f'<text{cls} x="{_n(it.x)}" y="{_n(it.y)}" font-size="{_n(it.size)}" fill="{it.colour}"{weight}'
                f'{fit} xml:space="preserve">{xml_text(it.text)}</text>')
    head = f"<title>{xml_text(it.title)}</title>" if it.title else ""
    return f'<g class="{xml_text(it.cls)}">{head}{"".join(_svg_item(i) for i in it.items)}</g>'


def to_svg(d: Drawing) -> str:
    """The drawing as a standalone SVG document (vector: rects and text)."""
    w, h = _n(d.width), _n(d.height)
    title = f"<title>{xml_text(d.title)}</title>" if d.title else ""
    body = "".join(_svg_item(it) for it in d.items)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'font-family="{xml_text(FONT_FAMILY)}">{title}<rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>'
            f"{body}</svg>\n")


def _flat(items) -> list:
    out = []
    for it in items:
        if isinstance(it, (Box, Run)):
            out.append(it)
        else:
            out.extend(_flat(it.items))
    return out


def to_png(d: Drawing, scale: float = 2.0) -> bytes:
    """The drawing as PNG bytes, ``scale`` pixels per SVG px (2: sharp in print), drawn with matplotlib."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch, Rectangle

    dpi = 72.0 * scale  # 1 SVG px = 1 pt, so font sizes in px carry over as points
    fig = Figure(figsize=(d.width / 72.0, d.height / 72.0), dpi=dpi, facecolor="white")
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, d.width)
    ax.set_ylim(d.height, 0)
    for it in _flat(d.items):
        if isinstance(it, Box):
            colour = tuple(int(c) / 255 for c in it.rgb.split(",")) + (it.opacity,)
            if it.radius:
                patch = FancyBboxPatch((it.x, it.y), it.w, it.h, boxstyle=f"round,pad=0,rounding_size={it.radius}",
                                       facecolor=colour, edgecolor="none", linewidth=0)
            else:
                patch = Rectangle((it.x, it.y), it.w, it.h, facecolor=colour, edgecolor="none", linewidth=0)
            ax.add_patch(patch)
        else:
            ax.text(it.x, it.y, _NOT_XML.sub("\ufffd", it.text), fontsize=it.size, color=it.colour,
                    fontweight="bold" if it.bold else "normal", family="DejaVu Sans", va="baseline", ha="left",
                    parse_math=False, usetex=False)
    buf = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buf)
    return buf.getvalue()
