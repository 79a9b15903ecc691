"""Reading, checking and splitting an uploaded training table (CSV/TSV/TXT).

The flow the UI and the CLI follow::

    table = read_table(path)                      # parse; refuses hostile files with a DataError
    guess = guess_columns(table)                  # suggested text/label/pair columns, user confirms
    report = validate(table, guess.text, guess.label, guess.pair, tokenizer=tok, max_length=128)
    report.raise_if_blocking()                    # errors stop here; warnings are shown
    ds = build_dataset(table, guess.text, guess.label, guess.pair)
    train, val, notices = split_dataset(ds)       # or validation_dataset(ds, read_table(val_path), ...)

Row numbers in every record and message are spreadsheet rows: the header is row 1, so the first
data row is row 2 (a quoted cell spanning several lines is still one row, as in a spreadsheet).
Nothing here ever lets a parser exception escape: every failure is a ``DataError`` whose message
says what to fix. No file is ever decompressed.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import unicodedata
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from .config import get_settings
from .errors import BertvizError, DataError, InputError

__all__ = [
    "Table",
    "ColumnGuess",
    "Problem",
    "Report",
    "Dataset",
    "read_table",
    "guess_columns",
    "validate",
    "build_dataset",
    "split_dataset",
    "validation_dataset",
    "review_columns",
    "format_rows",
    "safe_csv_cell",
    "ROW_NOTE",
]

ROW_NOTE = "row numbers as in a spreadsheet: the header is row 1, the first data row is row 2"
EXTENSIONS = (".csv", ".tsv", ".txt")
DELIMITERS = (",", "\t", ";", "|")
_DELIM_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe (|)"}
_MAX_COLUMNS = 1000
_MAX_HEADER_CHARS = 65536
_MAX_CLASSES = 1000
_SNIFF_CHARS = 65536
_TOKEN_CHECK_ROWS = 10_000  # rows tokenized for the truncation warning (evenly spread sample above)
# Label cells that mean "no label" (what spreadsheets and pandas write for a missing value).
_MISSING_LABELS = frozenset({"", "nan", "null", "na", "n/a", "#n/a", "<na>"})
_INTLIKE = re.compile(r"^[+-]?\d+(\.0*)?$")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")

# Magic bytes of formats that are not text tables. Archives are refused unopened (zip bombs).
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a ZIP archive (an Excel .xlsx or Word .docx file is one too)"),
    (b"PK\x05\x06", "an (empty) ZIP archive"),
    (b"PK\x07\x08", "a ZIP archive"),
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\x28\xb5\x2f\xfd", "a Zstandard-compressed file"),
    (b"\x04\x22\x4d\x18", "an LZ4-compressed file"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office document (Excel .xls / Word .doc)"),
    (b"%PDF-", "a PDF document"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"PAR1", "a Parquet file"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\x7fELF", "a program (ELF executable)"),
    (b"{\\rtf", "an RTF document"),
)
_BZIP2 = re.compile(rb"^BZh[1-9]1AY&SY")

_TEXT_HINTS = ("text", "sentence", "review", "content", "comment", "body", "message", "tweet", "document",
               "utterance", "question", "premise", "passage", "description", "post", "abstract", "title")
_PAIR_HINTS = ("text_b", "textb", "text2", "sentence2", "sentence_b", "sentenceb", "hypothesis", "text_pair",
               "pair", "question2", "second_text", "context", "answer", "query2")
_LABEL_HINTS = ("label", "labels", "class", "category", "target", "sentiment", "y", "tag", "tags", "intent",
                "topic", "emotion", "stance", "rating", "polarity", "gold")
_ID_HINTS = ("id", "idx", "index", "row", "uid", "guid", "key", "unnamed")


# ----------------------------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------------------------


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
            head[col] = head[col].map(lambda v: _shorten(v, max_chars), na_action="ignore")
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
        raise DataError(f"The data cannot be used yet ({len(errs)} problems):\n" + "\n".join(f"- {p.message}" for p in errs))


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
        return _make_dataset(
            [self.texts[i] for i in idx],
            None if self.pairs is None else [self.pairs[i] for i in idx],
            [self.labels[i] for i in idx],
            self.label_names,
            self.multi_label,
            [self.source_rows[i] for i in idx],
        )


# ----------------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------------


def format_rows(rows: Sequence[int], limit: int = 8) -> str:
    """'row 2', 'rows 2 and 5', 'rows 2, 5, 9 and 37 more' (at most ``limit`` numbers shown)."""
    rows = list(rows)
    if not rows:
        return "no rows"
    if len(rows) == 1:
        return f"row {rows[0]}"
    if len(rows) <= limit:
        return "rows " + ", ".join(map(str, rows[:-1])) + f" and {rows[-1]}"
    return "rows " + ", ".join(map(str, rows[:limit])) + f" and {len(rows) - limit:,} more"


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


def _shorten(value: object, max_chars: int) -> str:
    text = str(value)
    return text if len(text) <= max_chars else text[: max(1, max_chars - 1)] + "…"


def _q(value: object, max_chars: int = 60) -> str:
    """A user-supplied name (column, label) quoted for a message, cut if it is very long."""
    return repr(_shorten(value, max_chars))


def _quote_list(items: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(_q(c) for c in list(items)[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _fmt_size(n: float) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e5 else f"{n / 1e3:,.1f} kB" if n >= 1e3 else f"{int(n)} bytes"


def _display_name(name: str | None) -> str:
    return repr(os.path.basename(name)) if name else "The uploaded data"


# ----------------------------------------------------------------------------------------------
# read_table
# ----------------------------------------------------------------------------------------------


def read_table(source: str | os.PathLike | bytes, name: str | None = None, min_columns: int = 2) -> Table:
    """Parse an uploaded .csv/.tsv/.txt table with a header row.

    ``source`` is a path or the file's bytes; ``name`` is the original file name (used for the
    extension check and in messages; defaults to the path's name). The delimiter (comma, tab,
    semicolon, pipe) is sniffed; UTF-8 with or without BOM and UTF-16 with BOM are read as such,
    anything else as Windows-1252/Latin-1 with a notice. Refuses, with a DataError that says what
    to do: a missing/empty/oversized file, archives and other binary formats (by magic bytes,
    never decompressed), more rows than allowed, a header without rows, fewer than ``min_columns``
    columns (2 for training: text and label; 1 for explaining a table of texts).
    """
    settings = get_settings()
    limit = int(settings.max_upload_mb * 1e6)
    data, name = _read_bytes(source, name, limit)
    shown = _display_name(name)
    if not data:
        raise DataError(
            f"{shown} is empty (0 bytes). Upload a CSV with a header row (e.g. text,label) and one example per row."
        )
    _refuse_binary_formats(data, shown)
    ext = os.path.splitext(name or "")[1].lower()
    if name and ext not in EXTENSIONS:
        raise DataError(
            f"{shown} is not a .csv, .tsv or .txt file. Save the table as CSV (in Excel: File > Save As > "
            "CSV UTF-8) and upload that."
        )
    text, encoding, notices = _decode(data, shown)
    text, n_inline_cr = _line_ends(text)
    # Leading blank lines: skip them but keep row numbers honest (a spreadsheet shows them).
    stripped = text.lstrip("\n")
    offset = len(text) - len(stripped)
    text = stripped
    if not text.strip():
        raise DataError(f"{shown} has no content except blank lines. Upload a CSV with a header row and data rows.")
    head = text[:200].lstrip().lower()
    if head.startswith(("{", "[{", "[\n", "[ ")) or head.startswith(("<?xml", "<!doctype", "<html")):
        kind = "JSON" if head[0] in "{[" else "XML/HTML"
        raise DataError(f"{shown} contains {kind}, not a table. Save the data as CSV with a header row (e.g. text,label) "
                        "and upload that.")
    header_end = text.find("\n")
    header_len = len(text) if header_end < 0 else header_end
    if header_len > _MAX_HEADER_CHARS:
        raise DataError(
            f"The first line of {shown} is {header_len:,} characters long. The first line must be a short header "
            "of column names (e.g. text,label) followed by one example per line."
        )
    # the sniffer's csv.reader takes a lone \r in an unquoted field for a line break: hide it there
    delimiter, n_header = _sniff(text.replace("\r", " ") if n_inline_cr else text, ext)
    if n_header > _MAX_COLUMNS:
        raise DataError(
            f"{shown} has {n_header:,} columns; at most {_MAX_COLUMNS:,} are supported. Keep the text and label columns."
        )
    raw = _parse(text, delimiter, settings.max_rows, shown)  # (1 + n_rows, n_columns), header in row 0
    df = raw.iloc[1:].copy()
    header = tuple("" if isinstance(c, float) and math.isnan(c) else str(c) for c in raw.iloc[0].tolist())
    df.columns = _clean_columns(list(header), notices)
    if df.shape[1] < min_columns:
        raise DataError(
            f"{shown} has a single column (header {text[:min(header_len, 80)]!r}); it needs a text column and a "
            "label column, separated by commas, tabs, semicolons or | (e.g. text,label)."
        )
    df.index = pd.RangeIndex(2 + offset, 2 + offset + len(df), name="row")
    if len(df) > settings.max_rows:
        raise DataError(
            f"{shown} has more than {settings.max_rows:,} data rows, the limit (BERTVIZ_MAX_ROWS). Upload a sample "
            "of at most that many rows."
        )
    empty = df.isna().all(axis=1)
    if empty.any():
        df = df.loc[~empty]
    if len(df) == 0:
        raise DataError(
            f"{shown} has a header ({_quote_list(list(df.columns))}) but no data rows below it. "
            "Add one example per row under the header."
        )
    if delimiter != "," and ext != ".tsv":
        notices.append(f"Columns are separated by {_DELIM_NAMES[delimiter]}s.")
    if n_inline_cr:
        has_cr = df.apply(lambda col: col.str.contains("\r", regex=False, na=False)).any(axis=1)
        cr_rows = [int(r) for r in df.index[has_cr]]
        where = f" ({format_rows(cr_rows)}; {ROW_NOTE})" if cr_rows else ""
        notices.append(
            f"{n_inline_cr:,} carriage return{'s' if n_inline_cr != 1 else ''} (\\r) inside lines{where} "
            f"{'were' if n_inline_cr != 1 else 'was'} read as part of the text, "
            "as given, not as line breaks: the file's lines end in \\n. The model reads \\r as a space. If they were "
            "meant to start new rows, save the file with one line ending throughout."
        )
    return Table(df=df, name=os.path.basename(name) if name else "data", delimiter=delimiter, encoding=encoding,
                 notices=tuple(notices), header=header)


def _read_bytes(source, name: str | None, limit: int) -> tuple[bytes, str | None]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if len(data) > limit:
            raise DataError(_too_big(name, len(data), limit))
        return data, name
    if not isinstance(source, (str, os.PathLike)):
        raise DataError(f"Expected a file path or the file's bytes, got {type(source).__name__}.")
    path = Path(source)
    name = name or path.name
    try:
        if not path.exists():
            raise DataError(f"File not found: {str(path)!r}. Upload the file again.")
        if path.is_dir():
            raise DataError(f"{str(path)!r} is a folder; choose a .csv, .tsv or .txt file.")
        if not path.is_file():
            raise DataError(f"{str(path)!r} is not a regular file; choose a .csv, .tsv or .txt file.")
        size = path.stat().st_size
        if size > limit:
            raise DataError(_too_big(name, size, limit))
        with path.open("rb") as fh:
            data = fh.read(limit + 1)  # bounded even if the file grew since stat
    except OSError as err:
        raise DataError(f"Could not read {str(path)!r}: {err.strerror or err}. Upload the file again.") from None
    if len(data) > limit:
        raise DataError(_too_big(name, len(data), limit))
    return data, name


def _too_big(name: str | None, size: int, limit: int) -> str:
    return (
        f"{_display_name(name)} is {_fmt_size(size)}; the limit is {_fmt_size(limit)} (BERTVIZ_MAX_UPLOAD_MB). "
        "Upload a smaller sample of the rows."
    )


def _line_ends(text: str) -> tuple[str, int]:
    """The text with every line ending as ``\\n``, and how many carriage returns were kept as text.

    The line ending is what ends the header line. When that is ``\\n`` or ``\\r\\n``, a lone ``\\r``
    elsewhere is part of a cell, not a line break: Python's csv module (and so pandas' ``to_csv``)
    writes a cell holding a lone ``\\r`` unquoted when the line terminator is ``\\n``, so splitting
    there would cut rows in pieces. When the header ends in a lone ``\\r`` (old Mac files), every
    ``\\r`` is a line break. ``\\r\\n`` always becomes ``\\n``, inside quoted cells too."""
    if "\r" not in text:
        return text, 0
    text = text.replace("\r\n", "\n")
    first = re.search(r"[^\r\n][\r\n]", text)  # the end of the first non-blank line
    if first is None or text[first.end() - 1] == "\r":
        return text.replace("\r", "\n"), 0
    return text, text.count("\r")


def _refuse_binary_formats(data: bytes, shown: str) -> None:
    head = data[:32]
    kind = next((what for magic, what in _MAGIC if head.startswith(magic)), None)
    if kind is None and _BZIP2.match(head):
        kind = "a bzip2-compressed file"
    if kind is not None:
        raise DataError(
            f"{shown} is {kind}, not a text table; it was not opened. Upload a plain .csv, .tsv or .txt file "
            "(extract archives first; in Excel use File > Save As > CSV UTF-8)."
        )


def _decode(data: bytes, shown: str) -> tuple[str, str, list[str]]:
    notices: list[str] = []
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text, encoding = data.decode("utf-16"), "utf-16"
        except UnicodeDecodeError:
            raise DataError(
                f"{shown} starts like UTF-16 text but is not valid UTF-16. Save it as CSV UTF-8 and upload again."
            ) from None
        notices.append("The file is UTF-16 text; it was read as such.")
    else:
        encoding = "utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8"
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError as err:
            line = data[: err.start].count(b"\n") + 1
            try:
                text, encoding = data.decode("cp1252"), "cp1252"
            except UnicodeDecodeError:
                text, encoding = data.decode("latin-1"), "latin-1"
            notices.append(
                f"The file is not valid UTF-8 (first bad byte on line {line}); it was read as Latin-1 "
                f"({'Windows-1252' if encoding == 'cp1252' else 'ISO-8859-1'}). If accents look wrong, save it as "
                "UTF-8 and upload again."
            )
    sample = text[:1_000_000]
    n_nul = text.count("\x00")
    bad = sum(1 for ch in sample if _is_binary_char(ch))
    if sample and (bad > max(2, 0.01 * len(sample))):
        hint = " (many NUL bytes: if it is UTF-16 text without a BOM, save it as UTF-8)" if n_nul else ""
        raise DataError(
            f"{shown} does not look like a text table: {bad:,} of its first {len(sample):,} characters are binary "
            f"control bytes{hint}. Upload a plain .csv, .tsv or .txt file."
        )
    if n_nul:
        text = text.replace("\x00", "")
        notices.append(f"Removed {n_nul:,} NUL byte{'s' if n_nul != 1 else ''} (\\x00) from the file.")
    return text, encoding, notices


def _is_binary_char(ch: str) -> bool:
    o = ord(ch)
    if o < 32:
        return ch not in "\t\n\r\f\v"
    return o == 0x7F or 0x80 <= o < 0xA0


def _sniff(text: str, ext: str) -> tuple[str, int]:
    """Pick the delimiter whose header splits into >= 2 fields and whose first records agree
    with the header's field count best. Returns (delimiter, fields in the header)."""
    sample = text[:_SNIFF_CHARS]
    cut = len(text) > len(sample)
    order = ("\t", ",", ";", "|") if ext == ".tsv" else DELIMITERS
    best: tuple[float, int, int] | None = None
    choice, n_header = order[0], 1
    for rank, delim in enumerate(order):
        try:
            records = [r for r in csv.reader(io.StringIO(sample), delimiter=delim, quotechar='"') if r]
        except csv.Error:
            continue
        if cut and len(records) > 1:
            records = records[:-1]  # the last one may be cut mid-record
        if not records or len(records[0]) < 2:
            continue
        header = len(records[0])
        rows = records[1:51]
        agree = sum(len(r) == header for r in rows) / len(rows) if rows else 1.0
        score = (agree, -rank, header)
        if best is None or score > best:
            best, choice, n_header = score, delim, header
    return choice, n_header


def _parse(text: str, delimiter: str, max_rows: int, shown: str) -> pd.DataFrame:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pd.read_csv(
                io.StringIO(text),
                sep=delimiter,
                header=None,  # names taken from row 0 by _clean_columns (no pandas '.1' mangling)
                dtype=str,
                keep_default_na=False,
                na_values=[""],
                skip_blank_lines=False,
                index_col=False,
                quotechar='"',
                doublequote=True,
                engine="c",
                lineterminator="\n",  # only \n ends a record (_line_ends): a lone \r stays in its cell
                nrows=max_rows + 2,  # header + one row over the limit
            )
    except pd.errors.EmptyDataError:
        raise DataError(f"{shown} has no header row. The first line must name the columns (e.g. text,label).") from None
    except (pd.errors.ParserError, ValueError, OverflowError, MemoryError) as err:
        msg = str(err)
        name = _DELIM_NAMES[delimiter]
        m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", msg)
        if m:
            want, line, saw = m.groups()
            raise DataError(
                f"Row {line} of {shown} has {saw} fields but the header has {want} (columns separated by {name}s; "
                f"{ROW_NOTE}). Put text that contains a {name} in double quotes, or remove the extra field."
            ) from None
        m = re.search(r"EOF inside string starting at row (\d+)", msg)
        if m:
            raise DataError(
                f"A quoted field starting in row {int(m.group(1)) + 1} of {shown} never ends ({ROW_NOTE}). "
                'Check that row for a stray double quote (") and close or remove it.'
            ) from None
        detail = msg.strip().splitlines()[-1] if msg.strip() else type(err).__name__
        raise DataError(
            f"{shown} could not be read as a table separated by {name}s ({detail}). Check that it is a CSV with a "
            "header row."
        ) from None


def _clean_columns(columns: list, notices: list[str]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    renamed: list[str] = []
    for i, col in enumerate(columns):
        name = "" if col is None or (isinstance(col, float) and math.isnan(col)) else str(col).strip()
        if not name:
            name = f"column_{i + 1}"
            renamed.append(f"column {i + 1} has no name; called it {_q(name)}")
        base, k = name, 2
        while name in seen:
            name = f"{base}_{k}"
            k += 1
        if name != base:
            renamed.append(f"a second column named {_q(base)} is called {_q(name)}")
        seen.add(name)
        out.append(name)
    if renamed:
        notices.append("Header: " + "; ".join(renamed) + ".")
    return out


# ----------------------------------------------------------------------------------------------
# guess_columns
# ----------------------------------------------------------------------------------------------


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
            reasons.append(f"{what}: {_q(col)} (name)")
    if label is None:
        small = [c for c in cols if c not in (text, pair) and not is_id(c) and stats[c][2] > 0.5
                 and 2 <= stats[c][1] <= max(2, min(_MAX_CLASSES, n // 2)) and stats[c][0] <= 40]
        if small:
            label = min(small, key=lambda c: (stats[c][1], cols.index(c)))
            reasons.append(f"label: {_q(label)} ({stats[label][1]} distinct values)")
    if text is None:
        rest = [c for c in cols if c not in (label, pair) and stats[c][2] > 0]
        free = [c for c in rest if not is_id(c)] or rest
        if free:
            text = max(free, key=lambda c: (stats[c][0], -cols.index(c)))
            reasons.append(f"text: {_q(text)} (longest cells, {stats[text][0]:.0f} characters on average)")
    return ColumnGuess(text=text, label=label, pair=pair, columns=tuple(cols), reasons=tuple(reasons))


# ----------------------------------------------------------------------------------------------
# validate / build_dataset
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rows:
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


def _check_columns(table: Table, text_col, label_col, pair_col) -> None:
    cols = table.columns
    shown = _quote_list(cols)
    for what, col in (("text", text_col), ("label", label_col), ("second text", pair_col)):
        if col is None and what == "second text":
            continue
        if col is None or (isinstance(col, str) and not col.strip()):
            raise DataError(f"Choose the {what} column. Available columns: {shown}.")
        if col not in cols:
            raise DataError(f"There is no column {_q(str(col))} in {table.name!r}; choose the {what} column from: {shown}.")
    if text_col == label_col:
        raise DataError(f"The text and label columns are both {_q(text_col)}; choose two different columns from: {shown}.")
    if pair_col is not None and pair_col in (text_col, label_col):
        raise DataError(
            f"The second text column {_q(pair_col)} is already used as the text or label column; choose another or none."
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
    if raw.casefold() in _MISSING_LABELS:
        return None
    if not multi_label:
        return (raw,)
    parts: list[str] = []
    for p in raw.split(sep):
        p = p.strip()
        if p and p.casefold() not in _MISSING_LABELS and p not in parts:
            parts.append(p)
    return tuple(parts) or None


def _extract(table: Table, text_col: str, label_col: str, pair_col: str | None, multi_label: bool, sep: str) -> _Rows:
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
    return _Rows(rows, texts, pairs, tuple(labels), tuple(keep), tuple(empty_text), tuple(missing_label),
                 tuple(empty_pair), tuple(dups), tuple(conflicts), names)


def validate(
    table: Table,
    text_col: str,
    label_col: str,
    pair_col: str | None = None,
    multi_label: bool = False,
    tokenizer=None,
    max_length: int | None = None,
    label_sep: str = "|",
) -> Report:
    """Check the chosen columns before training and list every problem with its rows.

    Errors (block training): no usable rows, an empty label column, a single class, a class with
    fewer than ``BERTVIZ_MIN_CLASS_EXAMPLES`` examples, labels that look like free text.
    Warnings: empty texts and missing labels (those rows are skipped), duplicates (later copies
    skipped; conflicting labels called out), classes under ``BERTVIZ_WARN_CLASS_EXAMPLES``,
    texts over ``BERTVIZ_MAX_CHARS`` characters (cut), and, given a tokenizer, texts longer than
    ``max_length`` tokens (truncated in training). Unknown column names raise DataError at once.
    """
    _check_columns(table, text_col, label_col, pair_col)
    settings = get_settings()
    x = _extract(table, text_col, label_col, pair_col, multi_label, label_sep)
    problems: list[Problem] = []

    def add(sev, code, msg, rows=()):
        problems.append(Problem(sev, code, msg, tuple(rows)))

    n_rows = len(x.rows)
    any_label = any(lab is not None for lab in x.labels)
    if not any_label:
        add("error", "label_all_missing",
            f"The label column {_q(label_col)} is empty in every row. Choose the column that holds the classes "
            f"(columns: {_quote_list(table.columns)}) or fill in the labels.")
    if not any(t is not None for t in x.texts):
        add("error", "text_all_missing",
            f"The text column {_q(text_col)} is empty in every row. Choose the column that holds the texts "
            f"(columns: {_quote_list(table.columns)}).")
    if x.empty_text:
        add("warning", "empty_text",
            f"{len(x.empty_text):,} row{'s' if len(x.empty_text) > 1 else ''} with empty text in {_q(text_col)} will be "
            f"skipped: {format_rows(x.empty_text)} ({ROW_NOTE}). Fill in the text or delete those rows.", x.empty_text)
    if x.missing_label and any_label:
        add("warning", "missing_label",
            f"{len(x.missing_label):,} row{'s' if len(x.missing_label) > 1 else ''} without a label in {_q(label_col)} "
            f"will be skipped: {format_rows(x.missing_label)} ({ROW_NOTE}). Add the labels or delete those rows.",
            x.missing_label)
    if x.empty_pair:
        add("warning", "empty_pair",
            f"{len(x.empty_pair):,} row{'s' if len(x.empty_pair) > 1 else ''} have an empty second text in "
            f"{_q(pair_col)} and are used with an empty one: {format_rows(x.empty_pair)} ({ROW_NOTE}).", x.empty_pair)
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

    used = [x.labels[i] for i in x.keep]
    counts = Counter(p for lab in used for p in lab)
    class_counts = {name: int(counts[name]) for name in x.label_names if counts[name]}
    n_classes = len(class_counts)
    n_used = len(x.keep)
    if not multi_label and any(label_sep in p for p in counts) and sum(
            c for p, c in counts.items() if label_sep in p) >= max(2, n_used // 10):
        add("warning", "looks_multi_label",
            f"Many labels contain {label_sep!r} (e.g. {_q(next(p for p in counts if label_sep in p))}); if rows can have "
            "several labels, tick multi-label so they are split.")
    too_many = n_classes > _MAX_CLASSES or (n_used >= 10 and n_classes > n_used / 2)
    if n_used == 0 and not any(p.code in ("label_all_missing", "text_all_missing") for p in problems):
        add("error", "no_rows", f"No row has both a text in {_q(text_col)} and a label in {_q(label_col)}. Fill them in, "
                                "or choose other columns.")
    elif too_many:
        add("error", "too_many_classes",
            f"The label column {_q(label_col)} has {n_classes:,} different values in {n_used:,} rows; it looks like free "
            f"text, not classes. Choose the column that holds the classes (columns: {_quote_list(table.columns)}).")
    elif n_classes == 1:
        only = next(iter(class_counts))
        add("error", "single_class",
            f"Every usable row has the same label, {_q(only)} ({n_used:,} row{'s' if n_used > 1 else ''}); a classifier "
            "needs at least two classes. Add examples of another class or choose another label column.")
    if n_classes >= 2 and not too_many:
        rows_of: dict[str, list[int]] = {}
        for i in x.keep:
            for p in x.labels[i]:
                rows_of.setdefault(p, []).append(x.rows[i])
        rare = [c for c, k in class_counts.items() if k < settings.min_class_examples]
        if rare:
            rr = sorted(r for c in rare for r in rows_of[c])
            add("error", "rare_class",
                f"Class{'es' if len(rare) > 1 else ''} {_quote_list(rare)} "
                f"{'have' if len(rare) > 1 else 'has'} fewer than {settings.min_class_examples} examples "
                f"({format_rows(rr)}; {ROW_NOTE}). Add examples, fix a misspelt label, or delete those rows "
                "(BERTVIZ_MIN_CLASS_EXAMPLES sets the minimum).", rr)
        few = [c for c, k in class_counts.items() if settings.min_class_examples <= k < settings.warn_class_examples]
        if few:
            add("warning", "few_examples",
                "Few examples for " + ", ".join(f"{_q(c)} ({class_counts[c]})" for c in few[:12])
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
                + "; ".join(" and ".join(_q(c) for c in g) for g in similar[:5])
                + ". Make them the same if they mean the same.")

    limit = settings.max_chars
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

    summary = {
        "n_rows": n_rows,
        "n_used": n_used,
        "n_dropped": n_rows - n_used,
        "n_classes": n_classes,
        "class_counts": class_counts,
        "multi_label": bool(multi_label),
    }
    order = {"error": 0, "warning": 1}
    return Report(problems=tuple(sorted(problems, key=lambda p: order[p.severity])), summary=summary)


def _model_max(tokenizer, max_length: int | None) -> int:
    if max_length:
        return int(max_length)
    mm = getattr(tokenizer, "model_max_length", 512) or 512
    return int(mm) if mm < 10**6 else 512


def _truncated_rows(tokenizer, x: _Rows, max_length: int | None, char_limit: int) -> tuple[list[int], int]:
    """Spreadsheet rows whose text (+ pair) is longer than the max length in tokens, and how many
    rows were checked: all of them up to _TOKEN_CHECK_ROWS, else an evenly spread sample (the
    fast tokenizer manages ~5-10k texts a second on 2 cores)."""
    ml = _model_max(tokenizer, max_length)
    keep = list(x.keep)
    if len(keep) > _TOKEN_CHECK_ROWS:
        keep = [keep[int(k)] for k in np.linspace(0, len(keep) - 1, _TOKEN_CHECK_ROWS)]
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


def _hash(texts, pairs, labels, label_names, multi_label) -> str:
    payload = json.dumps(
        {"texts": list(texts), "pairs": None if pairs is None else list(pairs),
         "labels": [list(lab) if multi_label else lab for lab in labels],
         "label_names": list(label_names), "multi_label": multi_label},
        ensure_ascii=False, separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def _make_dataset(texts, pairs, labels, label_names, multi_label, source_rows) -> Dataset:
    texts, labels = tuple(texts), tuple(tuple(lab) if multi_label else int(lab) for lab in labels)
    pairs = None if pairs is None else tuple(pairs)
    return Dataset(texts=texts, pairs=pairs, labels=labels, label_names=tuple(label_names), multi_label=multi_label,
                   source_rows=tuple(int(r) for r in source_rows),
                   data_hash=_hash(texts, pairs, labels, label_names, multi_label))


def build_dataset(
    table: Table,
    text_col: str,
    label_col: str,
    pair_col: str | None = None,
    multi_label: bool = False,
    label_sep: str = "|",
) -> Dataset:
    """The rows ``validate`` accepts, as a Dataset: rows with empty text or no label and later
    duplicates are dropped, texts are cut at BERTVIZ_MAX_CHARS, label names sorted (numerically
    when all labels are integers). Raises DataError if ``validate`` finds a blocking error."""
    validate(table, text_col, label_col, pair_col, multi_label, label_sep=label_sep).raise_if_blocking()
    x = _extract(table, text_col, label_col, pair_col, multi_label, label_sep)
    return _dataset_from(x, x.label_names, multi_label)


def _dataset_from(x: _Rows, label_names: Sequence[str], multi_label: bool) -> Dataset:
    limit = get_settings().max_chars
    index = {name: i for i, name in enumerate(label_names)}
    texts = [x.texts[i][:limit] for i in x.keep]
    pairs = None if x.pairs is None else [(x.pairs[i] or "")[:limit] for i in x.keep]
    if multi_label:
        labels = [tuple(sorted(index[p] for p in x.labels[i])) for i in x.keep]
    else:
        labels = [index[x.labels[i][0]] for i in x.keep]
    return _make_dataset(texts, pairs, labels, label_names, multi_label, [x.rows[i] for i in x.keep])


def validation_dataset(
    train: Dataset,
    table: Table,
    text_col: str,
    label_col: str,
    pair_col: str | None = None,
    label_sep: str = "|",
) -> tuple[Dataset, tuple[str, ...]]:
    """A separate validation file as a Dataset with the training set's label names.

    Rows with empty text or no label, repeats, and texts that are also in the training data
    are dropped (each with a notice). Labels the training data lacks raise DataError.
    """
    _check_columns(table, text_col, label_col, pair_col)
    if (train.pairs is None) != (pair_col is None):
        need = "a second text column too" if train.pairs is not None else "no second text column"
        raise DataError(f"The training data {'has' if train.pairs is not None else 'has no'} text pairs; choose {need} "
                        "for the validation file.")
    x = _extract(table, text_col, label_col, pair_col, train.multi_label, label_sep)
    known = set(train.label_names)
    unknown: dict[str, list[int]] = {}
    for i in x.keep:
        for p in x.labels[i]:
            if p not in known:
                unknown.setdefault(p, []).append(x.rows[i])
    if unknown:
        rows = sorted(r for rs in unknown.values() for r in rs)
        raise DataError(
            f"The validation file {table.name!r} has labels the training data does not: {_quote_list(list(unknown))} "
            f"({format_rows(rows)}; {ROW_NOTE}). Training labels: {_quote_list(train.label_names)}."
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
        raise DataError(f"The validation file {table.name!r} has no usable rows (each needs a text in {_q(text_col)}, a "
                        f"label in {_q(label_col)}, and a text not already in the training data).")
    return _dataset_from(x, train.label_names, train.multi_label), tuple(notices)


def _replace_keep(x: _Rows, keep: tuple[int, ...]) -> _Rows:
    return replace(x, keep=keep)


# ----------------------------------------------------------------------------------------------
# split_dataset
# ----------------------------------------------------------------------------------------------


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
            notices.append(f"Class{'es' if len(small) > 1 else ''} {_quote_list(small)} "
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


def _truncation_check() -> dict:
    """Tokenizer and length for the report's "will be truncated" warning: the encoder's WordPiece
    vocabulary (shared by the default model and runs built on it) at BERT's 512 tokens. Skipped,
    not fatal, when the encoder package is missing."""
    try:
        from .default_model import encoder_tokenizer

        return {"tokenizer": encoder_tokenizer(), "max_length": 512}
    except BertvizError:
        return {}


def review_columns(table: Table, text_column: str | None, label_column: str | None, pair_column: str | None = None,
                   multi_label: bool = False) -> Report:
    """The validation report for a column choice (errors block training, warnings do not).
    Raises InputError when the choice itself is incomplete or inconsistent."""
    if not text_column or not label_column:
        raise InputError("Choose the text column and the label column.")
    if text_column == label_column:
        raise InputError("The text column and the label column must be different columns.")
    if pair_column and pair_column in (text_column, label_column):
        raise InputError("The second text column must differ from the text and label columns.")
    return validate(table, text_column, label_column, pair_column or None, bool(multi_label), **_truncation_check())
