"""``guess_columns``: which columns hold the text, the label and a second text, by their names
first and their contents second; the user confirms or changes the guess."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...errors import DataError
from .messages import quoted
from .records import ColumnGuess, Table

__all__ = ["MAX_CLASSES", "NUMERIC_SHARE", "describe_columns", "guess_columns", "holds_numbers", "no_text_message"]

MAX_CLASSES = 1000  # more distinct labels than this: a free-text column, not classes
NUMERIC_SHARE = 0.9  # a column whose filled cells are at least this share numbers holds numbers, not texts
# 12, -3.5, .5, 1e-3, 1,234.5, 1.234,5, 45%: a cell that is a number (an id, a score, a count), not a text
_NUMBER = re.compile(r"[+-]?(?:\d+(?:[.,]\d+)*|[.,]\d+)(?:[eE][+-]?\d+)?%?")
_TEXT_HINTS = ("text", "sentence", "review", "content", "comment", "body", "message", "tweet", "document",
               "utterance", "question", "premise", "passage", "description", "post", "abstract", "title")
_PAIR_HINTS = ("text_b", "textb", "text2", "sentence2", "sentence_b", "sentenceb", "hypothesis", "text_pair",
               "pair", "question2", "second_text", "context", "answer", "query2")
_LABEL_HINTS = ("label", "labels", "class", "category", "target", "sentiment", "y", "tag", "tags", "intent",
                "topic", "emotion", "stance", "rating", "polarity", "gold")
_ID_HINTS = ("id", "idx", "index", "row", "uid", "guid", "key", "unnamed")


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _hint_score(name: str, hints: Sequence[str]) -> int:
    """2 for an exact hint name ('label', 'Sentence 1'), 1 when a hint is one of its words
    ('review_body', 'gold_label'), else 0."""
    n = _norm(name)
    bare = n.rstrip("0123456789_")
    if n in hints or n.replace("_", "") in hints or (bare != n and bare in hints and hints is not _PAIR_HINTS):
        return 2
    words = set(n.split("_")) | {w.rstrip("0123456789") for w in n.split("_")}
    return 1 if any(h in words for h in hints if len(h) > 1) else 0


def _filled(table: Table, col: str):
    s = table.df[col].dropna().astype(str).str.strip()
    return s[s != ""]


def holds_numbers(table: Table, col: str) -> bool:
    """True when the column's filled cells are all, or nearly all (``NUMERIC_SHARE``), numbers: ids,
    scores, counts. Such a column is never a text column (an empty column is not called numbers)."""
    s = _filled(table, col)
    return bool(len(s)) and float(s.map(lambda v: _NUMBER.fullmatch(v) is not None).mean()) >= NUMERIC_SHARE


def describe_columns(table: Table, limit: int = 12) -> str:
    """The table's columns for a message, each one that cannot be a text marked: "'id' (numbers), 'label'"
    (at most ``limit`` named)."""
    def one(col: str) -> str:
        what = " (empty)" if not len(_filled(table, col)) else " (numbers)" if holds_numbers(table, col) else ""
        return quoted(col) + what

    cols = table.columns
    more = len(cols) - limit
    return ", ".join(one(c) for c in cols[:limit]) + (f" and {more} more" if more > 0 else "")


def no_text_message(table: Table, fix: str = "name the column that holds them as the text column") -> str:
    """Why no text column can be guessed, naming the columns found: "No column of 'x.csv' holds text:
    found id (numbers), label. Add a column of texts, or ...". ``fix``: how to name one where the
    message is shown (the CLI's option, the page's dropdown)."""
    where = f" of {quoted(table.name)}" if table.name else ""
    return f"No column{where} holds text: found {describe_columns(table)}. Add a column of texts to the file, or {fix}."


def guess_columns(table: Table) -> ColumnGuess:
    """Suggest the text, label and (optional) second-text columns; the user confirms or changes.

    Names first: label/class/category/target/sentiment for the label, text_b/sentence2/hypothesis
    for the second text, text/sentence/review/content for the text (an empty column is still
    suggested by name, so validate can say it is empty). Then content: the label is the column
    with fewest distinct short values (at least 2), the text the column with the longest cells.
    A column of numbers (ids, scores: ``holds_numbers``) is never the text or the second text, even
    by name: with no other column the text is None (``no_text_message`` says why).
    """
    df = table.df
    cols = list(table.columns)
    n = max(1, len(df))
    stats: dict[str, tuple[float, int, float]] = {}  # col -> (mean length, distinct values, filled fraction)
    for col in cols:
        s = _filled(table, col)
        stats[col] = (float(s.str.len().mean()) if len(s) else 0.0, int(s.nunique()), len(s) / n)
    numbers = {c for c in cols if holds_numbers(table, c)}  # never a text
    reasons: list[str] = []

    def is_id(col: str) -> bool:
        return _hint_score(col, _ID_HINTS) == 2

    def by_name(hints, exclude, exact=False, longest=False):
        found = [c for c in cols if c not in exclude and _hint_score(c, hints) >= (2 if exact else 1)]
        key = (lambda c: (-_hint_score(c, hints), -(stats[c][2] > 0), -stats[c][0])) if longest else \
              (lambda c: (-_hint_score(c, hints), -(stats[c][2] > 0), stats[c][1]))
        return min(found, key=key) if found else None

    label = by_name(_LABEL_HINTS, ())
    pair = by_name(_PAIR_HINTS, (label, *numbers), exact=True)
    text = by_name(_TEXT_HINTS, (label, pair, *numbers), longest=True)
    for what, col in (("label", label), ("second text", pair), ("text", text)):
        if col is not None:
            reasons.append(f"{what}: {quoted(col)} (name)")
    if label is None:
        small = [c for c in cols if c not in (text, pair) and not is_id(c) and stats[c][2] > 0.5
                 and 2 <= stats[c][1] <= max(2, min(MAX_CLASSES, n // 2)) and stats[c][0] <= 40]
        if small:
            label = min(small, key=lambda c: (stats[c][1], cols.index(c)))
            reasons.append(f"label: {quoted(label)} ({stats[label][1]} distinct values)")
    if text is None:
        rest = [c for c in cols if c not in (label, pair) and c not in numbers and stats[c][2] > 0]
        free = [c for c in rest if not is_id(c)] or rest
        if free:
            text = max(free, key=lambda c: (stats[c][0], -cols.index(c)))
            reasons.append(f"text: {quoted(text)} (longest cells, {stats[text][0]:.0f} characters on average)")
    return ColumnGuess(text=text, label=label, pair=pair, columns=tuple(cols), reasons=tuple(reasons))



def choose_columns(table: Table, text_column: str | None = None,
                   label_column: str | None = None) -> tuple[str, str, str | None]:
    """The text and label columns a labelled file is read with: those named, else ``guess_columns``'s
    (a column of numbers is never the text). DataError when either cannot be told, naming the columns
    found (``no_text_message`` when no column holds text). Returns (text, label, a notice saying the
    columns were guessed, or None when both were named)."""
    guess = guess_columns(table)
    text, label = text_column or guess.text, label_column or guess.label
    if text is None and not any(not holds_numbers(table, c) and c != label for c in table.columns):
        raise DataError(no_text_message(table, "name the column that holds them as the text column (--text-column)"))
    if text is None or label is None:
        raise DataError(f"Could not tell which column holds the {'text' if text is None else 'labels'}: name the "
                        f"text and label columns (found {describe_columns(table)}).")
    notice = None if text_column and label_column else f"columns guessed: text {text!r}, label {label!r}"
    return text, label, notice
