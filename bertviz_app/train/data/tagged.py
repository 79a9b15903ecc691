"""``read_tagged``: a file of tagged sentences (what a token classifier, a named-entity tagger, learns from and is
evaluated on) parsed into a ``TaggedFile``, or a ``DataError`` saying what to fix.

Three formats, told apart by their content (the extension is only a hint):

- **CoNLL**: one token per line with its tag in the last column (columns split by tabs, or by spaces where a
  line has no tab; the columns between are ignored, as CoNLL-2003's POS and chunk columns), a blank line
  between sentences, ``-DOCSTART-`` lines skipped. Numbers in messages are the file's lines.
- **JSON lines**: one ``{"tokens": [...], "tags": [...]}`` object per line (``ner_tags`` is read as
  ``tags`` when its values are strings). Numbers in messages are the file's lines.
- **CSV/TSV** with ``tokens`` and ``tags`` columns, read by the project's table reader (``read_table``: its
  encodings, size checks and notices); a cell holds a JSON list (``["EU", "rejects"]``) or the items split by
  whitespace. Numbers in messages are spreadsheet rows.

Tags: ``O`` and ``B-TYPE``/``I-TYPE`` (IOB2), or plain types with no prefix at all (IO: each run of one type is
one entity). IOB1 files (CoNLL-2003's original scheme, where an entity starts with ``I-`` and ``B-`` only
separates two entities of one type) are converted to IOB2 with a notice; in an IOB2 file an ``I-X`` after
``O`` or after another type is read as ``B-X``, the start of an entity, as seqeval's lenient mode reads it,
with a notice naming the lines. A tag in neither form (``S-PER``, ``B_PER``, a mix of prefixed and plain
tags), a token without a tag, an empty sentence, tokens and tags of different lengths: a DataError naming
the lines or rows. A classifier's table (a text and a label per row) is refused with a message that names
the text-classification task; ``looks_like_conll`` lets the classifier's readers refuse a CoNLL file the same
way.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ...config import Settings
from ...errors import DataError
from .decoding import decode, line_ends, refuse_binary_formats
from .messages import display_name, format_rows, quote_list, quoted
from .reading import TAG_LIKE, looks_like_conll, read_bytes, read_table

__all__ = ["TaggedSentence", "TaggedFile", "read_tagged", "looks_like_conll", "entity_types", "FORMATS"]

FORMATS = ("conll", "jsonl", "csv")
_PREFIXED = re.compile(r"^([BI])-(\S+)$")
_BAD_PREFIX = re.compile(r"^([A-Za-z])[-_](\S+)$")
_DOCSTART = "-DOCSTART-"  # a CoNLL document break, not a token


@dataclass(frozen=True)
class TaggedSentence:
    """One sentence: its tokens (words, as the file gives them) and one tag each; ``where``: the line (CoNLL,
    JSON lines) or spreadsheet row (CSV) it starts on."""

    tokens: tuple[str, ...]
    tags: tuple[str, ...]
    where: int


@dataclass(frozen=True)
class TaggedFile:
    """A read file: its sentences in file order, the tag set (``O`` first, then each type's ``B-`` and ``I-``),
    the scheme (``IOB2`` or ``IO``; an IOB1 file has been converted), what the reader did (``notices``) and
    what a number in a message counts (``unit``: "line" or "row")."""

    name: str
    format: str
    sentences: tuple[TaggedSentence, ...]
    tags: tuple[str, ...]
    scheme: str
    notices: tuple[str, ...]
    unit: str

    @property
    def n_tokens(self) -> int:
        return sum(len(s.tokens) for s in self.sentences)

    @property
    def types(self) -> list[str]:
        """The entity types, in order of the tag set."""
        return entity_types(self.tags)


def entity_types(tags: Sequence[str]) -> list[str]:
    """The entity types a tag set names (``B-PER``, ``I-PER`` and ``PER`` all name ``PER``), each once, in order."""
    out = [m[2] if (m := _PREFIXED.match(t)) else t for t in tags if t != "O"]
    return list(dict.fromkeys(out))


def read_tagged(source: str | os.PathLike | bytes, name: str | None = None, *,
                max_upload_mb: float = Settings.max_upload_mb, max_sentences: int = Settings.max_rows) -> TaggedFile:
    """Parse a CoNLL, JSON-lines or CSV file of tagged sentences (see the module's docstring). ``source``: a path
    or the file's bytes; ``name``: the file's name for messages (default: the path's); ``max_upload_mb`` and
    ``max_sentences``: the limits (``Settings.max_upload_mb``, ``Settings.max_rows``)."""
    data, name = read_bytes(source, name, int(max_upload_mb * 1e6))
    shown = display_name(name)
    refuse_binary_formats(data, shown)
    text, _, notices = decode(data, shown)
    text, _ = line_ends(text)
    if not text.strip():
        raise DataError(f"{shown} is empty. Upload a CoNLL file (a token and its tag per line, a blank line "
                        "between sentences), JSON lines with tokens and tags, or a CSV with tokens and tags columns.")
    kind = _format_of(text)
    if kind == "csv":
        sentences, unit = _csv_sentences(data, name, shown, notices, max_upload_mb, max_sentences), "row"
    elif kind == "jsonl":
        sentences, unit = _jsonl_sentences(text, shown), "line"
    else:
        sentences, unit = _conll_sentences(text, shown), "line"
    _refuse_untagged_text(sentences, shown)
    if not sentences:
        raise DataError(f"{shown} holds no sentence with tokens. Put one token and its tag per line, "
                        "a blank line between sentences.")
    if len(sentences) > max_sentences:
        raise DataError(f"{shown} holds {len(sentences):,} sentences; the limit is {max_sentences:,} "
                        "(BERTVIZ_MAX_ROWS). Upload a sample of them.")
    sentences, scheme, tag_notices = _checked_scheme(sentences, shown, unit, token_lines=kind == "conll")
    return TaggedFile(name=os.path.basename(name) if name else "data", format=kind, sentences=tuple(sentences),
                      tags=_tag_set(sentences, scheme), scheme=scheme, notices=tuple(notices + tag_notices), unit=unit)


def _format_of(text: str) -> str:
    first = text.lstrip()[:1]
    if first == "{":
        return "jsonl"
    header = text.lstrip("\n").split("\n", 1)[0]
    names = {c.strip().strip('"').lower() for c in re.split(r"[,\t;|]", header)}
    if names & {"tokens", "words"}:
        return "csv"
    last = header.split()[-1] if header.split() else ""
    if looks_like_conll(text) or TAG_LIKE.match(last):
        return "conll"
    return "csv" if len(names) >= 2 else "conll"


def _conll_sentences(text: str, shown: str) -> list[TaggedSentence]:
    sentences: list[TaggedSentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    start = 0
    untagged: list[int] = []
    for number, line in enumerate(text.split("\n"), start=1):
        fields = line.split("\t") if "\t" in line else line.split()
        fields = [f.strip() for f in fields]
        if not line.strip() or fields[0] == _DOCSTART:
            if tokens:
                sentences.append(TaggedSentence(tuple(tokens), tuple(tags), start))
            tokens, tags = [], []
            continue
        if len(fields) < 2 or not fields[-1]:
            untagged.append(number)
            continue
        if not tokens:
            start = number
        tokens.append(fields[0])
        tags.append(fields[-1])
    if tokens:
        sentences.append(TaggedSentence(tuple(tokens), tuple(tags), start))
    if untagged:
        raise DataError(f"{shown}: {format_rows(untagged, word='line')} hold a token but no tag. Each line holds a "
                        "token and its tag (the tag in the last column), split by a tab or spaces, and a blank "
                        "line ends a sentence.")
    return sentences


def _refuse_untagged_text(sentences: list[TaggedSentence], shown: str) -> None:
    """A file of plain sentences read as CoNLL has about as many "tags" as words, or tags with no O among them
    (every tagged file of some length has tokens outside entities): say what a tagged file is."""
    n_tokens = sum(len(s.tokens) for s in sentences)
    tags = {t for s in sentences for t in s.tags}
    n_tags = len(tags)
    unprefixed = not any(t.startswith(("B-", "I-")) for t in tags)
    if n_tags > max(50, 0.3 * n_tokens) or (unprefixed and "O" not in tags and n_tokens >= 20):
        raise DataError(f"{shown} does not read as tagged sentences: its last column holds {n_tags:,} different "
                        f"values over {n_tokens:,} tokens. Upload a CoNLL file (a token and its tag per line, such as "
                        "'EU B-ORG', a blank line between sentences), JSON lines with tokens and tags, or a CSV with "
                        "tokens and tags columns.")


def _jsonl_sentences(text: str, shown: str) -> list[TaggedSentence]:
    sentences: list[TaggedSentence] = []
    broken: list[int] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            broken.append(number)
            continue
        sentences.append(_sentence_from(obj, number, shown, "line"))
    if broken:
        raise DataError(f"{shown}: {format_rows(broken, word='line')} are not JSON objects. Each line holds one "
                        '{"tokens": [...], "tags": [...]} object.')
    return sentences


def _sentence_from(obj, where: int, shown: str, unit: str) -> TaggedSentence:
    """One JSON-lines object (or one CSV row's two cells as lists) as a sentence, checked."""
    tokens = obj.get("tokens") if isinstance(obj, dict) else None
    tags = obj.get("tags", obj.get("ner_tags")) if isinstance(obj, dict) else None
    if not isinstance(tokens, list) or not isinstance(tags, list):
        raise DataError(f'{shown}: {unit} {where} has no "tokens" and "tags" lists. Each {unit} holds '
                        '{"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]}.')
    if not all(isinstance(t, str) for t in tokens) or not all(isinstance(t, str) for t in tags):
        raise DataError(f"{shown}: {unit} {where} has tokens or tags that are not strings (tags as numbers need "
                        "their names: write the tag itself, such as \"B-PER\").")
    tokens = [t.strip() for t in tokens]
    if not tokens or not any(tokens):
        raise DataError(f"{shown}: {unit} {where} is an empty sentence. Remove it or give it its tokens.")
    if len(tokens) != len(tags):
        raise DataError(f"{shown}: {unit} {where} has {len(tokens)} tokens and {len(tags)} tags; give each token "
                        "one tag.")
    if not all(tokens):
        raise DataError(f"{shown}: {unit} {where} has an empty token. Remove it with its tag.")
    return TaggedSentence(tuple(tokens), tuple(t.strip() for t in tags), where)


def _csv_sentences(data: bytes, name, shown: str, notices: list[str], max_upload_mb: float,
                   max_sentences: int) -> list[TaggedSentence]:
    table = read_table(data, name or "data.csv", min_columns=2, max_upload_mb=max_upload_mb, max_rows=max_sentences)
    notices[:] = list(table.notices)
    by_name = {c.strip().lower(): c for c in table.columns}
    tokens_col = by_name.get("tokens") or by_name.get("words")
    tags_col = by_name.get("tags") or by_name.get("ner_tags") or by_name.get("labels")
    if tokens_col is None or tags_col is None:
        raise DataError(f"{shown} has the columns {quote_list(table.columns)}, not tokens and tags: it looks like a "
                        "table for the text-classification task (a text and a label per row). A token classifier "
                        "learns from a CoNLL file, JSON lines with tokens and tags, or a CSV with tokens and tags "
                        "columns.")
    sentences = []
    for row, tok, tag in zip(table.df.index, table.df[tokens_col], table.df[tags_col]):
        row = int(row)
        if _blank(tok) and _blank(tag):
            raise DataError(f"{shown}: row {row} is an empty sentence. Remove the row or give it its tokens.")
        obj = {"tokens": _cell_items(tok, shown, row), "tags": _cell_items(tag, shown, row)}
        sentences.append(_sentence_from(obj, row, shown, "row"))
    return sentences


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and value != value) or not str(value).strip()


def _cell_items(value, shown: str, row: int) -> list[str]:
    """A cell as a list: a JSON list as written, otherwise its items split by whitespace."""
    if _blank(value):
        return []
    text = str(value).strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError:
            raise DataError(f"{shown}: row {row} has a cell that starts like a JSON list but is not one: "
                            f"{quoted(text)}. Write a JSON list, or the items separated by spaces.") from None
        if isinstance(items, list):
            return [str(x) for x in items]
    return text.split()


def _checked_scheme(sentences: list[TaggedSentence], shown: str, unit: str, token_lines: bool
                    ) -> tuple[list[TaggedSentence], str, list[str]]:
    """The tags checked for one scheme; IOB1 and stray ``I-`` starts repaired to IOB2 with a notice.
    ``token_lines``: each token on a line of its own (CoNLL), so a message names the token's line."""

    def line_of(s: TaggedSentence, i: int) -> int:
        return s.where + i if token_lines else s.where

    tags = {t for s in sentences for t in s.tags}
    prefixed = {t for t in tags if _PREFIXED.match(t)}
    plain = {t for t in tags if t != "O" and t not in prefixed}
    if prefixed and plain:
        where = sorted({line_of(s, i) for s in sentences for i, t in enumerate(s.tags) if t in plain})
        raise DataError(_mixed_message(shown, sorted(plain), where, unit))
    if not prefixed:
        return sentences, "IO", []
    starts = [(s, i) for s in sentences for i, t in enumerate(s.tags) if _stray_inside(s.tags, i)]
    if not starts:
        return sentences, "IOB2", []
    repaired = [_to_iob2(s) for s in sentences]
    where = sorted({line_of(s, i) for s, i in starts})
    if _looks_iob1(sentences):
        note = (f"Read as IOB1 (an entity starts with I-, B- only between two entities of one type) and converted "
                f"to IOB2: {len(starts):,} entity starts written I-X became B-X.")
    else:
        note = (f"{len(starts):,} tags I-X after O or after another type ({format_rows(where, word=unit)}) were read "
                "as B-X, the start of an entity, as seqeval's lenient mode reads them.")
    return repaired, "IOB2", [note]


def _mixed_message(shown: str, bad: list[str], where: list[int], unit: str) -> str:
    hint = ""
    if any(_BAD_PREFIX.match(t) for t in bad):
        hint = " Write B-X (begin) and I-X (inside); other schemes (S-, E-, B_) are not read."
    return (f"{shown}: the tags {quote_list(bad)} ({format_rows(where, word=unit)}) are not in BIO form beside tags "
            f"that are. Use O, B-TYPE and I-TYPE throughout (IOB2), or plain types with no prefix throughout (IO)."
            + hint)


def _type(tag: str) -> str | None:
    m = _PREFIXED.match(tag)
    return m[2] if m else None


def _stray_inside(tags: Sequence[str], i: int) -> bool:
    """Is tag ``i`` an ``I-X`` that continues no ``X`` (IOB2 has it only inside an entity)?"""
    return tags[i].startswith("I-") and (i == 0 or _type(tags[i - 1]) != _type(tags[i]))


def _looks_iob1(sentences: list[TaggedSentence]) -> bool:
    """IOB1: every ``B-X`` follows an ``X`` (it only separates two entities of one type)."""
    b_after = [_type(s.tags[i - 1]) == _type(t) if i else False
               for s in sentences for i, t in enumerate(s.tags) if t.startswith("B-")]
    return all(b_after)


def _to_iob2(s: TaggedSentence) -> TaggedSentence:
    tags = ["B-" + t[2:] if _stray_inside(s.tags, i) else t for i, t in enumerate(s.tags)]
    return TaggedSentence(s.tokens, tuple(tags), s.where)


def _tag_set(sentences: list[TaggedSentence], scheme: str) -> tuple[str, ...]:
    types = entity_types([t for s in sentences for t in s.tags])
    types = sorted(types)
    if scheme == "IO":
        return ("O", *types)
    return ("O", *[f"{p}-{t}" for t in types for p in "BI"])
