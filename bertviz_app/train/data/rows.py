"""The per-row reading of a column choice that ``validate`` and ``build_dataset`` share (so both
agree on what is kept): texts, label parts, and which rows are empty, repeated or conflicting."""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

from ...errors import DataError
from .messages import quote_list, quoted
from .records import Table

__all__ = ["MISSING_LABELS", "Rows", "check_columns", "extract_rows"]

# Label cells that mean "no label" (what spreadsheets and pandas write for a missing value).
MISSING_LABELS = frozenset({"", "nan", "null", "na", "n/a", "#n/a", "<na>"})
_INTLIKE = re.compile(r"^[+-]?\d+(\.0*)?$")


@dataclass(frozen=True)
class Rows:
    """Per-row extraction shared by validate and build_dataset (so both agree on what is kept)."""

    rows: tuple[int, ...]  # spreadsheet row numbers, (N,)
    texts: tuple[str | None, ...]  # None = empty
    pairs: tuple[str | None, ...] | None
    labels: tuple[tuple[str, ...] | None, ...]  # label parts; None = missing
    keep: tuple[int, ...]  # positions used for training, in file order
    empty_text: tuple[int, ...]  # row numbers
    missing_label: tuple[int, ...]
    empty_pair: tuple[int, ...]
    duplicates: tuple[int, ...]  # later copies with the same labels (dropped)
    conflicts: tuple[int, ...]  # later copies with different labels (dropped)
    label_names: tuple[str, ...]


def check_columns(table: Table, text_col, label_col, pair_col) -> None:
    cols = table.columns
    shown = quote_list(cols)
    for what, col in (("text", text_col), ("label", label_col), ("second text", pair_col)):
        if col is None and what == "second text":
            continue
        if col is None or (isinstance(col, str) and not col.strip()):
            raise DataError(f"Choose the {what} column. Available columns: {shown}.")
        if col not in cols:
            raise DataError(f"There is no column {quoted(str(col))} in {table.name!r}; choose the {what} column from: "
                            f"{shown}.")
    if text_col == label_col:
        raise DataError(f"The text and label columns are both {quoted(text_col)}; choose two different columns from: "
                        f"{shown}.")
    if pair_col is not None and pair_col in (text_col, label_col):
        raise DataError(
            f"The second text column {quoted(pair_col)} is already used as the text or label column; choose another "
            f"or none."
        )


def _clean_text(value) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value)
    return text if text.strip() else None


def _label_parts(value, multi_label: bool, sep: str) -> tuple[str, ...] | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    raw = unicodedata.normalize("NFC", str(value)).strip()
    if raw.casefold() in MISSING_LABELS:
        return None
    if not multi_label:
        return (raw,)
    parts: list[str] = []
    for p in raw.split(sep):
        p = p.strip()
        if p and p.casefold() not in MISSING_LABELS and p not in parts:
            parts.append(p)
    return tuple(parts) or None


def extract_rows(table: Table, text_col: str, label_col: str, pair_col: str | None, multi_label: bool,
                 sep: str) -> Rows:
    df = table.df
    rows = tuple(int(r) for r in df.index)
    texts = tuple(_clean_text(v) for v in df[text_col].tolist())
    pairs = tuple(_clean_text(v) for v in df[pair_col].tolist()) if pair_col else None
    labels = [_label_parts(v, multi_label, sep) for v in df[label_col].tolist()]
    # Integer labels written as 1.0 (a float column with gaps) or 01 are the same class as 1.
    present = [p for lab in labels if lab for p in lab]
    numeric = bool(present) and all(_INTLIKE.match(p) for p in present)
    if numeric:
        labels = [None if lab is None else tuple(dict.fromkeys(str(int(float(p))) for p in lab)) for lab in labels]
        names = tuple(sorted({p for lab in labels if lab for p in lab}, key=int))
    else:
        names = tuple(sorted({p for lab in labels if lab for p in lab}))
    empty_text, missing_label, empty_pair, dups, conflicts, keep = [], [], [], [], [], []
    first: dict[tuple[str, str | None], tuple[str, ...]] = {}
    for i, row in enumerate(rows):
        if texts[i] is None:
            empty_text.append(row)
            continue
        if labels[i] is None:
            missing_label.append(row)
            continue
        pair = None
        if pairs is not None:
            pair = pairs[i] or ""
            if pairs[i] is None:
                empty_pair.append(row)
        key = (texts[i].strip(), None if pair is None else pair.strip())
        lab = tuple(sorted(labels[i])) if multi_label else labels[i]
        if key in first:
            (dups if first[key] == lab else conflicts).append(row)
            continue
        first[key] = lab
        keep.append(i)
    return Rows(rows, texts, pairs, tuple(labels), tuple(keep), tuple(empty_text), tuple(missing_label),
                 tuple(empty_pair), tuple(dups), tuple(conflicts), names)

