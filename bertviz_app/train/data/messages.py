"""Wording shared by every message about an uploaded table: spreadsheet row lists, quoted names,
sizes, and the spreadsheet-safe cell (CSV injection guard)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence

import numpy as np

__all__ = ["ROW_NOTE", "display_name", "format_rows", "quote_list", "quoted", "safe_csv_cell", "shorten", "size_text"]

ROW_NOTE = "row numbers as in a spreadsheet: the header is row 1, the first data row is row 2"
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def format_rows(rows: Sequence[int], limit: int = 8, word: str = "row") -> str:
    """'row 2', 'rows 2 and 5', 'rows 2, 5, 9 and 37 more' (at most ``limit`` numbers shown); ``word``:
    what a number counts ("line" for a file read line by line)."""
    rows = list(rows)
    if not rows:
        return f"no {word}s"
    if len(rows) == 1:
        return f"{word} {rows[0]}"
    if len(rows) <= limit:
        return f"{word}s " + ", ".join(map(str, rows[:-1])) + f" and {rows[-1]}"
    return f"{word}s " + ", ".join(map(str, rows[:limit])) + f" and {len(rows) - limit:,} more"


def safe_csv_cell(value: object) -> str:
    """A cell value that is safe to write into a CSV a spreadsheet will open.

    Text starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is prefixed with a
    single quote so Excel/LibreOffice show it instead of running it as a formula (CSV injection).
    Plain numbers (``-1.5``) are left alone; None and NaN become an empty string.
    """
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return ""
    if isinstance(value, (bool, int, float, np.integer, np.floating)):
        return str(value)
    text = str(value)
    if text and text[0] in "=+-@\t\r" and not _NUMBER.match(text):
        return "'" + text
    return text


def shorten(value: object, max_chars: int) -> str:
    text = str(value)
    return text if len(text) <= max_chars else text[: max(1, max_chars - 1)] + "…"


def quoted(value: object, max_chars: int = 60) -> str:
    """A user-supplied name (column, label) quoted for a message, cut if it is very long."""
    return repr(shorten(value, max_chars))


def quote_list(items: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(quoted(c) for c in list(items)[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def size_text(n: float) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e5 else f"{n / 1e3:,.1f} kB" if n >= 1e3 else f"{int(n)} bytes"


def display_name(name: str | None) -> str:
    return repr(os.path.basename(name)) if name else "The uploaded data"

