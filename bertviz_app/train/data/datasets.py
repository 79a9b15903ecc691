"""Training-ready examples: ``build_dataset`` (the rows ``validate`` accepts), ``validation_dataset``
(a separate validation file indexed like the training data) and ``split_dataset`` (stratified)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ...config import Settings
from ...errors import DataError
from .messages import ROW_NOTE, format_rows, quote_list, quoted
from .records import Dataset, Table, make_dataset
from .rows import Rows, check_columns, extract_rows
from .validation import validate

__all__ = ["build_dataset", "split_dataset", "validation_dataset"]


def build_dataset(
    table: Table,
    text_col: str,
    label_col: str,
    pair_col: str | None = None,
    multi_label: bool = False,
    label_sep: str = "|",
    *,
    settings: Settings | None = None,
) -> Dataset:
    """The rows ``validate`` accepts, as a Dataset: rows with empty text or no label and later
    duplicates are dropped, texts are cut at ``settings.max_chars``, label names sorted (numerically
    when all labels are integers). Raises DataError if ``validate`` finds a blocking error.
    ``settings`` (default: ``Settings()``): the limits ``validate`` applies."""
    settings = settings if settings is not None else Settings()
    validate(table, text_col, label_col, pair_col, multi_label, label_sep=label_sep,
             settings=settings).raise_if_blocking()
    x = extract_rows(table, text_col, label_col, pair_col, multi_label, label_sep)
    return _dataset_from(x, x.label_names, multi_label, settings.max_chars)


def _dataset_from(x: Rows, label_names: Sequence[str], multi_label: bool, limit: int) -> Dataset:
    index = {name: i for i, name in enumerate(label_names)}
    texts = [x.texts[i][:limit] for i in x.keep]
    pairs = None if x.pairs is None else [(x.pairs[i] or "")[:limit] for i in x.keep]
    if multi_label:
        labels = [tuple(sorted(index[p] for p in x.labels[i])) for i in x.keep]
    else:
        labels = [index[x.labels[i][0]] for i in x.keep]
    return make_dataset(texts, pairs, labels, label_names, multi_label, [x.rows[i] for i in x.keep])


def validation_dataset(
    train: Dataset,
    table: Table,
    text_col: str,
    label_col: str,
    pair_col: str | None = None,
    label_sep: str = "|",
    *,
    max_chars: int = Settings.max_chars,
) -> tuple[Dataset, tuple[str, ...]]:
    """A separate validation file as a Dataset with the training set's label names.

    Rows with empty text or no label, repeats, and texts that are also in the training data
    are dropped (each with a notice). Labels the training data lacks raise DataError. Texts are
    cut at ``max_chars`` characters, as the training data's.
    """
    check_columns(table, text_col, label_col, pair_col)
    if (train.pairs is None) != (pair_col is None):
        need = "a second text column too" if train.pairs is not None else "no second text column"
        raise DataError(f"The training data {'has' if train.pairs is not None else 'has no'} text pairs; choose {need} "
                        "for the validation file.")
    x = extract_rows(table, text_col, label_col, pair_col, train.multi_label, label_sep)
    known = set(train.label_names)
    unknown: dict[str, list[int]] = {}
    for i in x.keep:
        for p in x.labels[i]:
            if p not in known:
                unknown.setdefault(p, []).append(x.rows[i])
    if unknown:
        rows = sorted(r for rs in unknown.values() for r in rs)
        raise DataError(
            f"The validation file {table.name!r} has labels the training data does not: {quote_list(list(unknown))} "
            f"({format_rows(rows)}; {ROW_NOTE}). Training labels: {quote_list(train.label_names)}."
        )
    notices: list[str] = []
    skipped = sorted(x.empty_text + x.missing_label)
    if skipped:
        notices.append(f"Validation file: skipped {len(skipped):,} rows without text or label "
                       f"({format_rows(skipped)}; {ROW_NOTE}).")
    if x.duplicates or x.conflicts:
        rep = sorted(x.duplicates + x.conflicts)
        notices.append(f"Validation file: skipped {len(rep):,} repeated rows ({format_rows(rep)}).")
    seen = {(t.strip(), None if train.pairs is None else train.pairs[k].strip()) for k, t in enumerate(train.texts)}
    leak = [i for i in x.keep if (x.texts[i].strip(), None if x.pairs is None else (x.pairs[i] or "").strip()) in seen]
    if leak:
        notices.append(f"Validation file: removed {len(leak):,} rows whose text is also in the training data, so they "
                       f"do not inflate the score ({format_rows([x.rows[i] for i in leak])}).")
        leak_set = set(leak)
        x = _replace_keep(x, tuple(i for i in x.keep if i not in leak_set))
    if not x.keep:
        raise DataError(f"The validation file {table.name!r} has no usable rows (each needs a text in "
                        f"{quoted(text_col)}, a "
                        f"label in {quoted(label_col)}, and a text not already in the training data).")
    return _dataset_from(x, train.label_names, train.multi_label, max_chars), tuple(notices)


def _replace_keep(x: Rows, keep: tuple[int, ...]) -> Rows:
    return replace(x, keep=keep)


def split_dataset(ds: Dataset, val_fraction: float = 0.2, seed: int = 42) -> tuple[Dataset, Dataset, tuple[str, ...]]:
    """Split into (train, validation, notices) with a fixed seed; each part keeps file order.

    Single-label data is stratified so both parts keep the class ratios; when a class is too
    small for that (or the validation part cannot hold every class) the split is random and a
    notice says so. Multi-label data is split at random.
    """
    from sklearn.model_selection import train_test_split

    if not (isinstance(val_fraction, (int, float)) and 0 < val_fraction < 1):
        raise DataError(f"The validation fraction must be between 0 and 1 (e.g. 0.2), got {val_fraction!r}.")
    n = len(ds)
    n_val = math.ceil(val_fraction * n)
    if n < 2 or n_val >= n:
        raise DataError(f"{n} example{'s are' if n != 1 else ' is'} too few to split off {val_fraction:.0%} for "
                        "validation. Add rows or upload a separate validation file.")
    idx = np.arange(n)  # (N,)
    notices: list[str] = []
    stratify = None
    if not ds.multi_label:
        y = np.asarray(ds.labels)  # (N,)
        counts = np.bincount(y, minlength=ds.num_labels)
        present = counts[counts > 0]
        small = [ds.label_names[i] for i, c in enumerate(counts) if 0 < c < 2]
        if small:
            notices.append(f"Class{'es' if len(small) > 1 else ''} {quote_list(small)} "
                           f"{'have' if len(small) > 1 else 'has'} too few examples to put one in each part; the split "
                           "is random (not stratified), so validation may miss some classes.")
        elif n_val < len(present) or n - n_val < len(present):
            notices.append(f"A validation part of {n_val} rows cannot hold all {len(present)} classes; the split is "
                           "random (not stratified). Add rows or raise the validation fraction.")
        else:
            stratify = y
    else:
        notices.append("Multi-label data is split at random (not stratified by label).")
    try:
        tr, va = train_test_split(idx, test_size=n_val, random_state=seed, shuffle=True, stratify=stratify)
    except ValueError as err:  # sklearn's own stratification limits: fall back, say so
        notices.append(f"Stratified split not possible ({err}); the split is random.")
        tr, va = train_test_split(idx, test_size=n_val, random_state=seed, shuffle=True)
    tr, va = np.sort(tr), np.sort(va)
    kind = "stratified by class" if stratify is not None else "random"
    notices.insert(0, f"Split {n:,} examples into {len(tr):,} for training and {len(va):,} for validation "
                      f"({kind}, seed {seed}).")
    return ds.subset(tr), ds.subset(va), tuple(notices)

