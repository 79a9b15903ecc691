"""Reading, checking and splitting an uploaded training table (CSV/TSV/TXT).

The flow the UI and the CLI follow::

    table = read_table(path)                      # parse; refuses hostile files with a DataError
    guess = guess_columns(table)                  # suggested text/label/pair columns, user confirms
    report = validate(table, guess.text, guess.label, guess.pair, tokenizer=tok, max_length=128)
    report.raise_if_blocking()                    # errors stop here; warnings are shown
    ds = build_dataset(table, guess.text, guess.label, guess.pair)
    train, val, notices = split_dataset(ds)       # or validation_dataset(ds, read_table(val_path), ...)

One module per step: ``reading`` (and ``decoding``: bytes to text), ``columns`` (the guess),
``rows`` and ``validation`` (the report), ``datasets`` (build, validation file, split); the
records are in ``records``, the wording of messages in ``messages``. The limits (upload size,
rows, class sizes, text length) are arguments with ``Settings``' defaults; nothing here reads
the environment.

Row numbers in every record and message are spreadsheet rows: the header is row 1, so the first
data row is row 2 (a quoted cell spanning several lines is still one row, as in a spreadsheet).
Nothing here ever lets a parser exception escape: every failure is a ``DataError`` whose message
says what to fix. No file is ever decompressed.
"""

from __future__ import annotations

from .columns import choose_columns, describe_columns, guess_columns, holds_numbers, no_text_message
from .datasets import build_dataset, split_dataset, validation_dataset
from .messages import ROW_NOTE, format_rows, safe_csv_cell
from .reading import DELIMITERS, EXTENSIONS, read_table
from .records import ColumnGuess, Dataset, Problem, Report, Table
from .validation import review_columns, validate

__all__ = [
    "Table",
    "ColumnGuess",
    "Problem",
    "Report",
    "Dataset",
    "read_table",
    "guess_columns",
    "choose_columns",
    "holds_numbers",
    "describe_columns",
    "no_text_message",
    "validate",
    "build_dataset",
    "split_dataset",
    "validation_dataset",
    "review_columns",
    "format_rows",
    "safe_csv_cell",
    "ROW_NOTE",
    "EXTENSIONS",
    "DELIMITERS",
]
