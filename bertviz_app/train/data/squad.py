"""``read_squad``: a file of questions with their contexts and answers (what an extractive question answering
model, a span reader, learns from and is evaluated on) parsed into a ``QAFile``, or a ``DataError`` saying what
to fix.

Two formats, told apart by their content (the extension is only a hint):

- **SQuAD JSON** (1.1 and 2.0): ``{"data": [{"paragraphs": [{"context": ..., "qas": [{"id", "question",
  "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}``. ``is_impossible`` is SQuAD 2.0's; where it is
  missing a question with no answers is unanswerable (as SQuAD 2.0's evaluation script reads it: ``has_ans =
  bool(answers)``). Messages name the questions by their ``id``, and a missing key by where it is missing
  (``data[0].paragraphs[3].qas[1]``).
- **CSV/TSV** with ``question``, ``context``, ``answer_text`` and ``answer_start`` columns (names matched ignoring
  case), read by the project's table reader (``read_table``: its encodings, size checks and notices); one question
  per row, an empty ``answer_text`` is "no answer"; an optional ``id`` column names the questions, otherwise each is
  named by its spreadsheet row (the header is row 1). Messages name the rows.

The text is kept exactly as given (questions, contexts and answers are not stripped or normalised), so every
``answer_start`` is a character offset into the context as given, and every answer is checked to sit there
(``context[start:start + len(text)] == text``): one message names the answers that do not (the first few, the
count) and where their text does occur. Refused with one message each: a missing key, an empty question or
context, a file that is not JSON or not SQuAD's shape, a classifier's table (a text and a label per row) and a
tagged file (CoNLL, JSON lines or a tokens/tags CSV), each naming the task and the command that takes it.
``looks_like_squad`` lets the other tasks' doors refuse a question answering file the same way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ...config import Settings
from ...errors import DataError
from .decoding import decode, line_ends, refuse_binary_formats
from .messages import display_name, format_rows, quote_list, quoted
from .reading import looks_like_conll, read_bytes, read_table

__all__ = ["QAExample", "QAFile", "read_squad", "looks_like_squad", "QA_COLUMNS", "FORMATS"]

FORMATS = ("squad", "csv")
QA_COLUMNS = ("question", "context", "answer_text", "answer_start")
_SHOWN = 5  # answers named in a message before "and N more"
_FORMS = ("Upload SQuAD JSON ({\"data\": [{\"paragraphs\": [{\"context\": ..., \"qas\": [{\"id\", \"question\", "
          "\"answers\": [{\"text\", \"answer_start\"}]}]}]}]}) or a CSV with question, context, answer_text and "
          "answer_start columns (an empty answer_text: no answer).")
_TAGGED = ("holds tagged sentences (a token and its tag each): that is what a token classifier (a named-entity "
           "tagger) learns from, the token-classification task (finetune FILE --task token-classification, or "
           "evaluate FILE --model TAGGER). ")
_CLASSIFIED = ("looks like a table for the text-classification task (a text and a label per row): finetune FILE "
               "(the default task) or evaluate FILE --model CLASSIFIER takes it. ")


@dataclass(frozen=True)
class QAExample:
    """One question: its id (the file's, or the spreadsheet row of a CSV without an id column), the question and
    the context exactly as given, its answers as (text, answer_start) pairs in the file's order (each checked:
    ``context[start:start + len(text)] == text``), and whether it has no answer (then ``answers`` is empty)."""

    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]
    is_impossible: bool

    @property
    def gold_texts(self) -> list[str]:
        """The answers' texts; ``[""]`` for an unanswerable question (SQuAD 2.0's evaluation script's gold)."""
        return [t for t, _ in self.answers] or [""]


@dataclass(frozen=True)
class QAFile:
    """A read file: its questions in file order, its format ("squad" or "csv"), SQuAD's ``version`` field where
    there is one, what the reader did (``notices``) and what names a question in messages (``unit``: "id", or
    "row" for a CSV without an id column)."""

    name: str
    format: str
    examples: tuple[QAExample, ...]
    version: str | None
    notices: tuple[str, ...]
    unit: str

    @property
    def n_impossible(self) -> int:
        return sum(e.is_impossible for e in self.examples)


def looks_like_squad(text: str) -> bool:
    """Does ``text`` (a file's start) read as a question answering file: SQuAD JSON (a ``"data"`` list with
    ``"paragraphs"`` or ``"qas"``), or a table whose header names question, context and answer columns?"""
    head = text.lstrip("\ufeff \t\r\n")
    if head.startswith("{"):
        return '"data"' in head[:4096] and ('"paragraphs"' in head or '"qas"' in head)
    header = head.split("\n", 1)[0].lower()
    return all(c in header for c in ("question", "context", "answer"))


def read_squad(source: str | os.PathLike | bytes, name: str | None = None, *,
               max_upload_mb: float = Settings.max_upload_mb, max_questions: int = Settings.max_rows) -> QAFile:
    """Parse SQuAD JSON or a question/context/answer_text/answer_start CSV (see the module's docstring).
    ``source``: a path or the file's bytes; ``name``: the file's name for messages (default: the path's);
    ``max_upload_mb`` and ``max_questions``: the limits (``Settings.max_upload_mb``, ``Settings.max_rows``)."""
    data, name = read_bytes(source, name, int(max_upload_mb * 1e6))
    shown = display_name(name)
    refuse_binary_formats(data, shown)
    text, _, notices = decode(data, shown)
    if not text.strip():
        raise DataError(f"{shown} is empty. {_FORMS}")
    head = text.lstrip("\ufeff \t\r\n")
    if looks_like_conll(line_ends(text)[0]) or (head.startswith("{") and '"tokens"' in head[:200]):
        raise DataError(f"{shown} {_TAGGED}Question answering reads questions with their contexts. {_FORMS}")
    fmt = "squad" if head.startswith(("{", "[")) else "csv"
    if fmt == "squad":
        (examples, version), unit = _squad_examples(head, shown), "id"
    else:
        examples, unit, notices = _csv_examples(data, name, shown, max_upload_mb, max_questions)
        version = None
    if not examples:
        raise DataError(f"{shown} holds no questions. {_FORMS}")
    if len(examples) > max_questions:
        raise DataError(f"{shown} holds {len(examples):,} questions; the limit is {max_questions:,} "
                        "(BERTVIZ_MAX_ROWS). Upload a sample of them.")
    _check_texts(examples, shown, unit)
    _check_offsets(examples, shown, unit)
    return QAFile(name=os.path.basename(name) if name else "data", format=fmt,
                  examples=tuple(examples), version=version, notices=tuple(notices), unit=unit)


# --------------------------------------------------------------------------- SQuAD JSON
def _load_json(text: str, shown: str) -> dict:
    try:
        doc = json.loads(text)
    except ValueError as err:
        where = f" (line {err.lineno}, column {err.colno}: {err.msg})" if isinstance(err, json.JSONDecodeError) else ""
        several = isinstance(err, json.JSONDecodeError) and err.msg == "Extra data"
        hint = " It holds more than one JSON document (JSON lines?): SQuAD JSON is one object." if several else ""
        raise DataError(f"{shown} is not valid JSON{where}.{hint} {_FORMS}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        found = f"an object with the keys {quote_list(list(doc))}" if isinstance(doc, dict) else \
            f"a JSON {'list' if isinstance(doc, list) else 'value'}"
        raise DataError(f"{shown} is JSON but not SQuAD's shape: it holds {found}, with no \"data\" list at the top. "
                        f"{_FORMS}")
    return doc


def _squad_examples(text: str, shown: str) -> tuple[list[QAExample], str | None]:
    """Every question of a SQuAD document, in file order, and its "version"; DataError at the first missing key
    or wrong type."""
    doc = _load_json(text, shown)
    out: list[QAExample] = []
    for a, article in enumerate(doc["data"]):
        paragraphs = _field(article, "paragraphs", list, f"data[{a}]", shown)
        for p, paragraph in enumerate(paragraphs):
            at = f"data[{a}].paragraphs[{p}]"
            context = _field(paragraph, "context", str, at, shown)
            for q, qa in enumerate(_field(paragraph, "qas", list, at, shown)):
                out.append(_squad_question(qa, context, f"{at}.qas[{q}]", shown))
    version = doc.get("version")
    return out, None if version is None else str(version)


def _field(obj, key: str, kind: type, at: str, shown: str):
    """``obj[key]``, checked to be a ``kind``; DataError naming the key and where it is missing."""
    if not isinstance(obj, dict):
        raise DataError(f"{shown}: {at} is not a JSON object (it is {type(obj).__name__}). {_FORMS}")
    if key not in obj:
        raise DataError(f"{shown}: {at} has no {key!r} key. {_FORMS}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        want = {str: "a string", list: "a list", int: "a whole number"}[kind]
        raise DataError(f"{shown}: {at}.{key} is {quoted(value)}, not {want}. {_FORMS}")
    return value


def _squad_question(qa, context: str, at: str, shown: str) -> QAExample:
    qid = qa.get("id") if isinstance(qa, dict) and isinstance(qa.get("id"), int) else _field(qa, "id", str, at, shown)
    where = f"{at} (id {str(qid)!r})"
    question = _field(qa, "question", str, where, shown)
    answers = []
    for k, ans in enumerate(_field(qa, "answers", list, where, shown)):
        text = _field(ans, "text", str, f"{where}.answers[{k}]", shown)
        start = _field(ans, "answer_start", int, f"{where}.answers[{k}]", shown)
        answers.append((text, start))
    impossible = qa.get("is_impossible", not answers)
    if not isinstance(impossible, bool):
        raise DataError(f"{shown}: {where}.is_impossible is {quoted(impossible)}; write true or false.")
    if impossible and answers:
        raise DataError(f"{shown}: {where} is marked is_impossible but has {len(answers)} answer(s). An unanswerable "
                        "question has an empty answers list (SQuAD 2.0 keeps its guesses in plausible_answers): "
                        "empty its answers or set is_impossible to false.")
    if not impossible and not answers:
        raise DataError(f"{shown}: {where} has no answers and is_impossible false. Give it its answers, or set "
                        "is_impossible to true (SQuAD 2.0: the context does not answer it).")
    return QAExample(str(qid), question, context, tuple(answers), impossible)


# --------------------------------------------------------------------------- CSV
def _csv_examples(data: bytes, name, shown: str, max_upload_mb: float,
                  max_questions: int) -> tuple[list[QAExample], str, list[str]]:
    """Each row as a question; DataError for a classifier's or a tagger's table, or a missing column."""
    table = read_table(data, name or "data.csv", min_columns=2, max_upload_mb=max_upload_mb, max_rows=max_questions)
    by_name = {c.strip().lower(): c for c in table.columns}
    missing = [c for c in QA_COLUMNS if c not in by_name]
    if missing:
        raise DataError(_columns_message(shown, table.columns, by_name, missing))
    cols = {c: table.df[by_name[c]] for c in QA_COLUMNS}
    ids = table.df[by_name["id"]] if "id" in by_name else None
    out, unit, bad_starts = [], "id" if ids is not None else "row", []
    for i, row in enumerate(table.df.index):
        row = int(row)
        q, c, text, start = (_cell(cols[k].iloc[i]) for k in QA_COLUMNS)
        qid = _cell(ids.iloc[i]) if ids is not None else str(row)
        if not text.strip():
            out.append(QAExample(qid or str(row), q, c, (), True))
            continue
        number = _whole(start)
        if number is None:
            bad_starts.append(row)
            number = -1
        out.append(QAExample(qid or str(row), q, c, ((text, number),), False))
    if bad_starts:
        raise DataError(f"{shown}: {format_rows(bad_starts)} have an answer_text but no answer_start that is a whole "
                        "number. Give each answer its start: the character offset in the context where the answer "
                        "begins (0 for the first character).")
    return out, unit, list(table.notices)


def _columns_message(shown: str, columns, by_name: dict, missing: list[str]) -> str:
    found = f"{shown} has the columns {quote_list(list(columns))}"
    if by_name.keys() & {"tokens", "words"} and by_name.keys() & {"tags", "ner_tags", "labels"}:
        return f"{found}: it {_TAGGED}{_FORMS}"
    if not by_name.keys() & {"question", "context"}:
        return f"{found}: it {_CLASSIFIED}Question answering reads questions with their contexts. {_FORMS}"
    return (f"{found}, without {quote_list(missing)}. A question answering table has the columns question, "
            "context, answer_text and answer_start (an empty answer_text: no answer); rename the columns, or add "
            "the missing ones.")


def _cell(value) -> str:
    """A cell's text as given; an empty cell (read as NaN) is ""."""
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def _whole(text: str) -> int | None:
    """A cell as a whole number of at least 0 ("12", "12.0"), else None."""
    try:
        number = float(text.strip())
    except ValueError:
        return None
    return int(number) if number.is_integer() and number >= 0 else None


# --------------------------------------------------------------------------- checks
def _named(examples: list[QAExample], unit: str) -> str:
    """'ids 'a', 'b' and 3 more' or 'rows 2 and 5': the questions a message is about."""
    if unit == "row":
        return format_rows([int(e.id) for e in examples])
    shown = [repr(e.id) for e in examples]
    return format_rows(shown, limit=_SHOWN, word="id")


def _check_texts(examples: list[QAExample], shown: str, unit: str) -> None:
    """DataError naming the questions whose question or context is empty (or whitespace only)."""
    for what in ("question", "context"):
        empty = [e for e in examples if not getattr(e, what).strip()]
        if empty:
            raise DataError(f"{shown}: {_named(empty, unit)} {'have' if len(empty) > 1 else 'has'} an empty {what} "
                            f"({len(empty):,} in all). Give each question its {what}, or remove "
                            f"{'them' if len(empty) > 1 else 'it'}.")


def _check_offsets(examples: list[QAExample], shown: str, unit: str) -> None:
    """DataError naming the answers whose text is not at their answer_start in the context, with what the context
    holds there and where the text does occur (the first few and the count)."""
    wrong = [(e, text, start) for e in examples for text, start in e.answers
             if e.context[start:start + len(text)] != text or start < 0]
    if not wrong:
        return
    lines = []
    for e, text, start in wrong[:_SHOWN]:
        who = f"row {e.id}" if unit == "row" else f"id {e.id!r}"
        there = e.context[max(0, start):max(0, start) + len(text)]
        found = e.context.find(text)
        where = f"; it occurs at {found}" if found >= 0 else "; it does not occur in the context"
        lines.append(f"{who}: {quoted(text, 40)} at {start}, where the context reads {quoted(there, 40)}{where}")
    more = f"; and {len(wrong) - _SHOWN:,} more" if len(wrong) > _SHOWN else ""
    many = len(wrong) > 1
    raise DataError(f"{shown}: {len(wrong):,} answer{'s' * many} not at {'their' if many else 'its'} "
                    f"answer_start ({'; '.join(lines)}{more}). answer_start is the answer's first character in the "
                    "context as given, counted from 0 in characters (not bytes): fix the offsets, or the answer "
                    "text so that it matches the context exactly.")
