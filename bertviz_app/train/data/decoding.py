"""Bytes to text: refuse archives and other binary formats by their magic bytes (never opened),
decode UTF-8 / UTF-16 / Latin-1 with a notice, and make every line end in ``\\n``."""

from __future__ import annotations

import re

from ...errors import DataError

__all__ = ["decode", "line_ends", "refuse_binary_formats"]

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


def line_ends(text: str) -> tuple[str, int]:
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


def refuse_binary_formats(data: bytes, shown: str) -> None:
    head = data[:32]
    kind = next((what for magic, what in _MAGIC if head.startswith(magic)), None)
    if kind is None and _BZIP2.match(head):
        kind = "a bzip2-compressed file"
    if kind is not None:
        raise DataError(
            f"{shown} is {kind}, not a text table; it was not opened. Upload a plain .csv, .tsv or .txt file "
            "(extract archives first; in Excel use File > Save As > CSV UTF-8)."
        )


def decode(data: bytes, shown: str) -> tuple[str, str, list[str]]:
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

