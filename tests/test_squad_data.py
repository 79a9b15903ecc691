"""Question answering files (issue 33): SQuAD JSON (1.1 and 2.0) and a question/context/answer_text/answer_start
CSV read into ``QAExample`` records with the text exactly as given, every answer checked at its offset.

Each good file is written here from known records and must read back to exactly them (unicode beyond the BMP,
whitespace at the ends, commas and line breaks inside cells, offsets in characters). Each refusal is a good file
with one thing broken, and the good file reads (its positive control)."""

from __future__ import annotations

import copy
import csv
import io
import json

import pytest

from bertviz_app.errors import DataError
from bertviz_app.train.data.squad import QAExample, looks_like_squad, read_squad

# the answer after an astral character (2 UTF-16 units, 4 UTF-8 bytes, 1 Python character): offsets are characters
CONTEXT_A = "Le café 😀 ouvre à Zürich en 1990, près du lac."
CONTEXT_B = "  The film, shot in Ōsaka, runs 120 minutes.\nIt opened in May.  "


def _at(context: str, text: str) -> tuple[str, int]:
    return text, context.index(text)


EXAMPLES = [
    QAExample("q1", "Où ouvre le café ?", CONTEXT_A, (_at(CONTEXT_A, "Zürich"),), False),
    QAExample("q2", "Quand ?", CONTEXT_A, (_at(CONTEXT_A, "1990"), _at(CONTEXT_A, "en 1990")), False),
    QAExample("q3", "Who directed it?", CONTEXT_B, (), True),
    QAExample("q4", " How long does it run? ", CONTEXT_B, (_at(CONTEXT_B, "120 minutes"),), False),
    QAExample("q5", "Where was it shot?", CONTEXT_B, (_at(CONTEXT_B, "Ōsaka"),), False),
]


def squad_doc(examples=EXAMPLES, version: str | None = "v2.0", impossible_key: bool = True) -> dict:
    """SQuAD JSON for ``examples``: one article, one paragraph per distinct context, in order."""
    paragraphs: list[dict] = []
    for e in examples:
        if not paragraphs or paragraphs[-1]["context"] != e.context:
            paragraphs.append({"context": e.context, "qas": []})
        qa = {"id": e.id, "question": e.question,
              "answers": [{"text": t, "answer_start": s} for t, s in e.answers]}
        if impossible_key:
            qa["is_impossible"] = e.is_impossible
        paragraphs[-1]["qas"].append(qa)
    doc = {"data": [{"title": "T", "paragraphs": paragraphs}]}
    return doc if version is None else {"version": version, **doc}


def as_bytes(doc) -> bytes:
    return json.dumps(doc, ensure_ascii=False, indent=1).encode("utf-8")


def qa_csv(rows: list[dict], columns=("question", "context", "answer_text", "answer_start"), delimiter=",") -> bytes:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(columns), delimiter=delimiter, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return out.getvalue().encode("utf-8")


def csv_rows(examples=EXAMPLES) -> list[dict]:
    """One row per question (its first answer; no answer: empty cells)."""
    return [{"question": e.question, "context": e.context, "answer_text": e.answers[0][0] if e.answers else "",
             "answer_start": e.answers[0][1] if e.answers else ""} for e in examples]


def refused(data: bytes, name: str, *fragments: str) -> str:
    with pytest.raises(DataError) as err:
        read_squad(data, name)
    message = str(err.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


# --------------------------------------------------------------------------- files that read
def test_squad_2_json_reads_back_exactly_with_offsets_in_characters(tmp_path):
    path = tmp_path / "dev-v2.0.json"
    path.write_bytes(as_bytes(squad_doc()))
    qf = read_squad(path)
    assert list(qf.examples) == EXAMPLES
    assert (qf.format, qf.version, qf.unit, qf.name, qf.n_impossible) == ("squad", "v2.0", "id", "dev-v2.0.json", 1)
    for e in qf.examples:
        for text, start in e.answers:
            assert e.context[start:start + len(text)] == text
    # the offset counts the emoji as one character, not the two UTF-16 units or four bytes it takes elsewhere
    zurich = qf.examples[0].answers[0][1]
    assert zurich == CONTEXT_A.index("Zürich") == 18
    assert CONTEXT_A.encode().index("Zürich".encode()) == 23 and CONTEXT_A.encode("utf-16-le").index(
        "Zürich".encode("utf-16-le")) == 2 * 19
    assert qf.examples[2].gold_texts == [""] and qf.examples[1].gold_texts == ["1990", "en 1990"]


def test_squad_1_1_without_is_impossible_reads_every_answer():
    answered = [e for e in EXAMPLES if e.answers]
    qf = read_squad(as_bytes(squad_doc(answered, version="1.1", impossible_key=False)), "train-v1.1.json")
    assert list(qf.examples) == answered and qf.version == "1.1" and qf.n_impossible == 0
    # SQuAD 2.0 written without is_impossible: an empty answers list is what makes a question unanswerable
    qf = read_squad(as_bytes(squad_doc(version=None, impossible_key=False)), "x.json")
    assert list(qf.examples) == EXAMPLES and qf.version is None


def test_a_csv_reads_back_exactly_and_an_empty_answer_is_no_answer(tmp_path):
    path = tmp_path / "qa.csv"
    path.write_bytes(qa_csv(csv_rows()))
    qf = read_squad(path)
    # rows are named by their spreadsheet row (the header is row 1); only the first answer of q2 is in the CSV
    want = [QAExample(str(i + 2), e.question, e.context, e.answers[:1], e.is_impossible)
            for i, e in enumerate(EXAMPLES)]
    assert list(qf.examples) == want and (qf.format, qf.unit) == ("csv", "row")
    # an id column names them; a TSV with other column cases reads the same
    rows = [{"ID": e.id, "Question": r["question"], "Context": r["context"], "Answer_Text": r["answer_text"],
             "Answer_Start": r["answer_start"]} for e, r in zip(EXAMPLES, csv_rows())]
    qf = read_squad(qa_csv(rows, ("ID", "Question", "Context", "Answer_Text", "Answer_Start"), "\t"), "qa.tsv")
    assert [e.id for e in qf.examples] == [e.id for e in EXAMPLES] and qf.unit == "id"
    assert [(e.question, e.context, e.answers) for e in qf.examples] == [(w.question, w.context, w.answers)
                                                                          for w in want]


def test_looks_like_squad_tells_question_answering_files_from_others():
    assert looks_like_squad(as_bytes(squad_doc()).decode())
    assert looks_like_squad(qa_csv(csv_rows()).decode())
    for other in ("text,label\ngood film,pos\n", '{"tokens": ["EU"], "tags": ["B-ORG"]}\n', "EU B-ORG\nrejects O\n",
                  '{"data": [1, 2]}'):
        assert not looks_like_squad(other), other


# --------------------------------------------------------------------------- answers not at their offsets
def test_answers_not_at_their_offset_are_named_first_few_with_the_count():
    good = squad_doc()
    read_squad(as_bytes(good), "ok.json")  # positive control
    doc = copy.deepcopy(good)
    shifted = 0
    for p in doc["data"][0]["paragraphs"]:
        for qa in p["qas"]:
            for a in qa["answers"]:
                a["answer_start"] += 1
                shifted += 1
    assert shifted == 5
    at = CONTEXT_A.index("Zürich")
    refused(as_bytes(doc), "dev.json", "'dev.json': 5 answers not at their answer_start", "id 'q1'",
            f"'Zürich' at {at + 1}", f"it occurs at {at}", "fix the offsets")
    # more than five: the first five named, then the count
    doc["data"][0]["paragraphs"][0]["qas"].append({"id": "q6", "question": "x?", "answers": [
        {"text": "lac", "answer_start": 0}, {"text": "nowhere", "answer_start": 3}]})
    message = refused(as_bytes(doc), "dev.json", "7 answers", "and 2 more", "id 'q6': 'nowhere' at 3",
                      "it does not occur in the context")
    assert "'q4'" not in message and "'q5'" not in message  # file order: q6 is in the first paragraph


def test_a_csv_answer_off_its_offset_names_its_row():
    rows = csv_rows()
    read_squad(qa_csv(rows), "ok.csv")  # positive control
    rows[3] = {**rows[3], "answer_start": rows[3]["answer_start"] - 2}
    refused(qa_csv(rows), "qa.csv", "1 answer not at its answer_start", "row 5:", "'120 minutes'")
    rows = csv_rows()
    rows[0] = {**rows[0], "answer_start": "twelve"}
    rows[4] = {**rows[4], "answer_start": ""}
    refused(qa_csv(rows), "qa.csv", "rows 2 and 6 have an answer_text but no answer_start that is a whole number")


# --------------------------------------------------------------------------- SQuAD's shape
@pytest.mark.parametrize("path, key, where", [
    (("data", 0), "paragraphs", "data[0]"),
    (("data", 0, "paragraphs", 1), "context", "data[0].paragraphs[1]"),
    (("data", 0, "paragraphs", 1), "qas", "data[0].paragraphs[1]"),
    (("data", 0, "paragraphs", 1, "qas", 0), "question", "data[0].paragraphs[1].qas[0] (id 'q3')"),
    (("data", 0, "paragraphs", 1, "qas", 0), "answers", "data[0].paragraphs[1].qas[0] (id 'q3')"),
    (("data", 0, "paragraphs", 1, "qas", 1), "id", "data[0].paragraphs[1].qas[1]"),
    (("data", 0, "paragraphs", 1, "qas", 1, "answers", 0), "text", "qas[1] (id 'q4').answers[0]"),
    (("data", 0, "paragraphs", 1, "qas", 1, "answers", 0), "answer_start", "qas[1] (id 'q4').answers[0]"),
])
def test_a_missing_key_is_named_with_where_it_is_missing(path, key, where):
    doc = squad_doc()
    read_squad(as_bytes(doc), "ok.json")  # positive control
    obj = doc
    for step in path:
        obj = obj[step]
    del obj[key]
    refused(as_bytes(doc), "dev.json", f"{where} has no {key!r} key", "Upload SQuAD JSON")


def test_wrong_types_and_contradictions_are_refused_with_the_fix():
    doc = squad_doc()
    doc["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = "8"
    refused(as_bytes(doc), "d.json", "answers[0].answer_start is '8', not a whole number")
    doc = squad_doc()
    doc["data"][0]["paragraphs"][0]["qas"][0]["is_impossible"] = True
    refused(as_bytes(doc), "d.json", "(id 'q1') is marked is_impossible but has 1 answer", "empty its answers")
    doc = squad_doc()
    doc["data"][0]["paragraphs"][1]["qas"][0]["is_impossible"] = False
    refused(as_bytes(doc), "d.json", "(id 'q3') has no answers and is_impossible false", "set is_impossible to true")
    doc = squad_doc()  # numeric ids read as their text
    doc["data"][0]["paragraphs"][0]["qas"][0]["id"] = 17
    assert read_squad(as_bytes(doc), "d.json").examples[0].id == "17"


def test_empty_questions_and_contexts_are_named():
    doc = squad_doc()
    for qa in doc["data"][0]["paragraphs"][0]["qas"]:
        qa["question"] = "   "
    refused(as_bytes(doc), "d.json", "ids 'q1' and 'q2' have an empty question (2 in all)")
    doc = squad_doc()
    doc["data"][0]["paragraphs"][1]["context"] = "\n "
    doc["data"][0]["paragraphs"][1]["qas"] = [qa | {"answers": [], "is_impossible": True}
                                              for qa in doc["data"][0]["paragraphs"][1]["qas"]]
    refused(as_bytes(doc), "d.json", "ids 'q3', 'q4' and 'q5' have an empty context (3 in all)")
    rows = csv_rows()
    rows[1] = {**rows[1], "question": ""}
    refused(qa_csv(rows), "qa.csv", "row 3 has an empty question (1 in all)")


@pytest.mark.parametrize("text, fragments", [
    ('{"data": [', ("is not valid JSON (line 1", "Upload SQuAD JSON")),
    ('{"data": []}\n{"data": []}\n', ("more than one JSON document (JSON lines?)",)),
    ('[{"context": "a"}]', ("JSON but not SQuAD's shape", "a JSON list", 'no "data" list')),
    ('{"version": "1.1", "articles": []}', ("the keys 'version', 'articles'", 'no "data" list')),
    ('{"data": ["an article"]}', ("data[0] is not a JSON object",)),
    ('{"data": []}', ("holds no questions",)),
    ("", ("is empty",)),
])
def test_files_that_are_not_squad_json_are_refused(text, fragments):
    refused(text.encode(), "d.json", *fragments)


# --------------------------------------------------------------------------- another task's file
@pytest.mark.parametrize("name, text, fragments", [
    ("reviews.csv", "text,label\na good film,pos\na slog,neg\n",
     ("has the columns 'text', 'label'", "text-classification task", "finetune FILE (the default task)")),
    ("train.conll", "EU\tB-ORG\nrejects\tO\nGerman\tB-MISC\ncall\tO\n.\tO\n\nPeter\tB-PER\n",
     ("tagged sentences", "token-classification", "finetune FILE --task token-classification")),
    ("train.jsonl", '{"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]}\n',
     ("tagged sentences", "token-classification")),
    ("tagged.csv", 'tokens,tags\n"EU rejects","B-ORG O"\n',
     ("has the columns 'tokens', 'tags'", "token-classification")),
])
def test_a_classifier_or_tagger_file_is_refused_naming_its_task_and_command(name, text, fragments):
    refused(text.encode(), name, "question, context, answer_text and answer_start columns", *fragments)


def test_a_qa_table_missing_a_column_names_it():
    rows = [{k: v for k, v in r.items() if k != "answer_start"} for r in csv_rows()]
    refused(qa_csv(rows, ("question", "context", "answer_text")), "qa.csv", "without 'answer_start'",
            "rename the columns")


def test_the_question_limit_is_the_argument_given():
    data = as_bytes(squad_doc())
    assert len(read_squad(data, "d.json", max_questions=5).examples) == 5
    with pytest.raises(DataError, match="holds 6 questions; the limit is 5"):
        read_squad(as_bytes(squad_doc(EXAMPLES + [EXAMPLES[-1]])), "d.json", max_questions=5)
