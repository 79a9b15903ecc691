"""Explaining a whole table: every row predicted and explained by each method asked for, with its
faithfulness and cost, bad rows kept with their reason, a method's cost refusal kept to its row,
the per-class word table, the output written whole or not at all, cancel, and several processes
through accelerate launch."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import bertviz_app as bv
from bertviz_app.interpret.faithfulness_eval import faithfulness

from conftest import free_port, run_launch

ROOT = Path(__file__).resolve().parent.parent

ROWS = [
    ("the film was good", "pos"), ("a tedious slog !", "neg"), ("", "pos"), ("it is not fun", "neg"),
    ("=cmd|' /c calc'!a0 the film", "neg"), ("the movie is great , moving .", "pos"), ("the film was bad", "neg"),
    ("a good , great film", "pos"),
]


@pytest.fixture()
def table(tmp_path) -> Path:
    path = tmp_path / "reviews.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["review", "sentiment"])
        w.writerows(ROWS)
    return path


def test_every_row_is_explained_with_its_own_prediction_and_attribution(tiny, table, tmp_path):
    seen = []
    res = bv.explain_csv(tiny, table, tmp_path / "out.jsonl", progress=lambda d, n: seen.append((d, n)))
    assert res.rows == len(ROWS) and res.explained == len(ROWS) - 1
    assert res.skipped == ((4, "Text is empty: enter a sentence to analyse."),)  # spreadsheet row 4, the empty cell
    assert seen[-1] == (7, 7)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    done = {r["row"]: r for r in lines if "skipped" not in r}
    assert sorted(done) == [2, 3, 5, 6, 7, 8, 9] and {r["row"] for r in lines if "skipped" in r} == {4}
    text = "the movie is great , moving ."
    one = done[7]
    assert one["text"] == text
    ref_pred = bv.predict(tiny, [text])[0]
    ref = bv.attribute(tiny, text, tolerance=0.05)
    assert one["label"] == ref_pred.label and one["target"] == ref.target
    for k, p in ref_pred.scores.items():
        assert one["scores"][k] == pytest.approx(p, abs=1e-5)
    assert one["words"] == ["the", "movie", "is", "great", ",", "moving", "."]
    assert list(one["methods"]) == ["ig"]  # the default: Integrated Gradients alone
    ig = one["methods"]["ig"]
    assert sum(ig["attributions"]) == pytest.approx(float(sum(ref.scores)), abs=1e-4)
    ref_f = faithfulness(tiny, ref)  # the row's faithfulness is that of the same attribution alone
    assert ig["comprehensiveness"] == pytest.approx(ref_f.comprehensiveness, abs=1e-4)
    assert ig["sufficiency_k"] == pytest.approx(list(ref_f.sufficiency_k), abs=1e-4)
    # IG completeness per row: the words' scores add up to f(x) - f(baseline) up to the delta
    for r in done.values():
        m = r["methods"]["ig"]
        assert sum(m["attributions"]) - m["delta"] == pytest.approx(r["f_x"] - r["f_baseline"], abs=1e-4)
        assert m["ks"] == [10, 20, 30, 40, 50] and len(m["comprehensiveness_k"]) == 5 and m["seconds"] > 0
    assert set(res.top_words) <= set(tiny.labels)
    for words in res.top_words.values():
        means = [m for _, m, _ in words]
        assert all(n >= 2 for _, _, n in words) and means == sorted(means, reverse=True)


def test_csv_output_is_safe_for_spreadsheets_and_lists_skipped_rows(tiny, table, tmp_path):
    out = tmp_path / "out.csv"
    bv.explain_csv(tiny, table, out, target="positive", tolerance=None, n_steps=8)
    rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    assert [int(r["bv_row"]) for r in rows] == list(range(2, 2 + len(ROWS)))
    assert rows[2]["bv_status"].startswith("skipped: Text is empty")
    assert rows[4]["review"] == "'" + ROWS[4][0]  # a formula is shown, never run
    ok = [r for r in rows if r["bv_status"] == "ok"]
    assert all(r["bv_target"] == "positive" for r in ok) and all(r["bv_ig_top_words"] for r in ok)
    assert {"bv_p_negative", "bv_p_positive"} <= set(rows[0])


def test_bad_requests_say_what_to_fix_and_leave_earlier_files(tiny, table, tmp_path):
    earlier = tmp_path / "out.csv"
    earlier.write_text("earlier results\n")
    cases = [
        (dict(out=tmp_path / "out.txt"), "must end in .csv or .jsonl"),
        (dict(out=tmp_path / "missing" / "o.csv"), "does not exist"),
        (dict(out=earlier, text_column="body"), "There is no column 'body'"),
        (dict(out=earlier, target="neutral"), "neutral"),
        (dict(out=earlier, baseline="nothing"), "baseline"),
    ]
    for kw, says in cases:
        with pytest.raises(bv.InputError, match=says):
            bv.explain_csv(tiny, table, **kw)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(bv.CancelledError, match="no file was written"):
        bv.explain_csv(tiny, table, earlier, cancel=cancel)
    assert earlier.read_text() == "earlier results\n"
    empty = tmp_path / "empty.csv"
    empty.write_text("review,sentiment\n,pos\n   ,neg\n")
    with pytest.raises(bv.InputError, match="No row of empty.csv has a text"):
        bv.explain_csv(tiny, empty, earlier)


def test_cli_explain_csv(tiny_model_dir, table, tmp_path):
    from bertviz_app.cli import main

    out = tmp_path / "out.csv"
    assert main(["explain-csv", str(table), "--out", str(out), "--model", str(tiny_model_dir), "--json"]) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8", newline="")))
    assert len(rows) == len(ROWS) and rows[4]["review"] == "'" + ROWS[4][0]
    assert json.loads(rows[4]["bv_guarded"])[0] == "review"  # (and bv_ig_top_words when its top word is the =cmd one)
    raw = tmp_path / "raw.csv"
    assert main(["explain-csv", str(table), "--out", str(raw), "--model", str(tiny_model_dir), "--raw"]) == 0
    rows = list(csv.DictReader(raw.open(encoding="utf-8", newline="")))
    assert [(r["review"], r["sentiment"]) for r in rows] == ROWS and rows[4]["bv_guarded"] == ""  # as given
    assert main(["explain-csv", str(table), "--out", str(tmp_path / "x.txt"), "--model", str(tiny_model_dir)]) == 2


def test_two_processes_through_accelerate_launch_give_the_same_file(tiny_model_dir, table, tmp_path):
    """`accelerate launch --num_processes 2` on the CPU: each process explains every other row,
    the main one merges them in row order; the result equals one process's."""
    single, double = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    base = ["-m", "bertviz_app", "explain-csv", str(table), "--model", str(tiny_model_dir)]
    subprocess.run([sys.executable, *base, "--out", str(single)], env=env, check=True, capture_output=True, timeout=300)

    def command(attempt: int) -> list[str]:  # a fresh port and output for a second attempt (run_launch)
        return [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--num_machines", "1",
                "--mixed_precision", "no", "--dynamo_backend", "no", "--multi_gpu", "--main_process_port",
                str(free_port()), *base, "--out", str(double.with_name(f"two{attempt}.jsonl")), "--json"]

    run = run_launch(command, env, timeout=300)
    double = Path(run.args[run.args.index("--out") + 1])
    assert run.returncode == 0, run.stderr[-3000:]
    summary = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert len(summary) == 1 and summary[0]["processes"] == 2, run.stdout  # the main process reports, once
    one = [json.loads(line) for line in single.read_text().splitlines()]
    two = [json.loads(line) for line in double.read_text().splitlines()]
    assert [r["row"] for r in two] == [r["row"] for r in one]
    for a, b in zip(one, two):
        assert a.get("label") == b.get("label") and a.get("words") == b.get("words")
        if "words" not in a:
            assert a == b
            continue
        ma, mb = a["methods"]["ig"], b["methods"]["ig"]
        assert ma["attributions"] == pytest.approx(mb["attributions"], abs=1e-5)
        assert ma["comprehensiveness"] == pytest.approx(mb["comprehensiveness"], abs=1e-5)
    assert not list(tmp_path.glob(".two.jsonl.shard*"))  # the shards are merged and removed


def test_a_table_of_texts_alone_is_enough(tiny, tmp_path):
    one = tmp_path / "texts.csv"
    one.write_text("review\nthe film was good\na tedious slog !\n", encoding="utf-8")
    res = bv.explain_csv(tiny, one, tmp_path / "out.csv")
    assert res.explained == 2 and not res.skipped
    with pytest.raises(bv.DataError, match="single column"):  # training still needs a label column
        bv.read_table(one)


FAST = ("ig", "gradient_x_input", "saliency", "occlusion")


def test_csv_and_jsonl_record_the_tolerance_the_steps_were_chosen_for(tiny, table, tmp_path):
    bv.explain_csv(tiny, table, tmp_path / "out.jsonl", methods="ig", tolerance=0.2)
    bv.explain_csv(tiny, table, tmp_path / "out.csv", methods="ig", tolerance=0.2)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    rows = list(csv.DictReader((tmp_path / "out.csv").open(encoding="utf-8", newline="")))
    explained = [r for r in lines if "skipped" not in r]
    assert explained and all(r["methods"]["ig"]["tolerance"] == 0.2 for r in explained)
    done = [r for r in rows if r["bv_ig_n_steps"]]
    assert len(done) == len(explained) and all(r["bv_ig_tolerance"] == "0.2" for r in done)
    assert {int(r["bv_ig_n_steps"]) for r in done} == {r["methods"]["ig"]["n_steps"] for r in explained}


def test_every_method_gets_its_words_faithfulness_and_seconds_and_csv_agrees_with_jsonl(tiny, table, tmp_path):
    res = bv.explain_csv(tiny, table, tmp_path / "out.jsonl", methods=",".join(FAST), n_steps=8, tolerance=None)
    bv.explain_csv(tiny, table, tmp_path / "out.csv", methods=FAST, n_steps=8, tolerance=None)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    rows = {int(r["bv_row"]): r for r in csv.DictReader((tmp_path / "out.csv").open(encoding="utf-8", newline=""))}
    for k in FAST:
        block = {f"bv_{k}_top_words", f"bv_{k}_comprehensiveness", f"bv_{k}_sufficiency", f"bv_{k}_seconds"}
        assert block <= set(rows[2])
    assert {"bv_ig_delta", "bv_ig_relative_delta"} <= set(rows[2]) and "bv_occlusion_delta" not in rows[2]
    # how IG's steps were chosen, beside them: 8 fixed steps (no tolerance) in both files
    assert rows[2]["bv_ig_n_steps"] == "8" and rows[2]["bv_ig_tolerance"] == ""
    assert all(r["methods"]["ig"]["n_steps"] == 8 and r["methods"]["ig"]["tolerance"] is None
               for r in lines if "skipped" not in r)
    assert res.methods == FAST and set(res.method_stats) == set(FAST) == set(res.method_top_words)
    for r in (r for r in lines if "skipped" not in r):
        assert list(r["methods"]) == list(FAST)
        c = rows[r["row"]]
        for k, m in r["methods"].items():
            assert len(m["attributions"]) == len(r["words"])
            for v in (m["comprehensiveness"], m["sufficiency"], *m["comprehensiveness_k"], *m["sufficiency_k"]):
                assert -1 <= v <= 1
            assert m["comprehensiveness"] == pytest.approx(np.mean(m["comprehensiveness_k"]), abs=1e-9)
            # the two files hold the same run's numbers (each file is its own run: the same values)
            assert float(c[f"bv_{k}_comprehensiveness"]) == pytest.approx(m["comprehensiveness"], abs=1e-4)
            assert float(c[f"bv_{k}_sufficiency"]) == pytest.approx(m["sufficiency"], abs=1e-4)
            top = max(range(len(r["words"])), key=lambda i: abs(m["attributions"][i]))
            assert c[f"bv_{k}_top_words"].split("; ")[0].lstrip("'").startswith(f"{r['words'][top]} ")
    for st in res.method_stats.values():
        assert st["explained"] == res.explained and st["refused"] == 0 and st["seconds_per_text"] > 0
        assert -1 <= st["mean_comprehensiveness"] <= 1 and -1 <= st["mean_sufficiency"] <= 1
    assert res.to_dict()["method_stats"]["occlusion"]["explained"] == res.explained


def test_a_model_that_reads_one_word_gets_that_word_first_and_faithful_scores(tmp_path):
    from conftest import make_sentiment_model

    lm = bv.load_model(str(make_sentiment_model(tmp_path / "sentiment")), device="cpu")
    # negative reviews: this model reads the empty input as positive (p 0.997), so only a negative
    # word moves it and the evidence of each row is that one word
    texts = ["the film was awful", "the movie is tedious", "it was bad", "a film it was awful", "the movie it was bad"]
    path = tmp_path / "s.csv"
    path.write_text("review\n" + "\n".join(texts) + "\n", encoding="utf-8")
    bv.explain_csv(lm, path, tmp_path / "s.jsonl", methods=("ig", "occlusion"), n_steps=16, tolerance=None)
    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    cue = {"awful", "tedious", "bad"}
    rng = np.random.default_rng(0)
    for r in lines:
        for k in ("ig", "occlusion"):
            m = r["methods"][k]
            assert r["target"] == "negative" and r["words"][int(np.argmax(m["attributions"]))] in cue, (k, r["text"])
        a = bv.attribute(lm, r["text"], n_steps=16)
        random = np.mean([faithfulness(lm, bv.Attribution(**{**a.__dict__, "scores": rng.normal(size=len(a.tokens))}))
                          .comprehensiveness for _ in range(5)])
        for k in ("ig", "occlusion"):
            assert r["methods"][k]["comprehensiveness"] > random + 0.3, (k, r["text"])


def test_a_method_refused_on_a_long_row_leaves_the_other_rows_and_methods(tiny, table, tmp_path, monkeypatch):
    """Occlusion's cost refusal (one forward row per word, each timed at 1 s here, 5 s allowed) hits the
    rows of more than 5 words; those rows keep their other methods, the shorter rows everything."""
    import bertviz_app.interpret.methods as methods

    monkeypatch.setattr(methods.WordFeatures, "seconds_per_row", lambda self: 1.0)
    tiny = tiny.with_settings(max_method_seconds=5)
    res = bv.explain_csv(tiny, table, tmp_path / "out.jsonl", methods=("occlusion", "saliency"))
    bv.explain_csv(tiny, table, tmp_path / "out.csv", methods=("occlusion", "saliency"))
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    rows = {int(r["bv_row"]): r for r in csv.DictReader((tmp_path / "out.csv").open(encoding="utf-8", newline=""))}
    long = {r["row"] for r in lines if "skipped" not in r and len(r["words"]) > 5}
    assert long and len(long) < res.explained
    for r in (r for r in lines if "skipped" not in r):
        occ, sal = r["methods"]["occlusion"], r["methods"]["saliency"]
        assert "comprehensiveness" in sal and rows[r["row"]]["bv_status"] == "ok"
        if r["row"] in long:
            assert "limit is 5 s" in occ["refused"]
            assert rows[r["row"]]["bv_occlusion_top_words"].startswith("refused: occlusion on this text")
            assert rows[r["row"]]["bv_occlusion_comprehensiveness"] == ""
        else:
            assert "refused" not in occ and rows[r["row"]]["bv_occlusion_comprehensiveness"]
    st = res.method_stats
    assert st["occlusion"]["refused"] == len(long) and st["occlusion"]["explained"] == res.explained - len(long)
    assert st["saliency"]["refused"] == 0
    # every word table comes from the rows the method explained
    assert res.top_words == res.method_top_words["occlusion"]


def test_methods_are_checked_before_any_work(tiny, table, tmp_path):
    from bertviz_app.cli import main

    for bad, says in [("shap", "Unknown attribution method 'shap'"), ("ig,ig", "listed twice"), ("", "No method")]:
        with pytest.raises(bv.InputError, match=says):
            bv.explain_csv(tiny, table, tmp_path / "o.csv", methods=bad)
    assert not (tmp_path / "o.csv").exists()
    assert bv.explain_csv(tiny, table, tmp_path / "o.csv", methods=["integrated_gradients"]).methods == ("ig",)
    assert main(["explain-csv", str(table), "--out", str(tmp_path / "o.csv"), "--model", str(tiny.path),
                 "--methods", "ig,nope"]) == 2


def test_cancel_stops_a_slow_method_between_rows_and_writes_nothing(tiny, table, tmp_path, monkeypatch):
    import bertviz_app.interpret.methods as methods

    cancel, calls = threading.Event(), []
    real = methods.explain

    def explain(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            cancel.set()  # the user presses Cancel while the second row is explained
        return real(*a, **kw)

    monkeypatch.setattr(methods, "explain", explain)
    with pytest.raises(bv.CancelledError, match="no file was written"):
        bv.explain_csv(tiny, table, tmp_path / "out.csv", methods=("occlusion",), cancel=cancel)
    assert len(calls) == 2 and not (tmp_path / "out.csv").exists()


# An input the user knows: codes with leading zeros, empty cells, "NA"/"nan" as words, a label column of
# their own, a column already named like one the app adds, and cells a spreadsheet would run.
MINE_HEADER = ["id", "review", "label", "bv_prediction", "note", " padded "]
MINE = [
    ["007", "the film was good", "positive", "x", "", "a"],
    ["008", "@user a tedious slog", "negative", "", "=1+1", ""],
    ["", "-dull film", "neutral", "", "+33 6 12", "NA"],
    ["010", "", "neutral", "", "NA", ""],
    ["011", "it is not fun\nat all", "nan", "", "-5", "1e3"],
    ["012", "  the movie is great  ", "positive", "null", "@", "\tb"],
]


def _formula(cell: str) -> bool:
    return bool(cell) and cell[0] in "=+-@\t\r" and cell != "-5"


def test_every_input_cell_comes_back_as_given(tiny, tmp_path):
    src = tmp_path / "mine.csv"
    with src.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([MINE_HEADER, *MINE])
    n_in = len(MINE_HEADER)
    expected = {c: tuple(i + 2 for i, row in enumerate(MINE) if _formula(row[j])) for j, c in enumerate(MINE_HEADER)}
    expected = {c: r for c, r in expected.items() if r}
    assert sum(map(len, expected.values())) == 6  # @user, -dull; =1+1, +33 6 12, @; a tab ("-5" is a number)

    def read(path):
        with path.open(encoding="utf-8", newline="") as f:
            return list(csv.reader(f))

    raw = bv.explain_csv(tiny, src, tmp_path / "raw.csv", text_column="review", n_steps=4, tolerance=None, raw=True)
    got = read(tmp_path / "raw.csv")
    assert got[0][:n_in] == MINE_HEADER  # the header as given, ' padded ' too
    assert got[0][n_in:n_in + 3] == ["bv_row", "bv_prediction_2", "bv_p_negative"]  # bv_prediction is the user's
    assert "label" not in got[0][n_in:] and got[0][-2:] == ["bv_status", "bv_guarded"]
    assert [row[:n_in] for row in got[1:]] == MINE  # every cell, unchanged, in order
    assert [row[n_in] for row in got[1:]] == [str(i + 2) for i in range(len(MINE))]
    assert raw.raw and {c: r for c, r in raw.formula_cells.items() if c in MINE_HEADER} == expected
    assert all(row[-1] == "" for row in got[1:])
    assert any("The raw CSV has them as given" in n for n in raw.notes)

    safe = bv.explain_csv(tiny, src, tmp_path / "safe.csv", text_column="review", n_steps=4, tolerance=None)
    got = read(tmp_path / "safe.csv")
    assert got[0][:n_in] == MINE_HEADER and not safe.raw
    for i, (given, back) in enumerate(zip(MINE, got[1:])):
        assert back[:n_in] == [("'" + c) if _formula(c) else c for c in given]  # the guard, and nothing else
        cols = [c for c in json.loads(back[-1] or "[]") if c in MINE_HEADER]
        assert cols == [c for c, v in zip(MINE_HEADER, given) if _formula(v)], i
    assert {c: r for c, r in safe.formula_cells.items() if c in MINE_HEADER} == expected
    note = next(n for n in safe.notes if "Each got a leading '" in n)
    assert note.startswith(f"{sum(map(len, safe.formula_cells.values()))} CSV cells start with =, +, -, @")
    assert "column 'review': rows 3 and 4" in note and "column 'note': rows 3, 4 and 7" in note

    bv.explain_csv(tiny, src, tmp_path / "out.jsonl", text_column="review", n_steps=4, tolerance=None)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [x["row"] for x in lines] == [2, 3, 4, 5, 6, 7] and lines[3]["skipped"].startswith("Text is empty")
    names = ["id", "review", "label", "bv_prediction", "note", "padded"]  # JSON keys: the columns as the app names them
    assert [list(x["input"].values()) for x in lines] == MINE and all(list(x["input"]) == names for x in lines)
