"""``read_table``: an uploaded .csv/.tsv/.txt (a path or its bytes) parsed into a ``Table``, or a
``DataError`` saying what to fix. Nothing lets a parser exception escape; no file is decompressed."""

from __future__ import annotations

import csv
import io
import math
import os
import re
import warnings
from pathlib import Path

import pandas as pd

from ...config import Settings
from ...errors import DataError
from .decoding import decode, line_ends, refuse_binary_formats
from .messages import ROW_NOTE, display_name, format_rows, quote_list, quoted, size_text
from .records import Table

__all__ = ["DELIMITERS", "EXTENSIONS", "read_table", "read_bytes", "looks_like_conll", "TAG_LIKE"]

EXTENSIONS = (".csv", ".tsv", ".txt")
DELIMITERS = (",", "\t", ";", "|")
_DELIM_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe (|)"}
_MAX_COLUMNS = 1000
_MAX_HEADER_CHARS = 65536
_SNIFF_CHARS = 65536
TAG_LIKE = re.compile(r"^(O|[BIES]-\S+)$")  # a token tag as CoNLL files write them


def read_table(source: str | os.PathLike | bytes, name: str | None = None, min_columns: int = 2, *,
               max_upload_mb: float = Settings.max_upload_mb, max_rows: int = Settings.max_rows) -> Table:
    """Parse an uploaded .csv/.tsv/.txt table with a header row.

    ``source`` is a path or the file's bytes; ``name`` is the original file name (used for the
    extension check and in messages; defaults to the path's name). The delimiter (comma, tab,
    semicolon, pipe) is sniffed; UTF-8 with or without BOM and UTF-16 with BOM are read as such,
    anything else as Windows-1252/Latin-1 with a notice. Refuses, with a DataError that says what
    to do: a missing/empty/oversized file, archives and other binary formats (by magic bytes,
    never decompressed), more rows than allowed, a header without rows, fewer than ``min_columns``
    columns (2 for training: text and label; 1 for explaining a table of texts). ``max_upload_mb``
    and ``max_rows`` are the limits (``Settings.max_upload_mb``, ``Settings.max_rows``).
    """
    limit = int(max_upload_mb * 1e6)
    data, name = read_bytes(source, name, limit)
    shown = display_name(name)
    ext = _accepted(data, name, shown)
    text, encoding, notices = decode(data, shown)
    text, n_inline_cr = line_ends(text)
    # Leading blank lines: skip them but keep row numbers honest (a spreadsheet shows them).
    stripped = text.lstrip("\n")
    offset = len(text) - len(stripped)
    text = stripped
    _refuse_non_tables(text, shown)
    df, header, delimiter = _frame(text, ext, shown, n_inline_cr, notices, min_columns=min_columns,
                                   max_rows=max_rows, offset=offset)
    if delimiter != "," and ext != ".tsv":
        notices.append(f"Columns are separated by {_DELIM_NAMES[delimiter]}s.")
    if n_inline_cr:
        notices.append(_inline_cr_notice(df, n_inline_cr))
    return Table(df=df, name=os.path.basename(name) if name else "data", delimiter=delimiter, encoding=encoding,
                 notices=tuple(notices), header=header)


def _accepted(data: bytes, name: str | None, shown: str) -> str:
    """The file's extension, once its bytes are not empty, not a binary format and its name is a table's."""
    if not data:
        raise DataError(
            f"{shown} is empty (0 bytes). Upload a CSV with a header row (e.g. text,label) and one example per row."
        )
    refuse_binary_formats(data, shown)
    ext = os.path.splitext(name or "")[1].lower()
    if name and ext not in EXTENSIONS:
        raise DataError(
            f"{shown} is not a .csv, .tsv or .txt file. Save the table as CSV (in Excel: File > Save As > "
            "CSV UTF-8) and upload that."
        )
    return ext


def looks_like_conll(text: str, sample_lines: int = 60) -> bool:
    """Does ``text`` read as CoNLL (a token and a tag per line) rather than a table? At least five of its first
    non-blank lines, nine in ten of them with two to five fields whose last is a tag (``O``, ``B-X``...), and
    at least one ``O`` or ``B-`` tag among them."""
    lines = [ln for ln in text.split("\n", sample_lines * 4)[: sample_lines * 4] if ln.strip()][:sample_lines]
    lines = [ln for ln in lines if not ln.split()[0] == "-DOCSTART-"]
    if len(lines) < 5:
        return False
    lasts = [f[-1] for ln in lines if 2 <= len(f := (ln.split("\t") if "\t" in ln else ln.split())) <= 5]
    tagged = [t for t in lasts if TAG_LIKE.match(t.strip())]
    return len(tagged) >= 0.9 * len(lines) and any(t.strip() == "O" or t.startswith("B-") for t in tagged)


def _refuse_non_tables(text: str, shown: str) -> None:
    """Refuse a text of blank lines only, JSON, XML or HTML."""
    if not text.strip():
        raise DataError(f"{shown} has no content except blank lines. Upload a CSV with a header row and data rows.")
    head = text[:200].lstrip().lower()
    if looks_like_conll(text) or (head.startswith("{") and '"tokens"' in head):
        raise DataError(f"{shown} holds tagged tokens (a CoNLL file or JSON lines with tokens and tags): that is "
                        "what a token classifier (a named-entity tagger) learns from, the token-classification "
                        "task. This task reads a table with a header row, one text per row (and its label).")
    if head.startswith(("{", "[{", "[\n", "[ ")) or head.startswith(("<?xml", "<!doctype", "<html")):
        kind = "JSON" if head[0] in "{[" else "XML/HTML"
        raise DataError(f"{shown} contains {kind}, not a table. Save the data as CSV with a header row (e.g. "
                        f"text,label) "
                        "and upload that.")


def _frame(text: str, ext: str, shown: str, n_inline_cr: int, notices: list[str], *, min_columns: int,
           max_rows: int, offset: int) -> tuple[pd.DataFrame, tuple[str, ...], str]:
    """(data rows indexed by spreadsheet row, header, delimiter): the text split into a table within the
    limits (header length, columns, rows), wholly empty rows dropped."""
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
            f"{shown} has {n_header:,} columns; at most {_MAX_COLUMNS:,} are supported. Keep the text and label "
            f"columns."
        )
    raw = _parse(text, delimiter, max_rows, shown)  # (1 + n_rows, n_columns), header in row 0
    df = raw.iloc[1:].copy()
    header = tuple("" if isinstance(c, float) and math.isnan(c) else str(c) for c in raw.iloc[0].tolist())
    df.columns = _clean_columns(list(header), notices)
    if df.shape[1] < min_columns:
        raise DataError(
            f"{shown} has a single column (header {text[:min(header_len, 80)]!r}); it needs a text column and a "
            "label column, separated by commas, tabs, semicolons or | (e.g. text,label)."
        )
    df.index = pd.RangeIndex(2 + offset, 2 + offset + len(df), name="row")
    if len(df) > max_rows:
        raise DataError(
            f"{shown} has more than {max_rows:,} data rows, the limit (BERTVIZ_MAX_ROWS). Upload a sample "
            "of at most that many rows."
        )
    empty = df.isna().all(axis=1)
    if empty.any():
        df = df.loc[~empty]
    if len(df) == 0:
        raise DataError(
            f"{shown} has a header ({quote_list(list(df.columns))}) but no data rows below it. "
            "Add one example per row under the header."
        )
    return df, header, delimiter


def _inline_cr_notice(df: pd.DataFrame, n_inline_cr: int) -> str:
    """The notice that carriage returns inside lines were read as part of the text, with their rows."""
    has_cr = df.apply(lambda col: col.str.contains("\r", regex=False, na=False)).any(axis=1)
    cr_rows = [int(r) for r in df.index[has_cr]]
    where = f" ({format_rows(cr_rows)}; {ROW_NOTE})" if cr_rows else ""
    return (
        f"{n_inline_cr:,} carriage return{'s' if n_inline_cr != 1 else ''} (\\r) inside lines{where} "
        f"{'were' if n_inline_cr != 1 else 'was'} read as part of the text, "
        "as given, not as line breaks: the file's lines end in \\n. The model reads \\r as a space. If they were "
        "meant to start new rows, save the file with one line ending throughout."
    )


def read_bytes(source, name: str | None, limit: int) -> tuple[bytes, str | None]:
    """The upload's bytes (``source``: a path or the bytes) and its name, refused past ``limit`` bytes or when
    it is not a readable file, with a DataError that says what to do."""
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
        f"{display_name(name)} is {size_text(size)}; the limit is {size_text(limit)} (BERTVIZ_MAX_UPLOAD_MB). "
        "Upload a smaller sample of the rows."
    )


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
                lineterminator="\n",  # only \n ends a record (line_ends): a lone \r stays in its cell
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
            renamed.append(f"column {i + 1} has no name; called it {quoted(name)}")
        base, k = name, 2
        while name in seen:
            name = f"{base}_{k}"
            k += 1
        if name != base:
            renamed.append(f"a second column named {quoted(base)} is called {quoted(name)}")
        seen.add(name)
        out.append(name)
    if renamed:
        notices.append("Header: " + "; ".join(renamed) + ".")
    return out

