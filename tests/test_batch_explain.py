"""Explaining a whole table: every row predicted and explained, bad rows kept with their reason,
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

import pytest

import bertviz_app as bv

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
    assert sum(one["attributions"]) == pytest.approx(float(sum(ref.scores)), abs=1e-4)
    # IG completeness per row: the words' scores add up to f(x) - f(baseline) up to the delta
    for r in done.values():
        assert sum(r["attributions"]) - r["delta"] == pytest.approx(r["f_x"] - r["f_baseline"], abs=1e-4)
    assert set(res.top_words) <= set(tiny.labels)
    for words in res.top_words.values():
        assert all(n >= 2 for _, _, n in words) and [m for _, m, _ in words] == sorted((m for _, m, _ in words), reverse=True)


def test_csv_output_is_safe_for_spreadsheets_and_lists_skipped_rows(tiny, table, tmp_path):
    out = tmp_path / "out.csv"
    bv.explain_csv(tiny, table, out, target="positive", tolerance=None, n_steps=8)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [int(r["row"]) for r in rows] == list(range(2, 2 + len(ROWS)))
    assert rows[2]["status"].startswith("skipped: Text is empty")
    assert rows[4]["text"].startswith("'=cmd")  # a formula is shown, never run
    ok = [r for r in rows if r["status"] == "ok"]
    assert all(r["target"] == "positive" for r in ok) and all(r["top_words"] for r in ok)
    assert {"p_negative", "p_positive"} <= set(rows[0])


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
    assert len(list(csv.DictReader(out.open(encoding="utf-8")))) == len(ROWS)
    assert main(["explain-csv", str(table), "--out", str(tmp_path / "x.txt"), "--model", str(tiny_model_dir)]) == 2


def test_two_processes_through_accelerate_launch_give_the_same_file(tiny_model_dir, table, tmp_path):
    """`accelerate launch --num_processes 2` on the CPU: each process explains every other row,
    the main one merges them in row order; the result equals one process's."""
    single, double = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    base = ["-m", "bertviz_app", "explain-csv", str(table), "--model", str(tiny_model_dir)]
    subprocess.run([sys.executable, *base, "--out", str(single)], env=env, check=True, capture_output=True, timeout=300)
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--num_machines", "1",
              "--mixed_precision", "no", "--dynamo_backend", "no", "--multi_gpu"]
    run = subprocess.run([*launch, *base, "--out", str(double), "--json"], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert len(summary) == 1 and summary[0]["processes"] == 2, run.stdout  # the main process reports, once
    one = [json.loads(line) for line in single.read_text().splitlines()]
    two = [json.loads(line) for line in double.read_text().splitlines()]
    assert [r["row"] for r in two] == [r["row"] for r in one]
    for a, b in zip(one, two):
        assert a.get("label") == b.get("label") and a.get("words") == b.get("words")
        assert a.get("attributions") == pytest.approx(b.get("attributions"), abs=1e-5) if "words" in a else a == b
    assert not list(tmp_path.glob(".two.jsonl.shard*"))  # the shards are merged and removed


def test_a_table_of_texts_alone_is_enough(tiny, tmp_path):
    one = tmp_path / "texts.csv"
    one.write_text("review\nthe film was good\na tedious slog !\n", encoding="utf-8")
    res = bv.explain_csv(tiny, one, tmp_path / "out.csv")
    assert res.explained == 2 and not res.skipped
    with pytest.raises(bv.DataError, match="single column"):  # training still needs a label column
        bv.read_table(one)
