"""Tagged-sentence files (what a token classifier learns from) and entity-level scores.

The readers are checked on small files written here, each format against the sentences it must give, every
refusal beside a file that reads (a positive control); the scores against seqeval's own report on random tag
sequences, and by hand on a case whose answer is known."""

from __future__ import annotations

import io
import json
import random
import zipfile

import pytest
from seqeval.metrics import classification_report
from seqeval.scheme import IOB2

from bertviz_app.errors import DataError
from bertviz_app.train.data import read_table
from bertviz_app.train.data.tagged import entity_types, looks_like_conll, read_tagged
from bertviz_app.train.entity_metrics import entities_of, entity_scores, io_to_iob2

CONLL_2003 = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""


def _sentences(tf):
    return [(list(s.tokens), list(s.tags)) for s in tf.sentences]


def test_conll_2003_with_its_columns_and_docstart_reads_token_and_last_column():
    tf = read_tagged(CONLL_2003.encode(), "train.conll")
    assert tf.format == "conll" and tf.scheme == "IOB2" and tf.notices == ()
    assert _sentences(tf) == [(["EU", "rejects", "German", "call", "."], ["B-ORG", "O", "B-MISC", "O", "O"]),
                              (["Peter", "Blackburn"], ["B-PER", "I-PER"])]
    assert [s.where for s in tf.sentences] == [3, 9]  # the lines each sentence starts on
    assert tf.tags == ("O", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER")
    assert tf.types == ["MISC", "ORG", "PER"] and tf.n_tokens == 7


def test_conll_with_tabs_keeps_a_token_with_spaces_whole(tmp_path):
    path = tmp_path / "tabs.tsv"
    path.write_text("New York\tB-LOC\nis\tO\n\n\n\nbig\tO\n", encoding="utf-8")
    tf = read_tagged(path)
    assert _sentences(tf) == [(["New York", "is"], ["B-LOC", "O"]), (["big"], ["O"])]
    assert tf.name == "tabs.tsv"


def test_iob1_is_converted_to_iob2_with_a_notice():
    iob1 = "Peter I-PER\nBlackburn I-PER\nand O\nMary I-PER\nJane B-PER\n"  # B- only between two PERs
    tf = read_tagged(iob1.encode(), "iob1.txt")
    assert _sentences(tf)[0][1] == ["B-PER", "I-PER", "O", "B-PER", "B-PER"]
    assert len(tf.notices) == 1 and "IOB1" in tf.notices[0] and "2 entity starts" in tf.notices[0]


def test_a_stray_inside_tag_in_an_iob2_file_is_read_as_a_start_and_its_line_named():
    text = "EU B-ORG\nrejects O\nGerman I-MISC\ncall O\n\nBonn B-LOC\nsays O\n"  # line 3: I-MISC after O
    tf = read_tagged(text.encode(), "stray.txt")
    assert _sentences(tf)[0][1] == ["B-ORG", "O", "B-MISC", "O"]
    assert len(tf.notices) == 1 and "line 3" in tf.notices[0] and "lenient" in tf.notices[0]
    assert "IOB1" not in tf.notices[0]  # the file has a B- that starts an entity after O: IOB2, not IOB1
    clean = read_tagged(text.replace("I-MISC", "B-MISC").encode(), "clean.txt")  # positive control
    assert clean.notices == () and _sentences(clean) == _sentences(tf)


def test_io_tags_read_as_io():
    tf = read_tagged(b"Peter PER\nBlackburn PER\nin O\nBonn LOC\n", "io.txt")
    assert tf.scheme == "IO" and tf.tags == ("O", "LOC", "PER") and tf.notices == ()


@pytest.mark.parametrize("text, says", [
    ("EU B-ORG\nrejects\nGerman B-MISC\n\nBonn B-LOC\nx\n", "lines 2 and 6 hold a token but no tag"),
    ("EU B-ORG\nrejects O\nGerman S-MISC\n", "S-MISC"),
    ("EU B-ORG\nrejects O\nGerman MISC\n", "not in BIO form"),
])
def test_conll_refusals_name_the_lines_and_the_fix(text, says):
    with pytest.raises(DataError) as err:
        read_tagged(text.encode(), "bad.conll")
    assert says in str(err.value)
    assert "'bad.conll'" in str(err.value)


def test_a_mixed_tag_is_named_with_its_line():
    with pytest.raises(DataError, match=r"S-MISC.*line 3"):
        read_tagged(b"EU B-ORG\nrejects O\nGerman S-MISC\n", "bad.conll")


def test_plain_sentences_are_not_read_as_tags():
    ends = ["way", "day", "time", "end", "film", "cast", "plot", "score"]
    varied = "\n".join(f"the film number {i} was good in its {ends[i % 8]}{i}" for i in range(80)) + "\n"
    same = "\n".join(f"the film number {i} was good in its way" for i in range(80)) + "\n"
    for prose in (varied, same):  # as many "tags" as lines; one "tag" and no O
        with pytest.raises(DataError, match="does not read as tagged sentences"):
            read_tagged(prose.encode(), "notes.txt")


def test_json_lines_read_and_refused_by_line():
    good = [{"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]}, {"tokens": ["Bonn"], "ner_tags": ["B-LOC"]}]
    tf = read_tagged("\n".join(json.dumps(o) for o in good).encode(), "train.jsonl")
    assert tf.format == "jsonl" and _sentences(tf) == [(["EU", "rejects"], ["B-ORG", "O"]), (["Bonn"], ["B-LOC"])]
    assert [s.where for s in tf.sentences] == [1, 2]
    cases = [
        ('{"tokens": ["EU"], "tags": ["B-ORG"]}\n{"tokens": ["a", "b"], "tags": ["O"]}',
         "line 2 has 2 tokens and 1 tags"),
        ('{"tokens": ["EU"], "tags": ["B-ORG"]}\n{"tokens": [], "tags": []}', "line 2 is an empty sentence"),
        ('{"tokens": ["EU"], "tags": ["B-ORG"]}\n{"tokens": ["EU"], "tags": [3]}', "not strings"),
        ('{"tokens": ["EU"], "tags": ["B-ORG"]}\n{"tokens": ["EU"', "line 2 are not JSON objects"),
    ]
    for text, says in cases:
        with pytest.raises(DataError) as err:
            read_tagged(text.encode(), "train.jsonl")
        assert says in str(err.value), str(err.value)


def test_csv_with_tokens_and_tags_columns_lists_or_spaces():
    text = 'id,tokens,tags\n1,"[""New York"", ""is""]","[""B-LOC"", ""O""]"\n2,Bonn says,B-LOC O\n'
    tf = read_tagged(text.encode(), "train.csv")
    assert tf.format == "csv" and tf.unit == "row"
    assert _sentences(tf) == [(["New York", "is"], ["B-LOC", "O"]), (["Bonn", "says"], ["B-LOC", "O"])]
    assert [s.where for s in tf.sentences] == [2, 3]
    with pytest.raises(DataError, match="row 3 has 2 tokens and 1 tags"):
        read_tagged(b"tokens,tags\nBonn,B-LOC\nBonn says,B-LOC\n", "t.csv")


def test_a_classifier_table_given_to_the_token_task_names_the_other_task():
    with pytest.raises(DataError) as err:
        read_tagged(b"text,label\nthe film was good,positive\nthe film was bad,negative\n", "reviews.csv")
    assert "text-classification" in str(err.value) and "'text', 'label'" in str(err.value)


def test_a_tagged_file_given_to_the_classifier_reader_names_the_token_task():
    for data in (CONLL_2003.encode(), b'{"tokens": ["EU"], "tags": ["B-ORG"]}\n'):
        with pytest.raises(DataError) as err:
            read_table(data, "train.txt")
        assert "token-classification" in str(err.value)
    table = read_table(b"text,label\nthe film was good,positive\nthe film was bad,negative\n", "r.csv")
    assert table.n_rows == 2  # positive control: a classifier table reads


def test_looks_like_conll_on_both_kinds():
    assert looks_like_conll(CONLL_2003)
    assert not looks_like_conll("text\tlabel\n" + "".join(f"film {i} was fine\tpositive\n" for i in range(20)))


def test_binary_and_empty_files_are_refused_before_parsing():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("train.conll", CONLL_2003)
    with pytest.raises(DataError, match="ZIP"):
        read_tagged(buf.getvalue(), "train.conll")
    with pytest.raises(DataError, match="empty"):
        read_tagged(b"\n\n  \n", "train.conll")


def test_entity_types_and_io_conversion():
    assert entity_types(["O", "B-PER", "I-PER", "B-LOC", "MISC"]) == ["PER", "LOC", "MISC"]
    assert io_to_iob2(["PER", "PER", "O", "LOC", "PER"]) == ["B-PER", "I-PER", "O", "B-LOC", "B-PER"]
    assert io_to_iob2(["B-PER", "I-PER"]) == ["B-PER", "I-PER"]


def _random_tags(rng: random.Random, n: int, types=("PER", "LOC", "ORG")) -> list[str]:
    return [rng.choice(["O", "O", f"B-{rng.choice(types)}", f"I-{rng.choice(types)}"]) for _ in range(n)]


def test_entity_scores_equal_seqevals_report_on_random_sequences():
    rng = random.Random(7)
    true = [_random_tags(rng, rng.randint(1, 12)) for _ in range(200)]
    pred = [[t if rng.random() < 0.7 else rng.choice(["O", "B-PER", "I-LOC", "B-ORG"]) for t in s] for s in true]
    got = entity_scores(true, pred)
    ref = classification_report(true, pred, mode="strict", scheme=IOB2, output_dict=True, zero_division=0)
    assert 0.2 < got["entity_f1"] < 0.95  # the case carries signal: neither all right nor all wrong
    assert got["entity_f1"] == pytest.approx(ref["micro avg"]["f1-score"], rel=1e-12)
    assert got["precision"] == pytest.approx(ref["micro avg"]["precision"], rel=1e-12)
    assert got["recall"] == pytest.approx(ref["micro avg"]["recall"], rel=1e-12)
    assert got["support"] == ref["micro avg"]["support"]
    for k in ("PER", "LOC", "ORG"):
        assert got["per_type"][k]["f1"] == pytest.approx(ref[k]["f1-score"], rel=1e-12)
        assert got["per_type"][k]["support"] == ref[k]["support"]
        lo, hi = got["per_type"][k]["interval"]["f1"]
        assert lo <= got["per_type"][k]["f1"] <= hi and hi - lo > 0.01
    lo, hi = got["interval"]["f1"]
    assert lo < got["entity_f1"] < hi and hi - lo < 0.3
    assert entity_scores(true, pred) == got  # seeded: the same intervals twice


def test_entity_scores_by_hand_strict_boundaries_and_stray_inside():
    true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "O", "O", "B-LOC"], ["I-ORG", "O"]]  # PER cut short; I-ORG starts nothing in strict mode
    got = entity_scores(true, pred)
    assert entities_of(pred) == [{("PER", 0, 1), ("LOC", 3, 4)}, set()]
    assert (got["precision"], got["recall"]) == (pytest.approx(1 / 2), pytest.approx(1 / 3))
    assert got["entity_f1"] == pytest.approx(2 * (1 / 2) * (1 / 3) / (1 / 2 + 1 / 3))
    assert got["per_type"]["LOC"]["f1"] == 1.0 and got["per_type"]["ORG"]["predicted"] == 0
    perfect = entity_scores(true, true)  # positive control
    assert perfect["entity_f1"] == 1.0 and perfect["interval"]["f1"] == (1.0, 1.0)
    with pytest.raises(ValueError, match="sentence 1"):
        entity_scores(true, [pred[0], ["O"]])
