"""The records of data intake: a parsed upload (``Table``), suggested columns (``ColumnGuess``),
the validation report (``Problem``, ``Report``) and training-ready examples (``Dataset``)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from ...errors import DataError
from .messages import shorten

__all__ = ["ColumnGuess", "Dataset", "Problem", "Report", "Table", "dataset_hash", "make_dataset"]


@dataclass(frozen=True, eq=False)
class Table:
    """A parsed upload. ``df`` holds every column as pandas' ``str`` dtype with NaN for an empty
    cell; its index is the spreadsheet row number of each data row (first data row = 2)."""

    df: pd.DataFrame  # (n_rows, n_columns) str/NaN, index = spreadsheet row numbers
    name: str  # the file name as uploaded (for messages)
    delimiter: str
    encoding: str  # "utf-8", "utf-8-sig", "utf-16", "cp1252" or "latin-1"
    notices: tuple[str, ...]  # what was fixed or guessed on the way in (encoding fallback, NUL bytes...)
    header: tuple[str, ...] = ()  # the header cells as given ("" for a blank one); ``columns`` are unique, stripped

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(str(c) for c in self.df.columns)

    @property
    def n_rows(self) -> int:
        return int(len(self.df))

    def preview(self, n: int = 20, max_chars: int = 200) -> pd.DataFrame:
        """The first ``n`` rows as parsed, with a leading ``row`` column and long cells cut to
        ``max_chars`` characters (with an ellipsis) so a UI table stays readable."""
        head = self.df.head(max(0, int(n))).copy()
        for col in head.columns:
            head[col] = head[col].map(lambda v: shorten(v, max_chars), na_action="ignore")
        head.insert(0, "row", head.index.to_numpy())
        return head.reset_index(drop=True)


@dataclass(frozen=True)
class ColumnGuess:
    """Suggested columns for the user to confirm or change; ``columns`` lists every choice."""

    text: str | None
    label: str | None
    pair: str | None
    columns: tuple[str, ...]
    reasons: tuple[str, ...] = ()  # one short line per guess, e.g. "text: 'review' (name)"


@dataclass(frozen=True)
class Problem:
    severity: Literal["error", "warning"]
    code: str  # stable id for the UI/tests: empty_text, missing_label, duplicates, rare_class...
    message: str  # says what is wrong and what to do; row lists are truncated
    rows: tuple[int, ...] = ()  # every affected spreadsheet row (not truncated)


@dataclass(frozen=True)
class Report:
    """Outcome of ``validate``: errors block training, warnings are shown and training goes on."""

    problems: tuple[Problem, ...]
    summary: dict  # n_rows, n_used, n_dropped, n_classes, class_counts {label: count}, multi_label

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "warning")

    @property
    def ok(self) -> bool:
        return not self.errors

    def codes(self) -> tuple[str, ...]:
        return tuple(p.code for p in self.problems)

    def text(self) -> str:
        """All problems as lines, errors first, for a log or a Markdown box."""
        lines = [f"Error: {p.message}" for p in self.errors] + [f"Warning: {p.message}" for p in self.warnings]
        return "\n".join(lines) if lines else "No problems found."

    def raise_if_blocking(self) -> None:
        """Raise one DataError listing every error; do nothing when there are only warnings."""
        errs = self.errors
        if not errs:
            return
        if len(errs) == 1:
            raise DataError(errs[0].message)
        raise DataError(f"The data cannot be used yet ({len(errs)} problems):\n"
                        + "\n".join(f"- {p.message}" for p in errs))


@dataclass(frozen=True, eq=False)
class Dataset:
    """Training-ready examples; fields run in parallel (``texts[i]``, ``labels[i]``, ``source_rows[i]``)."""

    texts: tuple[str, ...]
    pairs: tuple[str, ...] | None  # second text of each pair, or None for single-text data
    labels: tuple  # tuple[int, ...] index into label_names; multi-label: tuple[tuple[int, ...], ...]
    label_names: tuple[str, ...]  # sorted; numerically when every label is an integer
    multi_label: bool
    source_rows: tuple[int, ...]  # spreadsheet row of each example in the uploaded file
    data_hash: str  # first 16 hex digits of sha256 over texts, pairs, labels and label names

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    def class_counts(self) -> dict[str, int]:
        """Examples per class name, in label order (multi-label: rows carrying that label)."""
        counts = Counter(i for lab in self.labels for i in (lab if self.multi_label else (lab,)))
        return {name: int(counts.get(i, 0)) for i, name in enumerate(self.label_names)}

    def multi_hot(self) -> np.ndarray:
        """(N, C) float32 0/1 targets (multi-label), or one-hot rows (single-label)."""
        out = np.zeros((len(self), self.num_labels), dtype=np.float32)  # (N, C)
        for r, lab in enumerate(self.labels):
            out[r, list(lab) if self.multi_label else [lab]] = 1.0
        return out

    def subset(self, indices: Sequence[int]) -> Dataset:
        """The examples at ``indices`` (in that order), same label names, new hash."""
        idx = [int(i) for i in indices]
        return make_dataset(
            [self.texts[i] for i in idx],
            None if self.pairs is None else [self.pairs[i] for i in idx],
            [self.labels[i] for i in idx],
            self.label_names,
            self.multi_label,
            [self.source_rows[i] for i in idx],
        )


def dataset_hash(texts, pairs, labels, label_names, multi_label) -> str:
    payload = json.dumps(
        {"texts": list(texts), "pairs": None if pairs is None else list(pairs),
         "labels": [list(lab) if multi_label else lab for lab in labels],
         "label_names": list(label_names), "multi_label": multi_label},
        ensure_ascii=False, separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def make_dataset(texts, pairs, labels, label_names, multi_label, source_rows) -> Dataset:
    texts, labels = tuple(texts), tuple(tuple(lab) if multi_label else int(lab) for lab in labels)
    pairs = None if pairs is None else tuple(pairs)
    return Dataset(texts=texts, pairs=pairs, labels=labels, label_names=tuple(label_names), multi_label=multi_label,
                   source_rows=tuple(int(r) for r in source_rows),
                   data_hash=dataset_hash(texts, pairs, labels, label_names, multi_label))

