"""Data intake: reading uploads, guessing columns, the validation report, building and splitting.

Every file is generated in tmp_path. Hostile files must end in a DataError whose message says
what to fix, never in a parser traceback.
"""

from __future__ import annotations

import gzip
import zipfile
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import bertviz_app.train.data.validation as data_validation
from bertviz_app.config import Settings
from bertviz_app.errors import DataError
from bertviz_app.train.data import (
    ROW_NOTE,
    build_dataset,
    describe_columns,
    format_rows,
    guess_columns,
    holds_numbers,
    no_text_message,
    read_table,
    safe_csv_cell,
    split_dataset,
    validate,
    validation_dataset,
)

POS = ["a great film", "a gorgeous moving film", "it was fun", "a joy", "good movie", "great fun", "moving and good"]
NEG = ["an awful slog", "a tedious film", "joyless", "bad movie", "it was not good", "awful film", "a slog"]


def good_rows(n_per_class: int = 15) -> list[tuple[str, str]]:
    rows = []
    for i in range(n_per_class):
        rows.append((f"{POS[i % len(POS)]} number {i}", "positive"))
        rows.append((f"{NEG[i % len(NEG)]} number {i}", "negative"))
    return rows


def write_csv(path: Path, rows, header=("text", "label"), delimiter=",", encoding="utf-8", newline="\n") -> Path:
    def cell(v):
        v = str(v)
        if any(ch in v for ch in (delimiter, '"', "\n")):
            v = '"' + v.replace('"', '""') + '"'
        return v

    lines = [delimiter.join(header)] + [delimiter.join(cell(v) for v in r) for r in rows]
    path.write_bytes((newline.join(lines) + newline).encode(encoding))
    return path


@pytest.fixture()
def good_csv(tmp_path) -> Path:
    return write_csv(tmp_path / "reviews.csv", good_rows())


def problem(report, code):
    found = [p for p in report.problems if p.code == code]
    assert found, f"no {code!r} in {report.codes()}: {report.text()}"
    return found[0]


# ----------------------------------------------------------------------------------------------
# Reading good files
# ----------------------------------------------------------------------------------------------


def test_good_csv_reads_all_rows_as_strings(good_csv):
    t = read_table(good_csv)
    assert t.columns == ("text", "label")
    assert t.n_rows == 30 and t.delimiter == "," and t.encoding == "utf-8" and t.notices == ()
    assert t.name == "reviews.csv"
    assert list(t.df.index[:3]) == [2, 3, 4]  # spreadsheet rows: header is row 1
    assert all(pd.api.types.is_string_dtype(t.df[c]) for c in t.columns)
    prev = t.preview(5)
    assert list(prev.columns) == ["row", "text", "label"] and list(prev["row"]) == [2, 3, 4, 5, 6]


def test_bytes_input_with_name(good_csv):
    t = read_table(good_csv.read_bytes(), name="upload.csv")
    assert t.n_rows == 30 and t.name == "upload.csv"


@pytest.mark.parametrize("delimiter,ext", [("\t", ".tsv"), ("\t", ".txt"), (";", ".csv"), ("|", ".txt")])
def test_delimiter_is_sniffed(tmp_path, delimiter, ext):
    rows = [(f"{t}, with a comma", lab) for t, lab in good_rows()]
    t = read_table(write_csv(tmp_path / f"data{ext}", rows, delimiter=delimiter))
    assert t.delimiter == delimiter and t.columns == ("text", "label") and t.n_rows == 30
    assert t.df["text"].iloc[0].endswith(", with a comma")


def test_utf8_bom_is_stripped(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + "text,label\ncafé crème,pos\nnot good,neg\n".encode())
    t = read_table(path)
    assert t.columns == ("text", "label") and t.encoding == "utf-8-sig" and t.notices == ()
    assert t.df["text"].iloc[0] == "café crème"


def test_latin1_falls_back_with_notice(tmp_path):
    path = write_csv(tmp_path / "latin.csv", [("café crème brûlée", "pos"), ("très mauvais", "neg")],
                     encoding="latin-1")
    t = read_table(path)
    assert t.df["text"].iloc[0] == "café crème brûlée"
    assert t.encoding in ("cp1252", "latin-1")
    assert any("not valid UTF-8" in n and "Latin-1" in n and "line 2" in n for n in t.notices), t.notices


def test_utf16_with_bom(tmp_path):
    path = tmp_path / "excel.txt"
    path.write_bytes("text\tlabel\nhello\tpos\nbye\tneg\n".encode("utf-16"))
    t = read_table(path)
    assert t.delimiter == "\t" and t.encoding == "utf-16" and t.df["text"].tolist() == ["hello", "bye"]


def test_crlf_line_endings(tmp_path):
    t = read_table(write_csv(tmp_path / "crlf.csv", good_rows(), newline="\r\n"))
    assert t.n_rows == 30 and t.columns == ("text", "label")
    assert not any("\r" in v for v in t.df["text"].tolist() + t.df["label"].tolist())


def test_quoted_multiline_field_is_one_row(tmp_path):
    rows = [("first line\nsecond line, with comma", "pos"), ("plain", "neg"), ('say "hi"\r\nthere', "neg")]
    t = read_table(write_csv(tmp_path / "multi.csv", rows, newline="\r\n"))
    assert t.n_rows == 3
    assert t.df["text"].tolist() == ["first line\nsecond line, with comma", "plain", 'say "hi"\nthere']
    assert list(t.df.index) == [2, 3, 4]  # a multi-line cell is still one spreadsheet row


def tweets(n: int = 600, every: int = 18) -> pd.DataFrame:
    """Tweets, every ``every``-th with a bare carriage return before its link (as scraped tweets have)."""
    labels = ["negative", "neutral", "positive"]
    texts = [f"tweet {i} about the game" + (f"\rhttp://t.co/x{i} #Saints" if i % every == 0 else "")
             for i in range(n)]
    return pd.DataFrame({"text": texts, "label": [labels[i % 3] for i in range(n)]})


def test_lone_carriage_returns_inside_lines_stay_in_the_text(tmp_path):
    df = tweets()
    n_cr = int(df["text"].str.contains("\r").sum())
    path = tmp_path / "tweets.csv"
    df.to_csv(path, index=False)  # pandas 3.1.1 on Python 3.11 leaves a cell with a lone \r unquoted
    raw = path.read_bytes()
    assert raw.count(b"\n") == 601 and raw.count(b"\r") == n_cr == 34
    t = read_table(path)
    assert t.n_rows == 600  # one row per record, not 634 pieces
    assert t.df["text"].tolist() == df["text"].tolist()  # the \r kept as given
    assert t.df["label"].tolist() == df["label"].tolist()
    assert list(t.df.index) == list(range(2, 602))
    cr_rows = [i + 2 for i in range(600) if i % 18 == 0]
    note = next(n for n in t.notices if "carriage return" in n)
    assert note.startswith(f"{n_cr} carriage returns (\\r) inside lines (rows 2, 20, 38,")
    assert f"and {n_cr - 8} more" in note and "read as part of the text" in note
    report = validate(t, "text", "label")
    assert "missing_label" not in report.codes() and report.summary["n_used"] == 600
    ds = build_dataset(t, "text", "label")
    assert len(ds) == 600 and [ds.source_rows[i] for i in range(0, 600, 18)] == cr_rows
    assert not any(text.startswith("http") for text in ds.texts)


def test_lone_carriage_return_in_a_crlf_file_by_hand(tmp_path):
    path = tmp_path / "hand.csv"
    path.write_bytes(b"id,text,label\r\n1,first\rhalf,pos\r\n2,\"quoted\rcell\",neg\r\n3,\r,neg\r\n4,end\r\r\n")
    t = read_table(path)
    assert t.n_rows == 4 and list(t.df.index) == [2, 3, 4, 5]
    assert t.df["text"].tolist() == ["first\rhalf", "quoted\rcell", "\r", "end\r"]
    assert t.df["label"].tolist()[:3] == ["pos", "neg", "neg"] and pd.isna(t.df["label"].iloc[3])
    assert t.df["id"].tolist() == ["1", "2", "3", "4"]
    assert any(n.startswith("4 carriage returns") and "rows 2, 3, 4 and 5" in n for n in t.notices), t.notices


def test_files_whose_lines_end_in_a_lone_carriage_return_still_read_as_rows(tmp_path):
    path = tmp_path / "mac.csv"
    path.write_bytes(b"text,label\ra film,pos\r\"two\nlines\",neg\r\rbad movie,neg\r")
    t = read_table(path)
    assert t.n_rows == 3 and list(t.df.index) == [2, 3, 5]
    assert t.df["text"].tolist() == ["a film", "two\nlines", "bad movie"]
    assert not any("carriage return" in n for n in t.notices)


def test_nul_bytes_are_removed_with_notice(tmp_path):
    path = tmp_path / "nul.csv"
    body = "".join(f"{t},{lab}\n" for t, lab in good_rows())
    path.write_bytes(b"text,label\ngood\x00 film,pos\n" + body.encode())
    t = read_table(path)
    assert t.df["text"].iloc[0] == "good film"
    assert any("Removed 1 NUL byte" in n for n in t.notices), t.notices


def test_blank_lines_keep_spreadsheet_row_numbers(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text("text,label\na film,pos\n\nbad movie,neg\n,\n")
    t = read_table(path)
    assert t.n_rows == 2 and list(t.df.index) == [2, 4]


def test_blank_header_names_and_duplicates_are_renamed(tmp_path):
    path = tmp_path / "hdr.csv"
    path.write_text(" text ,label,label,\na,x,y,z\n")
    t = read_table(path)
    assert t.columns == ("text", "label", "label_2", "column_4")
    assert any("label_2" in n and "column_4" in n for n in t.notices)


# ----------------------------------------------------------------------------------------------
# Hostile and broken files: a DataError saying what to do, never a traceback
# ----------------------------------------------------------------------------------------------


def test_empty_file(tmp_path):
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(DataError, match=r"'empty.csv' is empty \(0 bytes\)\. Upload a CSV with a header row"):
        read_table(tmp_path / "empty.csv")


def test_binary_garbage(tmp_path):
    import random

    rnd = random.Random(0)
    path = tmp_path / "garbage.csv"
    path.write_bytes(bytes(rnd.randrange(256) for _ in range(4096)))
    with pytest.raises(DataError, match=r"does not look like a text table: .* binary control bytes.*Upload a plain"):
        read_table(path)


def test_zip_bomb_renamed_csv_is_refused_unopened(tmp_path):
    path = tmp_path / "bomb.csv"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("data.csv", "w") as fh:
            chunk = b"0" * (1 << 20)
            for _ in range(64):  # 64 MB of zeros -> ~64 kB on disk
                fh.write(chunk)
    assert path.stat().st_size < 200_000
    with pytest.raises(DataError, match=r"'bomb.csv' is a ZIP archive .*not a text table; it was not opened"):
        read_table(path)


def test_gzip_and_pdf_and_png_are_refused(tmp_path):
    cases = {
        "g.csv": (gzip.compress(b"text,label\n" * 100), "gzip-compressed"),
        "doc.csv": (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "a PDF document"),
        "img.txt": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "a PNG image"),
    }
    for name, (data, what) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DataError, match=what):
            read_table(tmp_path / name)


def test_json_and_html_are_refused(tmp_path):
    (tmp_path / "j.csv").write_text('[{"text": "a film", "label": 1}]')
    with pytest.raises(DataError, match=r"'j.csv' contains JSON, not a table\. Save the data as CSV with a header row"):
        read_table(tmp_path / "j.csv")
    (tmp_path / "h.txt").write_text("<!DOCTYPE html><html><body>hi</body></html>")
    with pytest.raises(DataError, match="contains XML/HTML, not a table"):
        read_table(tmp_path / "h.txt")


def test_random_junk_only_ever_raises_data_error():
    import random

    rnd = random.Random(1234)
    alphabet = ["a", "b", ",", ";", "\t", "|", '"', "\n", "\r", " ", "1", "\x00", "é", "=", "label", "text"]
    outcomes = Counter()
    for _ in range(300):
        data = (("text,label\n" if rnd.random() < 0.5 else "")
                + "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(60))))
        try:
            t = read_table(data.encode(rnd.choice(["utf-8", "latin-1", "utf-16"]), errors="replace"), "junk.csv")
            g = guess_columns(t)
            text = g.text or t.columns[0]
            label = g.label if g.label not in (None, text) else next(c for c in t.columns if c != text)
            multi = rnd.random() < 0.3
            if validate(t, text, label, multi_label=multi).ok:
                split_dataset(build_dataset(t, text, label, multi_label=multi))
            outcomes["ok"] += 1
        except DataError as err:
            assert str(err) and "Traceback" not in str(err)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and sum(outcomes.values()) == 300


def test_wrong_extension(tmp_path):
    path = write_csv(tmp_path / "data.json", good_rows())
    with pytest.raises(DataError, match=r"'data.json' is not a .csv, .tsv or .txt file\. Save the table as CSV"):
        read_table(path)


def test_header_only(tmp_path):
    (tmp_path / "h.csv").write_text("text,label\n")
    with pytest.raises(DataError, match=r"has a header \('text', 'label'\) but no data rows below it"):
        read_table(tmp_path / "h.csv")


def test_single_column(tmp_path):
    (tmp_path / "one.csv").write_text("sentence\nhello\nworld\n")
    with pytest.raises(DataError,
                       match=r"has a single column \(header 'sentence'\); it needs a text column and a label"):
        read_table(tmp_path / "one.csv")


def test_only_blank_lines(tmp_path):
    (tmp_path / "blank.csv").write_text("\n\n  \n")
    with pytest.raises(DataError, match="no content except blank lines"):
        read_table(tmp_path / "blank.csv")


def test_enormous_single_line(tmp_path):
    (tmp_path / "line.csv").write_text("x" * 200_000)
    with pytest.raises(DataError, match=r"The first line of 'line.csv' is 200,000 characters long.*short header"):
        read_table(tmp_path / "line.csv")


def test_enormous_cell_is_read_and_cut(tmp_path):
    limits = Settings(max_chars=1000)
    rows = good_rows()
    rows[0] = ("good " * 100_000, "positive")  # one 500 kB cell
    t = read_table(write_csv(tmp_path / "long.csv", rows))
    report = validate(t, "text", "label", settings=limits)
    assert report.ok
    assert "only the first 1,000 are used: row 2" in problem(report, "long_text").message
    ds = build_dataset(t, "text", "label", settings=limits)
    assert len(ds.texts[0]) == 1000


def test_ragged_row_names_the_row(tmp_path):
    (tmp_path / "r.csv").write_text("text,label\na,pos\nb,neg\nhello, world,pos\n")
    with pytest.raises(DataError, match=r"Row 4 of 'r.csv' has 3 fields but the header has 2 .*double quotes"):
        read_table(tmp_path / "r.csv")


def test_unclosed_quote_names_the_row(tmp_path):
    (tmp_path / "q.csv").write_text('text,label\na,pos\n"b,neg\nc,pos\n')
    with pytest.raises(DataError, match=r'A quoted field starting in row 3 .* never ends.*stray double quote'):
        read_table(tmp_path / "q.csv")


def test_over_the_size_limit(tmp_path, good_csv):
    limit = dict(max_upload_mb=0.0005)  # 500 bytes
    with pytest.raises(DataError, match=r"'reviews.csv' is 930 bytes; the limit is 500 bytes "
                                        r"\(BERTVIZ_MAX_UPLOAD_MB\)\. Upload a smaller"):
        read_table(good_csv, **limit)
    with pytest.raises(DataError, match="the limit is 500 bytes"):
        read_table(good_csv.read_bytes(), name="reviews.csv", **limit)


def test_over_the_row_limit(tmp_path, good_csv):
    with pytest.raises(DataError, match=r"more than 20 data rows, the limit \(BERTVIZ_MAX_ROWS\)"):
        read_table(good_csv, max_rows=20)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(DataError, match="File not found"):
        read_table(tmp_path / "nope.csv")
    with pytest.raises(DataError, match="is a folder"):
        read_table(tmp_path)


# ----------------------------------------------------------------------------------------------
# Column guessing
# ----------------------------------------------------------------------------------------------


def test_guess_by_name(tmp_path):
    rows = [(i, t, lab, "x") for i, (t, lab) in enumerate(good_rows())]
    t = read_table(write_csv(tmp_path / "g.csv", rows, header=("id", "review", "sentiment", "source")))
    g = guess_columns(t)
    assert (g.text, g.label, g.pair) == ("review", "sentiment", None)
    assert g.columns == ("id", "review", "sentiment", "source")


def test_guess_by_content_when_names_say_nothing(tmp_path):
    rows = [(i, lab, t) for i, (t, lab) in enumerate(good_rows())]
    t = read_table(write_csv(tmp_path / "g.csv", rows, header=("id", "a", "b")))
    g = guess_columns(t)
    assert (g.text, g.label) == ("b", "a")
    assert any("longest cells" in r for r in g.reasons)


def test_guess_by_name_even_when_the_label_column_is_empty(tmp_path):
    t = read_table(write_csv(tmp_path / "g.csv", [(t, " ") for t, _ in good_rows()]))
    g = guess_columns(t)
    assert (g.text, g.label) == ("text", "label")
    assert validate(t, g.text, g.label).codes() == ("label_all_missing",)


def test_guess_pair_column(tmp_path):
    rows = [(t, t[::-1], lab) for t, lab in good_rows()]
    t = read_table(write_csv(tmp_path / "nli.csv", rows, header=("premise", "hypothesis", "label")))
    g = guess_columns(t)
    assert (g.text, g.pair, g.label) == ("premise", "hypothesis", "label")
    t2 = read_table(write_csv(tmp_path / "s.csv", rows, header=("sentence1", "sentence2", "label")))
    g2 = guess_columns(t2)
    assert (g2.text, g2.pair, g2.label) == ("sentence1", "sentence2", "label")


def test_a_column_of_numbers_is_never_guessed_as_the_text(tmp_path):
    """Issue 21: an ``id,label`` file had ``id`` guessed as the text (and trained on); ids, scores and
    counts (all or nearly all cells numbers) are never the text, even in a column named "text"."""
    labels = [lab for _, lab in good_rows()]
    t = read_table(write_csv(tmp_path / "ids.csv", [(i, lab) for i, lab in enumerate(labels)], header=("id", "label")))
    g = guess_columns(t)
    assert (g.text, g.label) == (None, "label") and not any(r.startswith("text") for r in g.reasons)
    assert holds_numbers(t, "id") and not holds_numbers(t, "label")
    assert describe_columns(t) == "'id' (numbers), 'label'"
    assert no_text_message(t) == ("No column of 'ids.csv' holds text: found 'id' (numbers), 'label'. Add a column of "
                                  "texts to the file, or name the column that holds them as the text column.")
    # by name too, and whatever the numbers look like; nearly all numbers (one stray word in 30) is still numbers
    nums = ["12", "-3.5", ".5", "1e-3", "1,234.5", "45%", "+7", "1.234,5", " 8 ", "0"] * 3
    nums[4] = "n/a"
    t = read_table(write_csv(tmp_path / "n.csv", list(zip(nums, labels)), header=("text", "label")))
    assert holds_numbers(t, "text") and guess_columns(t).text is None
    # a numbers column beside a texts one: the texts are chosen, by name or by content
    rows = [(i * 1000, f"{i}.5", txt, lab) for i, (txt, lab) in enumerate(good_rows())]
    t = read_table(write_csv(tmp_path / "m.csv", rows, header=("text", "score", "body_x", "label")))
    assert guess_columns(t).text == "body_x"
    # texts that contain numbers, or a few number-only texts, are texts
    rows = [(txt if i % 5 else str(i), lab) for i, (txt, lab) in enumerate(good_rows())]  # 6 of 30 are numbers
    t = read_table(write_csv(tmp_path / "t.csv", rows))
    assert not holds_numbers(t, "text") and guess_columns(t).text == "text"
    # an empty column is not called numbers (validate says it is empty)
    t = read_table(write_csv(tmp_path / "e.csv", [(" ", lab) for lab in labels]))
    assert not holds_numbers(t, "text") and describe_columns(t) == "'text' (empty), 'label'"


def test_a_text_column_of_numbers_is_refused_by_name(tmp_path):
    labels = [lab for _, lab in good_rows()]
    rows = [(i, txt, i % 3, lab) for i, (txt, lab) in enumerate(good_rows())]
    path = write_csv(tmp_path / "ids.csv", rows, header=("id", "review", "pair_n", "label"))
    before = path.read_bytes()
    t = read_table(path)
    err = problem(validate(t, "id", "label"), "text_numbers")
    assert err.severity == "error"
    assert err.message == ("The text column 'id' holds numbers, not texts (e.g. '0', '1', '2'). Choose the column "
                           "that holds the texts (found 'id' (numbers), 'review', 'pair_n' (numbers), 'label'), or "
                           "add a column of texts to the file.")
    assert problem(validate(t, "review", "label", "pair_n"), "pair_numbers").severity == "error"
    with pytest.raises(DataError, match="The text column 'id' holds numbers"):
        validate(t, "id", "label").raise_if_blocking()
    assert validate(t, "review", "label").ok  # the numbers are fine as a label, or left alone
    assert len(labels) == 30 and path.read_bytes() == before  # the user's file is untouched


# ----------------------------------------------------------------------------------------------
# Validation report
# ----------------------------------------------------------------------------------------------


def test_clean_report(good_csv):
    r = validate(read_table(good_csv), "text", "label")
    assert r.ok and r.problems == () and r.text() == "No problems found."
    assert r.summary["class_counts"] == {"negative": 15, "positive": 15} and r.summary["n_classes"] == 2
    r.raise_if_blocking()  # no error


def test_unknown_columns_list_available(good_csv):
    t = read_table(good_csv)
    with pytest.raises(DataError, match=r"There is no column 'txt' in 'reviews.csv'; "
                                        r"choose the text column from: 'text', 'label'"):
        validate(t, "txt", "label")
    with pytest.raises(DataError, match=r"no column 'class'.*choose the label column from: 'text', 'label'"):
        build_dataset(t, "text", "class")
    with pytest.raises(DataError, match="both 'text'; choose two different columns"):
        validate(t, "text", "text")
    with pytest.raises(DataError, match="Choose the label column"):
        validate(t, "text", None)


def test_empty_texts_and_missing_labels_listed_by_row(tmp_path):
    rows = good_rows()
    for i in (0, 3, 7):
        rows[i] = ("   ", rows[i][1])
    rows[10] = (rows[10][0], "")
    rows[11] = (rows[11][0], "NaN")
    t = read_table(write_csv(tmp_path / "e.csv", rows))
    r = validate(t, "text", "label")
    assert r.ok
    p = problem(r, "empty_text")
    assert p.severity == "warning" and p.rows == (2, 5, 9)
    assert p.message == (f"3 rows with empty text in 'text' will be skipped: rows 2, 5 and 9 ({ROW_NOTE}). "
                         "Fill in the text or delete those rows.")
    assert "the header is row 1, the first data row is row 2" in p.message
    m = problem(r, "missing_label")
    assert m.rows == (12, 13) and "2 rows without a label in 'label' will be skipped: rows 12 and 13" in m.message
    ds = build_dataset(t, "text", "label")
    assert len(ds) == 25 and not {2, 5, 9, 12, 13} & set(ds.source_rows)


def test_duplicates_listed(tmp_path):
    rows = good_rows()
    rows += [rows[0], rows[1], (rows[2][0], "negative")]
    t = read_table(write_csv(tmp_path / "d.csv", rows))
    r = validate(t, "text", "label")
    dup = problem(r, "duplicates")
    assert dup.rows == (32, 33) and ("2 rows repeat an earlier row's text and label and will be skipped: "
                                     "rows 32 and 33" in dup.message)
    con = problem(r, "conflicting_duplicates")
    assert con.rows == (34,) and "with a different label; only the first copy is used: row 34" in con.message
    assert len(build_dataset(t, "text", "label")) == 30


def test_row_lists_are_truncated():
    assert format_rows([2]) == "row 2"
    assert format_rows([2, 5]) == "rows 2 and 5"
    assert format_rows(range(2, 50), limit=3) == "rows 2, 3, 4 and 45 more"


def test_one_data_row(tmp_path):
    t = read_table(write_csv(tmp_path / "one.csv", [("a film", "pos")]))
    r = validate(t, "text", "label")
    assert not r.ok and r.codes() == ("single_class",)
    with pytest.raises(DataError, match=r"Every usable row has the same label, 'pos' \(1 row\); "
                                        r"a classifier needs at least two classes"):
        r.raise_if_blocking()


def test_one_class(tmp_path):
    t = read_table(write_csv(tmp_path / "c.csv", [(f"film {i}", "pos") for i in range(20)]))
    with pytest.raises(DataError, match=r"same label, 'pos' \(20 rows\).*Add examples of another class"):
        build_dataset(t, "text", "label")


def test_label_column_all_nan(tmp_path):
    t = read_table(write_csv(tmp_path / "n.csv", [(f"film {i}", "") for i in range(10)], header=("text", "label")))
    r = validate(t, "text", "label")
    assert r.codes() == ("label_all_missing",) and r.errors[0].severity == "error"
    with pytest.raises(DataError, match=r"The label column 'label' is empty in every row\. "
                                        r"Choose the column that holds the classes \(columns: 'text', 'label'\)"):
        r.raise_if_blocking()


def test_rare_class_error_and_few_examples_warning(tmp_path):
    rows = good_rows(6) + [("a typo label", "postive")]
    t = read_table(write_csv(tmp_path / "rare.csv", rows))
    r = validate(t, "text", "label")
    rare = problem(r, "rare_class")
    assert rare.severity == "error" and rare.rows == (14,)
    assert "Class 'postive' has fewer than 2 examples (row 14;" in rare.message
    few = problem(r, "few_examples")
    assert few.severity == "warning" and "'negative' (6), 'positive' (6); under 10 per class" in few.message


def test_free_text_as_label(tmp_path):
    rows = [(t, lab, f"note {i}") for i, (t, lab) in enumerate(good_rows())]
    t = read_table(write_csv(tmp_path / "f.csv", rows, header=("text", "label", "note")))
    r = validate(t, "text", "note")
    assert r.codes() == ("too_many_classes",)
    assert "'note' has 30 different values in 30 rows; it looks like free text" in r.errors[0].message


def test_several_errors_joined(tmp_path):
    t = read_table(write_csv(tmp_path / "x.csv", [("", "", i) for i in range(4)], header=("text", "label", "id")))
    with pytest.raises(DataError) as info:
        validate(t, "text", "label").raise_if_blocking()
    msg = str(info.value)
    assert msg.startswith("The data cannot be used yet (2 problems):\n- The label column 'label' is empty in every row")
    assert "\n- The text column 'text' is empty in every row" in msg


def test_truncation_warning_with_tiny_tokenizer(tmp_path, monkeypatch):
    from transformers import BertTokenizerFast

    from conftest import VOCAB

    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tok = BertTokenizerFast(vocab_file=str(tmp_path / "vocab.txt"), do_lower_case=True, model_max_length=64)
    rows = good_rows()
    rows[4] = ("a great film " * 10, "positive")  # 30 words + [CLS] [SEP] = 32 tokens
    t = read_table(write_csv(tmp_path / "t.csv", rows))
    r = validate(t, "text", "label", tokenizer=tok, max_length=16)
    p = problem(r, "truncated")
    assert p.severity == "warning" and p.rows == (6,)
    assert p.message.startswith("1 of 30 texts (3%) are longer than 16 tokens and will be cut to that length in "
                                "training: row 6")
    assert "truncated" not in validate(t, "text", "label", tokenizer=tok).codes()  # model max 64
    monkeypatch.setattr(data_validation, "TOKEN_CHECK_ROWS", 10)  # big files: an evenly spread sample
    rows[3] = rows[4]  # sampled: positions 0, 3, 6, 9, 12, 16, 19, 22, 25, 29 of 30 (row 4 is not)
    t = read_table(write_csv(tmp_path / "t2.csv", [(f"{a} {i}", b) for i, (a, b) in enumerate(rows)]))
    p = problem(validate(t, "text", "label", tokenizer=tok, max_length=16), "truncated")
    assert p.message.startswith("About 10% of the texts (1 in an evenly spread sample of 10 rows) are longer "
                                "than 16 tokens")


# ----------------------------------------------------------------------------------------------
# Building datasets
# ----------------------------------------------------------------------------------------------


def test_build_is_deterministic_with_sorted_labels(good_csv):
    t = read_table(good_csv)
    ds = build_dataset(t, "text", "label")
    assert ds.label_names == ("negative", "positive") and ds.labels[:2] == (1, 0)
    assert ds.source_rows[:2] == (2, 3) and ds.pairs is None and not ds.multi_label
    assert ds.data_hash == build_dataset(read_table(good_csv), "text", "label").data_hash
    assert len(ds.data_hash) == 16


def test_int_labels_sorted_numerically(tmp_path):
    rows = [(f"film {i}", [10, 2, 1][i % 3]) for i in range(30)]
    rows[0] = (rows[0][0], "10.0")  # a float-formatted integer is the same class
    ds = build_dataset(read_table(write_csv(tmp_path / "i.csv", rows)), "text", "label")
    assert ds.label_names == ("1", "2", "10")
    assert ds.labels[:3] == (2, 1, 0)
    assert ds.class_counts() == {"1": 10, "2": 10, "10": 10}


def test_multi_label(tmp_path):
    rows = [(f"film {i}", ["action|comedy", "drama", "comedy | drama", "action"][i % 4]) for i in range(24)]
    t = read_table(write_csv(tmp_path / "m.csv", rows, header=("text", "genres")))
    single = validate(t, "text", "genres")
    assert "looks_multi_label" in single.codes() and "tick multi-label" in problem(single, "looks_multi_label").message
    ds = build_dataset(t, "text", "genres", multi_label=True)
    assert ds.multi_label and ds.label_names == ("action", "comedy", "drama")
    assert ds.labels[:4] == ((0, 1), (2,), (1, 2), (0,))
    assert ds.multi_hot()[0].tolist() == [1.0, 1.0, 0.0]
    assert ds.class_counts() == {"action": 12, "comedy": 12, "drama": 12}
    tr, va, notes = split_dataset(ds)
    assert len(tr) + len(va) == 24 and any("Multi-label data is split at random" in n for n in notes)


def test_pairs(tmp_path):
    rows = [(t, "it is " + lab, lab) for t, lab in good_rows()]
    rows.append((rows[0][0], "", "positive"))  # same premise, empty hypothesis: not a duplicate
    t = read_table(write_csv(tmp_path / "p.csv", rows, header=("premise", "hypothesis", "label")))
    r = validate(t, "premise", "label", pair_col="hypothesis")
    assert problem(r, "empty_pair").rows == (32,) and "duplicates" not in r.codes()
    ds = build_dataset(t, "premise", "label", pair_col="hypothesis")
    assert len(ds) == 31 and ds.pairs[0] == "it is positive" and ds.pairs[-1] == ""


# ----------------------------------------------------------------------------------------------
# Splits and validation files
# ----------------------------------------------------------------------------------------------


def test_stratified_split_is_deterministic_and_keeps_ratios(tmp_path):
    rows = [(f"text {i}", "a" if i % 4 else "b") for i in range(200)]  # 150 a, 50 b
    ds = build_dataset(read_table(write_csv(tmp_path / "s.csv", rows)), "text", "label")
    tr, va, notes = split_dataset(ds, val_fraction=0.2, seed=42)
    assert (len(tr), len(va)) == (160, 40)
    assert va.class_counts() == {"a": 30, "b": 10} and tr.class_counts() == {"a": 120, "b": 40}
    assert "stratified by class, seed 42" in notes[0]
    tr2, va2, _ = split_dataset(ds, val_fraction=0.2, seed=42)
    assert va2.source_rows == va.source_rows and tr2.data_hash == tr.data_hash
    _, va3, _ = split_dataset(ds, val_fraction=0.2, seed=7)
    assert va3.source_rows != va.source_rows
    assert not set(tr.source_rows) & set(va.source_rows) and list(va.source_rows) == sorted(va.source_rows)


def test_split_falls_back_when_too_small_to_stratify(tmp_path):
    rows = [(f"t {i}", lab) for i, lab in enumerate("aabbcc")]
    ds = build_dataset(read_table(write_csv(tmp_path / "s.csv", rows)), "text", "label")
    tr, va, notes = split_dataset(ds, val_fraction=0.2)
    assert (len(tr), len(va)) == (4, 2)
    assert any("cannot hold all 3 classes; the split is random (not stratified)" in n for n in notes)
    with pytest.raises(DataError, match="between 0 and 1"):
        split_dataset(ds, val_fraction=1.5)


def test_separate_validation_file(tmp_path, good_csv):
    train = build_dataset(read_table(good_csv), "text", "label")
    rows = [("a brand new film", "positive"), (train.texts[0], "positive"), ("", "negative"),
            ("awful new one", "negative")]
    val, notes = validation_dataset(train, read_table(write_csv(tmp_path / "val.csv", rows)), "text", "label")
    assert val.texts == ("a brand new film", "awful new one") and val.label_names == train.label_names
    assert val.source_rows == (2, 5) and val.labels == (1, 0)
    assert any("removed 1 rows whose text is also in the training data" in n for n in notes)
    bad = read_table(write_csv(tmp_path / "bad.csv", [("x", "neutral"), ("y", "positive")]))
    with pytest.raises(DataError, match=r"has labels the training data does not: 'neutral' \(row 2;.*"
                                        r"Training labels: 'negative', 'positive'"):
        validation_dataset(train, bad, "text", "label")


# ----------------------------------------------------------------------------------------------
# CSV export safety
# ----------------------------------------------------------------------------------------------


def test_safe_csv_cell():
    assert safe_csv_cell("=HYPERLINK(\"http://x\")") == "'=HYPERLINK(\"http://x\")"
    assert safe_csv_cell("+1+cmd|' /C calc'!A0") == "'+1+cmd|' /C calc'!A0"
    assert safe_csv_cell("-2+3") == "'-2+3" and safe_csv_cell("@SUM(A1)") == "'@SUM(A1)"
    assert safe_csv_cell("\t=1") == "'\t=1"
    assert safe_csv_cell("-1.5") == "-1.5" and safe_csv_cell(-3) == "-3" and safe_csv_cell(0.25) == "0.25"
    assert safe_csv_cell(None) == "" and safe_csv_cell(float("nan")) == ""
    assert safe_csv_cell("a great film") == "a great film"


def test_data_module_does_not_import_ui_libraries():
    import ast

    import bertviz_app.train.data as mod

    for path in Path(mod.__file__).parent.glob("*.py"):  # every module of the package
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not names & {"gradio", "plotly", "torch"}, path.name
