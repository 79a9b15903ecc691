"""``guess_columns``: which columns hold the text, the label and a second text, by their names
first and their contents second; the user confirms or changes the guess."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .messages import quoted
from .records import ColumnGuess, Table

__all__ = ["MAX_CLASSES", "guess_columns"]

MAX_CLASSES = 1000  # more distinct labels than this: a free-text column, not classes
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


def guess_columns(table: Table) -> ColumnGuess:
    """Suggest the text, label and (optional) second-text columns; the user confirms or changes.

    Names first: label/class/category/target/sentiment for the label, text_b/sentence2/hypothesis
    for the second text, text/sentence/review/content for the text (an empty column is still
    suggested by name, so validate can say it is empty). Then content: the label is the column
    with fewest distinct short values (at least 2), the text the column with the longest cells.
    """
    df = table.df
    cols = list(table.columns)
    n = max(1, len(df))
    stats: dict[str, tuple[float, int, float]] = {}  # col -> (mean length, distinct values, filled fraction)
    for col in cols:
        s = df[col].dropna().astype(str).str.strip()
        s = s[s != ""]
        stats[col] = (float(s.str.len().mean()) if len(s) else 0.0, int(s.nunique()), len(s) / n)
    reasons: list[str] = []

    def is_id(col: str) -> bool:
        return _hint_score(col, _ID_HINTS) == 2

    def by_name(hints, exclude, exact=False, longest=False):
        found = [c for c in cols if c not in exclude and _hint_score(c, hints) >= (2 if exact else 1)]
        key = (lambda c: (-_hint_score(c, hints), -(stats[c][2] > 0), -stats[c][0])) if longest else \
              (lambda c: (-_hint_score(c, hints), -(stats[c][2] > 0), stats[c][1]))
        return min(found, key=key) if found else None

    label = by_name(_LABEL_HINTS, ())
    pair = by_name(_PAIR_HINTS, (label,), exact=True)
    text = by_name(_TEXT_HINTS, (label, pair), longest=True)
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
        rest = [c for c in cols if c not in (label, pair) and stats[c][2] > 0]
        free = [c for c in rest if not is_id(c)] or rest
        if free:
            text = max(free, key=lambda c: (stats[c][0], -cols.index(c)))
            reasons.append(f"text: {quoted(text)} (longest cells, {stats[text][0]:.0f} characters on average)")
    return ColumnGuess(text=text, label=label, pair=pair, columns=tuple(cols), reasons=tuple(reasons))

