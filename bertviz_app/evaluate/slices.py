"""Where a classifier fails: its evaluated rows in slices (by true and predicted label, by length, by a word they
contain, by the value of an extra column of the file), each with its size, accuracy and 95% Wilson interval,
worst first (``evaluation.evaluate_file`` reports them)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..train.data import Table
from ..train.data.messages import quoted

__all__ = ["MAX_SLICE_VALUES", "Slice", "Z95", "classifier_slices", "length_slices", "slice_of", "wilson_interval"]

MAX_SLICE_VALUES = 20  # an extra column with at most this many distinct values is sliced by them
Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def wilson_interval(correct: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion ``correct / n`` (95% by default); None when n is 0.
    Unlike the normal approximation it stays inside [0, 1] and is not empty at 0% or 100%."""
    if n <= 0:
        return None
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at 0% and 100% the bound is exactly 0 or 1 (the formula gives it up to a rounding error)
    return (0.0 if correct == 0 else max(0.0, centre - half)), (1.0 if correct == n else min(1.0, centre + half))


@dataclass(frozen=True)
class Slice:
    """A group of evaluated rows: ``kind`` (true label, predicted label, length, word, column), a
    readable ``name``, its size, how many the model got right, the accuracy and its 95% Wilson interval
    (None for an empty slice)."""

    kind: str
    name: str
    size: int
    correct: int
    accuracy: float | None
    interval: tuple[float, float] | None
    value: str = ""  # the label, word, bucket or column value the slice is made of
    column: str | None = None  # for kind "column": the file's column

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "value": self.value, "column": self.column, "size": self.size,
                "correct": self.correct, "accuracy": self.accuracy,
                "interval": None if self.interval is None else list(self.interval)}


def slice_of(kind: str, name: str, mask: np.ndarray, ok: np.ndarray, value: str = "",
           column: str | None = None) -> tuple[Slice, np.ndarray]:
    """A slice and its rows (``mask``, (N,) bool)."""
    n, c = int(mask.sum()), int(ok[mask].sum())
    return Slice(kind=kind, name=name, size=n, correct=c, accuracy=c / n if n else None,
                 interval=wilson_interval(c, n), value=value, column=column), mask


def classifier_slices(table: Table, rows: list[int], texts: list[str], pairs: list[str] | None, true: np.ndarray,
            pred: np.ndarray, n_tokens: np.ndarray, truncated: np.ndarray, labels: Sequence[str],
            words: Sequence[str], used_columns: set[str], max_length: int) -> list[tuple[Slice, np.ndarray]]:
    """Every slice with its rows' mask, worst first."""
    ok = true == pred  # (N,)
    out: list[tuple[Slice, np.ndarray]] = []
    for i, name in enumerate(labels):
        if (true == i).any():
            out.append(slice_of("true label", f"true label {name}", true == i, ok, name))
    for i, name in enumerate(labels):
        if (pred == i).any():
            out.append(slice_of("predicted label", f"predicted {name}", pred == i, ok, name))
    out += length_slices(n_tokens, truncated, ok, max_length)
    seen: set[str] = set()
    haystack = texts if pairs is None else [f"{t}\n{p}" for t, p in zip(texts, pairs)]
    for word in words:
        w = str(word).strip()
        if not w or w.casefold() in seen:
            continue
        seen.add(w.casefold())
        pattern = re.compile(rf"(?<!\w){re.escape(w)}(?!\w)", re.IGNORECASE)
        mask = np.array([bool(pattern.search(t)) for t in haystack], dtype=bool)
        out.append(slice_of("word", f"contains {quoted(w, 40)}", mask, ok, w))
    frame = table.df.loc[rows]
    for col in table.columns:
        if col in used_columns:
            continue
        cells = frame[col].map(lambda v: "(empty)" if not isinstance(v, str) or not v.strip() else v.strip())
        values = list(dict.fromkeys(cells.tolist()))
        if not 2 <= len(values) <= MAX_SLICE_VALUES:
            continue
        arr = cells.to_numpy()
        for v in sorted(values):
            out.append(slice_of("column", f"{col} = {v}", arr == v, ok, v, col))
    # worst first: lowest accuracy, then the larger slice (more evidence), then the name; empty ones last
    return sorted(out, key=lambda sm: (sm[0].size == 0, sm[0].accuracy if sm[0].size else 0.0, -sm[0].size,
                                       sm[0].kind, sm[0].name))


def length_slices(n_tokens: np.ndarray, truncated: np.ndarray, ok: np.ndarray,
                   max_length: int) -> list[tuple[Slice, np.ndarray]]:
    """Rows by token count: the quartiles of the evaluated rows' counts (fewer buckets when counts tie),
    and, when some but not all texts were cut, those longer than the model reads."""
    if not len(n_tokens):
        return []
    edges = np.unique(np.quantile(n_tokens, [0.25, 0.5, 0.75], method="lower").astype(np.int64))  # (<=3,)
    bucket = np.searchsorted(edges, n_tokens, side="left")  # (N,) bucket b: edges[b-1] < n <= edges[b]
    out = []
    for b in np.unique(bucket):
        mask = bucket == b
        lo, hi = int(n_tokens[mask].min()), int(n_tokens[mask].max())
        span = f"{lo} tokens" if lo == hi else f"{lo}-{hi} tokens"
        out.append(slice_of("length", f"length {span}", mask, ok, span))
    if truncated.any() and not truncated.all():
        out.append(slice_of("length", f"longer than the model reads (cut at {max_length} tokens)", truncated, ok,
                          "truncated"))
    return out
