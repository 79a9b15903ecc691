"""``validate``: every problem of a column choice with its rows (errors block training, warnings
do not), and ``review_columns``, the report the UI shows for the columns a user picked."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ...config import Settings
from ...errors import BertvizError, DataError, InputError
from ..default_model import encoder_tokenizer
from .columns import MAX_CLASSES, describe_columns, holds_numbers
from .messages import ROW_NOTE, format_rows, quote_list, quoted
from .records import Problem, Report, Table
from .rows import Rows, check_columns, extract_rows

__all__ = ["TOKEN_CHECK_ROWS", "review_columns", "validate"]

TOKEN_CHECK_ROWS = 10_000  # rows tokenized for the truncation warning (evenly spread sample above)


def validate(
    table: Table,
    text_col: str,
    label_col: str,
    pair_col: str | None = None,
    multi_label: bool = False,
    tokenizer=None,
    max_length: int | None = None,
    label_sep: str = "|",
    *,
    settings: Settings | None = None,
) -> Report:
    """Check the chosen columns before training and list every problem with its rows.

    Errors (block training): a text (or second text) column of numbers (ids, scores), no usable rows,
    an empty label column, a single class, a class with fewer than ``settings.min_class_examples``
    examples, labels that look like free text.
    Warnings: empty texts and missing labels (those rows are skipped), duplicates (later copies
    skipped; conflicting labels called out), classes under ``settings.warn_class_examples``,
    texts over ``settings.max_chars`` characters (cut), and, given a tokenizer, texts longer than
    ``max_length`` tokens (truncated in training). Unknown column names raise DataError at once.
    ``settings`` defaults to ``Settings()``.
    """
    check_columns(table, text_col, label_col, pair_col)
    settings = settings if settings is not None else Settings()
    x = extract_rows(table, text_col, label_col, pair_col, multi_label, label_sep)
    checks = _Checks(table, x, text_col, label_col, pair_col, multi_label, label_sep, settings)
    _number_columns(checks)
    any_label = _empty_columns(checks)
    _skipped_rows(checks, any_label)
    used = [x.labels[i] for i in x.keep]
    counts = Counter(p for lab in used for p in lab)
    class_counts = {name: int(counts[name]) for name in x.label_names if counts[name]}
    too_many = _label_column(checks, counts, class_counts)
    if len(class_counts) >= 2 and not too_many:
        _class_sizes(checks, class_counts)
    _long_texts(checks, tokenizer, max_length)
    n_rows, n_used = len(x.rows), len(x.keep)
    summary = {
        "n_rows": n_rows,
        "n_used": n_used,
        "n_dropped": n_rows - n_used,
        "n_classes": len(class_counts),
        "class_counts": class_counts,
        "multi_label": bool(multi_label),
    }
    order = {"error": 0, "warning": 1}
    return Report(problems=tuple(sorted(checks.problems, key=lambda p: order[p.severity])), summary=summary)


@dataclass
class _Checks:
    """One validation under way: the table, the chosen columns, their rows and the problems found so far."""

    table: Table
    x: Rows
    text_col: str
    label_col: str
    pair_col: str | None
    multi_label: bool
    label_sep: str
    settings: Settings
    problems: list[Problem] = field(default_factory=list)

    def add(self, sev, code, msg, rows=()):
        """Note one problem (severity, code, message, spreadsheet rows)."""
        self.problems.append(Problem(sev, code, msg, tuple(rows)))


def _number_columns(checks: _Checks) -> None:
    """Errors for a text or second text column that holds numbers."""
    table, add = checks.table, checks.add
    for col, what, code in ((checks.text_col, "text column", "text_numbers"), (checks.pair_col, "second text column",
                                                                            "pair_numbers")):
        if col and holds_numbers(table, col):  # ids or scores: a model trained on them learns nothing of texts
            cells = table.df[col].dropna().astype(str).str.strip()
            seen = ", ".join(quoted(v) for v in cells[cells != ""].head(3))
            add("error", code,
                f"The {what} {quoted(col)} holds numbers, not texts (e.g. {seen}). Choose the column that holds "
                f"the texts (found {describe_columns(table)}), or add a column of texts to the file.")


def _empty_columns(checks: _Checks) -> bool:
    """Errors for a label or text column empty in every row; whether any row has a label."""
    x, add, table, text_col, label_col = checks.x, checks.add, checks.table, checks.text_col, checks.label_col
    any_label = any(lab is not None for lab in x.labels)
    if not any_label:
        add("error", "label_all_missing",
            f"The label column {quoted(label_col)} is empty in every row. Choose the column that holds the classes "
            f"(columns: {quote_list(table.columns)}) or fill in the labels.")
    if not any(t is not None for t in x.texts):
        add("error", "text_all_missing",
            f"The text column {quoted(text_col)} is empty in every row. Choose the column that holds the texts "
            f"(columns: {quote_list(table.columns)}).")
    return any_label


def _skipped_rows(checks: _Checks, any_label: bool) -> None:
    """Warnings for the rows skipped or used with an empty second text: empty texts, missing labels,
    empty pairs, duplicates and conflicting duplicates."""
    x, add, text_col, label_col, pair_col = checks.x, checks.add, checks.text_col, checks.label_col, checks.pair_col
    if x.empty_text:
        add("warning", "empty_text",
            f"{len(x.empty_text):,} row{'s' if len(x.empty_text) > 1 else ''} with empty text in {quoted(text_col)} "
            f"will be "
            f"skipped: {format_rows(x.empty_text)} ({ROW_NOTE}). Fill in the text or delete those rows.", x.empty_text)
    if x.missing_label and any_label:
        add("warning", "missing_label",
            f"{len(x.missing_label):,} row{'s' if len(x.missing_label) > 1 else ''} without a label in "
            f"{quoted(label_col)} "
            f"will be skipped: {format_rows(x.missing_label)} ({ROW_NOTE}). Add the labels or delete those rows.",
            x.missing_label)
    if x.empty_pair:
        add("warning", "empty_pair",
            f"{len(x.empty_pair):,} row{'s' if len(x.empty_pair) > 1 else ''} have an empty second text in "
            f"{quoted(pair_col)} and are used with an empty one: {format_rows(x.empty_pair)} ({ROW_NOTE}).",
            x.empty_pair)
    if x.duplicates:
        add("warning", "duplicates",
            f"{len(x.duplicates):,} row{'s' if len(x.duplicates) > 1 else ''} repeat an earlier row's text"
            f"{' pair' if pair_col else ''} and label and will be skipped: {format_rows(x.duplicates)} ({ROW_NOTE}).",
            x.duplicates)
    if x.conflicts:
        add("warning", "conflicting_duplicates",
            f"{len(x.conflicts):,} row{'s' if len(x.conflicts) > 1 else ''} repeat an earlier row's text"
            f"{' pair' if pair_col else ''} with a different label; only the first copy is used: "
            f"{format_rows(x.conflicts)} ({ROW_NOTE}). Check which label is right.", x.conflicts)


def _label_column(checks: _Checks, counts: Counter, class_counts: dict[str, int]) -> bool:
    """Problems of the label column as a whole: separators that look multi-label, no usable rows, free text
    instead of classes, a single class. Returns whether it has too many values to be classes."""
    add, label_sep, text_col, label_col = checks.add, checks.label_sep, checks.text_col, checks.label_col
    n_classes, n_used, table = len(class_counts), len(checks.x.keep), checks.table
    if not checks.multi_label and any(label_sep in p for p in counts) and sum(
            c for p, c in counts.items() if label_sep in p) >= max(2, n_used // 10):
        add("warning", "looks_multi_label",
            f"Many labels contain {label_sep!r} (e.g. {quoted(next(p for p in counts if label_sep in p))}); if rows "
            f"can have "
            "several labels, tick multi-label so they are split.")
    too_many = n_classes > MAX_CLASSES or (n_used >= 10 and n_classes > n_used / 2)
    if n_used == 0 and not any(p.code in ("label_all_missing", "text_all_missing") for p in checks.problems):
        add("error", "no_rows", f"No row has both a text in {quoted(text_col)} and a label in {quoted(label_col)}. "
                                f"Fill them in, "
                                "or choose other columns.")
    elif too_many:
        add("error", "too_many_classes",
            f"The label column {quoted(label_col)} has {n_classes:,} different values in {n_used:,} rows; it looks "
            f"like free "
            f"text, not classes. Choose the column that holds the classes (columns: {quote_list(table.columns)}).")
    elif n_classes == 1:
        only = next(iter(class_counts))
        add("error", "single_class",
            f"Every usable row has the same label, {quoted(only)} ({n_used:,} row{'s' if n_used > 1 else ''}); a "
            f"classifier "
            "needs at least two classes. Add examples of another class or choose another label column.")
    return too_many


def _class_sizes(checks: _Checks, class_counts: dict[str, int]) -> None:
    """Problems of the classes one by one: too few examples (an error below the minimum, a warning below
    the advised size) and labels that differ only in case."""
    x, add, settings = checks.x, checks.add, checks.settings
    rows_of: dict[str, list[int]] = {}
    for i in x.keep:
        for p in x.labels[i]:
            rows_of.setdefault(p, []).append(x.rows[i])
    rare = [c for c, k in class_counts.items() if k < settings.min_class_examples]
    if rare:
        rr = sorted(r for c in rare for r in rows_of[c])
        add("error", "rare_class",
            f"Class{'es' if len(rare) > 1 else ''} {quote_list(rare)} "
            f"{'have' if len(rare) > 1 else 'has'} fewer than {settings.min_class_examples} examples "
            f"({format_rows(rr)}; {ROW_NOTE}). Add examples, fix a misspelt label, or delete those rows "
            "(BERTVIZ_MIN_CLASS_EXAMPLES sets the minimum).", rr)
    few = [c for c, k in class_counts.items() if settings.min_class_examples <= k < settings.warn_class_examples]
    if few:
        add("warning", "few_examples",
            "Few examples for " + ", ".join(f"{quoted(c)} ({class_counts[c]})" for c in few[:12])
            + (f" and {len(few) - 12} more" if len(few) > 12 else "")
            + f"; under {settings.warn_class_examples} per class the model will learn them poorly. "
            "Add examples if you can.")
    groups: dict[str, list[str]] = {}
    for c in class_counts:
        groups.setdefault(c.casefold(), []).append(c)
    similar = [g for g in groups.values() if len(g) > 1]
    if similar:
        add("warning", "similar_labels",
            "Labels that differ only in case are separate classes: "
            + "; ".join(" and ".join(quoted(c) for c in g) for g in similar[:5])
            + ". Make them the same if they mean the same.")


def _long_texts(checks: _Checks, tokenizer, max_length: int | None) -> None:
    """Warnings for texts over the character limit (cut) and, given a tokenizer, over the max length in
    tokens (truncated in training)."""
    x, add = checks.x, checks.add
    n_used = len(x.keep)
    limit = checks.settings.max_chars
    long_rows = [x.rows[i] for i in x.keep
                 if len(x.texts[i]) > limit or (x.pairs is not None and len(x.pairs[i] or "") > limit)]
    if long_rows:
        add("warning", "long_text",
            f"{len(long_rows):,} row{'s' if len(long_rows) > 1 else ''} have texts over {limit:,} characters; only the "
            f"first {limit:,} are used: {format_rows(long_rows)} ({ROW_NOTE}).", long_rows)
    if tokenizer is not None and x.keep:
        truncated, n_checked = _truncated_rows(tokenizer, x, max_length, limit)
        if truncated:
            ml = _model_max(tokenizer, max_length)
            share = f"{100 * len(truncated) / n_checked:.0f}%"
            lead = (f"{len(truncated):,} of {n_used:,} texts ({share})" if n_checked == n_used else
                    f"About {share} of the texts ({len(truncated):,} in an evenly spread sample of {n_checked:,} rows)")
            add("warning", "truncated",
                f"{lead} are longer than {ml} tokens and will be cut to that length in training: "
                f"{format_rows(truncated)} ({ROW_NOTE}). Raise the max length or shorten the texts if the end matters.",
                truncated)


def _model_max(tokenizer, max_length: int | None) -> int:
    if max_length:
        return int(max_length)
    mm = getattr(tokenizer, "model_max_length", 512) or 512
    return int(mm) if mm < 10**6 else 512


def _truncated_rows(tokenizer, x: Rows, max_length: int | None, char_limit: int) -> tuple[list[int], int]:
    """Spreadsheet rows whose text (+ pair) is longer than the max length in tokens, and how many
    rows were checked: all of them up to TOKEN_CHECK_ROWS, else an evenly spread sample (the
    fast tokenizer manages ~5-10k texts a second on 2 cores)."""
    ml = _model_max(tokenizer, max_length)
    keep = list(x.keep)
    if len(keep) > TOKEN_CHECK_ROWS:
        keep = [keep[int(k)] for k in np.linspace(0, len(keep) - 1, TOKEN_CHECK_ROWS)]
    # No tokenizer makes more tokens than UTF-8 bytes (each token covers at least one byte), so
    # texts with bytes + special tokens <= max length fit without tokenizing them.
    def n_bytes(i: int) -> int:
        pair = "" if x.pairs is None else (x.pairs[i] or "")
        return len(x.texts[i][:char_limit].encode("utf-8")) + len(pair[:char_limit].encode("utf-8"))

    suspects = [i for i in keep if n_bytes(i) + 4 > ml]
    out: list[int] = []
    step = 1000
    for start in range(0, len(suspects), step):
        idx = suspects[start:start + step]
        texts = [x.texts[i][:char_limit] for i in idx]
        pairs = None if x.pairs is None else [(x.pairs[i] or "")[:char_limit] for i in idx]
        try:
            enc = tokenizer(texts, pairs, truncation=False, add_special_tokens=True, verbose=False,
                            return_attention_mask=False, return_token_type_ids=False)
        except Exception as err:  # a broken tokenizer must not crash validation
            raise DataError(f"The tokenizer could not read the texts ({type(err).__name__}: {err}). "
                            "Choose another model or check the text column.") from None
        out.extend(x.rows[i] for i, ids in zip(idx, enc["input_ids"]) if len(ids) > ml)
    return sorted(out), len(keep)


def _truncation_check() -> dict:
    """Tokenizer and length for the report's "will be truncated" warning: the encoder's WordPiece
    vocabulary (shared by the default model and runs built on it) at BERT's 512 tokens. Skipped,
    not fatal, when the encoder package is missing."""
    try:
        return {"tokenizer": encoder_tokenizer(), "max_length": 512}
    except BertvizError:
        return {}


def review_columns(table: Table, text_column: str | None, label_column: str | None, pair_column: str | None = None,
                   multi_label: bool = False, *, settings: Settings | None = None) -> Report:
    """The validation report for a column choice (errors block training, warnings do not), with the
    limits of ``settings`` (default: ``Settings()``). Raises InputError when the choice itself is
    incomplete or inconsistent."""
    if not text_column or not label_column:
        raise InputError("Choose the text column and the label column.")
    if text_column == label_column:
        raise InputError("The text column and the label column must be different columns.")
    if pair_column and pair_column in (text_column, label_column):
        raise InputError("The second text column must differ from the text and label columns.")
    return validate(table, text_column, label_column, pair_column or None, bool(multi_label), settings=settings,
                    **_truncation_check())
