"""Evaluating a model on a labelled file (issue 21): metrics as scikit-learn computes them on the same
predictions, slices worst first with Wilson intervals, label mapping, calibration on a held-out part,
the CLI's --json and --out, POST /v1/evaluate, and every bad input with its message."""

from __future__ import annotations

import csv
import io
import json
import random
import re
import threading
import zipfile

import numpy as np
import pytest

import bertviz_app as bv
from bertviz_app.calibration import calibration_metrics, softmax_t
from bertviz_app.cli import main

WORDS = ["good", "bad", "great", "awful", "fun", "tedious", "gorgeous", "moving", "slog"]
FILLER = ["the", "film", "movie", "was", "is", "a", "it", "not"]


def _rows(n: int, seed: int = 0, labels=("negative", "positive")) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = rng.choices(FILLER, k=rng.randint(1, 12)) + [rng.choice(WORDS)]
        rng.shuffle(words)
        out.append((" ".join(words), rng.choice(labels), rng.choice(["web", "shop"])))
    return out


def _csv(rows, header=("text", "label", "source")) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


@pytest.fixture()
def data(tmp_path):
    path = tmp_path / "eval.csv"
    path.write_text(_csv(_rows(80)), encoding="utf-8")
    return path


def test_metrics_match_sklearn_on_the_same_predictions(tiny, data):
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support

    ev = bv.evaluate_file(tiny, data)
    rows = list(csv.DictReader(data.open(encoding="utf-8")))
    assert ev.rows == 80 and ev.columns == ("text", "label", None) and ev.label_mapping == "names"
    # the predictions are predict's (the raw softmax), row for row
    ref = bv.predict(tiny, [r["text"] for r in rows], calibrated=False)
    assert [tiny.labels[i] for i in ev.predicted] == [p.label for p in ref]
    np.testing.assert_allclose(ev.probs, [p.probs for p in ref], atol=1e-5)
    y = np.array([tiny.labels.index(r["label"]) for r in rows])
    np.testing.assert_array_equal(ev.true, y)
    p = ev.predicted
    assert ev.accuracy == pytest.approx(accuracy_score(y, p))
    assert ev.macro_f1 == pytest.approx(f1_score(y, p, average="macro", zero_division=0))
    prec, rec, f1, sup = precision_recall_fscore_support(y, p, labels=[0, 1], zero_division=0)
    for i, name in enumerate(tiny.labels):
        got = ev.per_class[name]
        assert (got["precision"], got["recall"], got["f1"], got["support"]) == pytest.approx(
            (prec[i], rec[i], f1[i], sup[i]))
    assert ev.confusion == confusion_matrix(y, p, labels=[0, 1]).tolist()
    wrong = ev.misclassified()
    assert len(wrong) == int((p != y).sum())
    assert [w["confidence"] for w in wrong] == sorted((w["confidence"] for w in wrong), reverse=True)
    for w in wrong:
        assert w["text"] == rows[w["row"] - 2]["text"] and w["true"] == rows[w["row"] - 2]["label"]
        assert w["predicted"] != w["true"]


def test_wilson_interval_matches_the_formula_and_its_known_values():
    lo, hi = bv.wilson_interval(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)  # the textbook example
    assert bv.wilson_interval(0, 5)[0] == 0.0 and bv.wilson_interval(5, 5)[1] == 1.0
    assert bv.wilson_interval(0, 0) is None


def test_slices_are_worst_first_with_their_sizes_and_intervals(tiny, data):
    ev = bv.evaluate_file(tiny, data, words=["NOT", "film", "films", "xyz"])
    rows = list(csv.DictReader(data.open(encoding="utf-8")))
    ok = ev.predicted == ev.true
    filled = [s for s in ev.slices if s.size]
    assert [s.accuracy for s in filled] == sorted(s.accuracy for s in filled)  # worst first
    assert [s.size for s in ev.slices[len(filled):]] == [0] * (len(ev.slices) - len(filled))  # empty ones last
    by = {(s.kind, s.value): s for s in ev.slices}
    for s in ev.slices:
        if s.size:
            assert s.interval == pytest.approx(bv.wilson_interval(s.correct, s.size))
            assert s.accuracy == pytest.approx(s.correct / s.size)
    for i, name in enumerate(tiny.labels):
        assert by[("true label", name)].size == int((ev.true == i).sum())
        assert by[("true label", name)].correct == int(ok[ev.true == i].sum())
    has = lambda w: [bool(re.search(rf"\b{w}\b", r["text"], re.I)) for r in rows]  # noqa: E731
    assert by[("word", "NOT")].size == sum(has("not")) > 0  # case-insensitive
    assert by[("word", "film")].size == sum(has("film"))
    assert by[("word", "films")].size == 0 and by[("word", "xyz")].size == 0  # whole words only
    assert by[("column", "web")].size + by[("column", "shop")].size == 80
    lengths = [s for s in ev.slices if s.kind == "length"]
    assert sum(s.size for s in lengths) == 80 and 2 <= len(lengths) <= 4  # quartiles of the token counts
    d = ev.to_dict()
    assert d["slices"][0]["name"] == ev.slices[0].name and d["slices"][0]["interval"] == list(ev.slices[0].interval)


def test_extra_columns_with_many_values_are_not_sliced(tiny, tmp_path):
    rows = [(t, y, str(i)) for i, (t, y, _) in enumerate(_rows(40))]
    path = tmp_path / "ids.csv"
    path.write_text(_csv(rows, ("text", "label", "ref")), encoding="utf-8")
    ev = bv.evaluate_file(tiny, path)
    assert not [s for s in ev.slices if s.kind == "column"]  # 40 distinct values > 20


def test_labels_map_by_name_case_or_id(tiny, tmp_path):
    base = _rows(30)
    ids = tmp_path / "ids.csv"
    ids.write_text(_csv([(t, str(tiny.labels.index(y)), s) for t, y, s in base]), encoding="utf-8")
    cased = tmp_path / "cased.csv"
    cased.write_text(_csv([(t, y.upper(), s) for t, y, s in base]), encoding="utf-8")
    ref = bv.evaluate_file(tiny, _write(tmp_path / "ref.csv", _csv(base)))
    for path, how in ((ids, "ids"), (cased, "names (case ignored)")):
        ev = bv.evaluate_file(tiny, path)
        assert ev.label_mapping == how and ev.accuracy == ref.accuracy
        np.testing.assert_array_equal(ev.true, ref.true)


def _write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_unknown_labels_are_listed_with_their_rows(tiny, tmp_path):
    rows = _rows(10)
    rows[1] = (rows[1][0], "neutral", "web")  # row 3 of the file (the header is row 1)
    rows[3] = (rows[3][0], "neutral", "web")  # row 5
    rows[6] = (rows[6][0], "meh", "web")  # row 8
    with pytest.raises(bv.DataError) as err:
        bv.evaluate_file(tiny, _write(tmp_path / "x.csv", _csv(rows)))
    msg = str(err.value)
    assert "'neutral' (rows 3 and 5)" in msg and "'meh' (row 8)" in msg and "'negative', 'positive'" in msg
    assert "4 distinct labels, the model 2 classes" in msg
    ids = [(t, str(i % 3), s) for i, (t, _, s) in enumerate(_rows(9))]  # 0, 1, 2 for a 2-class model
    with pytest.raises(bv.DataError, match=r"numbers from 0 to 2 .* ids are 0 to 1\. Out of range: '2' \(rows 4, 7 "
                                           r"and 10\)"):
        bv.evaluate_file(tiny, _write(tmp_path / "ids.csv", _csv(ids)))


def test_calibration_fits_on_one_part_and_measures_on_the_other(tiny, data):
    ev = bv.evaluate_file(tiny, data, hold_out=0.25, seed=3)
    c = ev.calibration
    assert c["fitted_on_rows"] == 20 and c["measured_on_rows"] == 60 and c["temperature"] > 0
    measure = np.array([p == "measure" for p in ev.calibration_part])
    assert measure.sum() == 60 and {"fit", "measure"} == set(ev.calibration_part)
    before = calibration_metrics(softmax_t(ev.logits[measure], 1.0), ev.true[measure])
    after = calibration_metrics(softmax_t(ev.logits[measure], c["temperature"]), ev.true[measure])
    assert (c["ece"], c["nll"], c["brier"]) == pytest.approx((before["ece"], before["nll"], before["brier"]))
    assert (c["ece_after"], c["nll_after"]) == pytest.approx((after["ece"], after["nll"]))
    assert sum(b["count"] for b in ev.reliability["before"]) == 60
    again = bv.evaluate_file(tiny, data, hold_out=0.25, seed=3)
    assert again.calibration == c  # the split is seeded


def test_small_and_one_class_files_report_metrics_without_a_temperature(tiny, tmp_path):
    small = bv.evaluate_file(tiny, _write(tmp_path / "s.csv", _csv(_rows(12))))
    c = small.calibration
    assert c["temperature"] is None and c["ece_after"] is None and c["measured_on_rows"] == 12
    assert "12 rows" in c["note"] and c["ece"] is not None and small.macro_f1 is not None
    one = bv.evaluate_file(tiny, _write(tmp_path / "one.csv", _csv(_rows(30, labels=("positive",)))))
    assert one.macro_f1 is None and one.calibration["temperature"] is None and one.accuracy is not None
    assert "one class" in one.calibration["note"]
    assert any("true label 'positive'" in n and "macro-F1" in n for n in one.notices)


def test_empty_and_huge_text_cells_are_named_by_row(tiny, tmp_path):
    rows = _rows(25)
    rows[2] = ("   ", "positive", "web")  # row 4: empty text, skipped
    rows[4] = ("good " * 5000, "positive", "web")  # row 6: 25,000 characters, cut at max_chars
    rows[5] = (rows[5][0], "", "web")  # row 7: no label, skipped
    ev = bv.evaluate_file(tiny, _write(tmp_path / "x.csv", _csv(rows)))
    assert ev.rows == 23 and ev.skipped == ((4, "empty text"), (7, "no label"))
    text = " ".join(ev.notices)
    assert "row 4" in text and "row 7" in text and "row 6" in text and "20,000" in text
    assert ev.texts[ev.source_rows.index(6)] == "good " * 5000  # reported as given


@pytest.mark.parametrize("content, says", [
    (b"", "is empty (0 bytes)"),
    (b"text,label\n", "no data rows"),
    (b"id,label\n1,positive\n2,negative\n3,positive\n", "No column of 'bad.csv' holds text: found 'id' (numbers), "
                                                        "'label'"),
    (b"text,id\nthe film was good,1\nthe film was bad,2\nit was fun,3\n", "No label column found"),
    (b"text,label\n   ,positive\n ,negative\n", "is empty in every row"),
])
def test_bad_files_are_refused_with_a_message(tiny, tmp_path, content, says):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(bv.DataError) as err:
        bv.evaluate_file(tiny, path)
    assert says in str(err.value)


def test_a_zip_renamed_csv_is_refused_and_the_file_is_untouched(tiny, tmp_path):
    path = tmp_path / "data.csv"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("inner.csv", _csv(_rows(5)))
    before = path.read_bytes()
    with pytest.raises(bv.DataError, match="(?i)zip"):
        bv.evaluate_file(tiny, path)
    assert path.read_bytes() == before


def test_a_multi_label_model_is_refused(tmp_path, data):
    from conftest import make_tiny_model

    lm = bv.load_model(str(make_tiny_model(tmp_path / "ml", num_labels=3, multi_label=True)), device="cpu")
    with pytest.raises(bv.InputError, match="supports single-label"):
        bv.evaluate_file(lm, data)


def test_progress_and_cancel(tiny, data):
    seen = []
    bv.evaluate_file(tiny, data, batch_size=16, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (80, 80) and [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) == 5
    stop = threading.Event()

    def cancel_after_two(done, total):
        if done >= 32:
            stop.set()

    with pytest.raises(bv.CancelledError, match="after 32 of 80 rows"):
        bv.evaluate_file(tiny, data, batch_size=16, progress=cancel_after_two, cancel=stop)


# --------------------------------------------------------------------------- the CLI
def test_cli_json_contract(tiny_model_dir, data, capsys):
    assert main(["evaluate", str(data), "--model", str(tiny_model_dir), "--word", "not", "--word", "film",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"rows", "accuracy", "macro_f1", "per_class", "confusion", "slices", "calibration",
            "misclassified"} <= set(out)
    assert out["rows"] == 80 and set(out["per_class"]) == {"negative", "positive"}
    assert {"ece", "nll", "brier", "temperature", "ece_after", "nll_after", "fitted_on_rows",
            "measured_on_rows"} <= set(out["calibration"])
    assert {"contains 'not'", "contains 'film'"} <= {s["name"] for s in out["slices"]}
    assert len(out["misclassified"]) == min(100, out["misclassified_rows"])
    assert main(["evaluate", str(data), "--model", str(tiny_model_dir)]) == 0
    text = capsys.readouterr().out
    assert "accuracy" in text and "worst slices" in text and "calibration" in text and "->" in text


def test_cli_out_writes_a_run_folder_with_the_users_text_as_given(tiny_model_dir, tmp_path, capsys):
    rows = _rows(24)
    rows[0] = ('He said "fine", then\nleft — naïve 🎬', "positive", "web")
    rows[1] = ("=HYPERLINK(\"http://x\")", "negative", "shop")
    rows[2] = ("", "negative", "shop")  # skipped, still in predictions.csv
    src = _write(tmp_path / "in.csv", _csv(rows))
    before = src.read_bytes()
    out = tmp_path / "run"
    assert main(["evaluate", str(src), "--model", str(tiny_model_dir), "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    assert src.read_bytes() == before  # the user's file is never changed
    assert {p.name for p in out.iterdir()} == {"metrics.json", "predictions.csv", "reliability.json"}
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["rows"] == 23 and len(metrics["misclassified"]) == metrics["misclassified_rows"]
    reliability = json.loads((out / "reliability.json").read_text(encoding="utf-8"))
    assert len(reliability["before"]) == 15 and len(reliability["after"]) == 15
    got = list(csv.DictReader((out / "predictions.csv").open(encoding="utf-8", newline="")))
    assert len(got) == 24 and got[0]["text"] == rows[0][0] and got[0]["bv_row"] == "2"
    assert got[1]["text"] == "'" + rows[1][0]  # the spreadsheet guard
    assert got[2]["bv_status"] == "skipped: empty text" and got[2]["bv_predicted"] == ""
    for g in got[:2]:
        assert g["bv_predicted"] in ("negative", "positive") and g["bv_calibration_part"] in ("fit", "measure")
        assert float(g["bv_p_negative"]) + float(g["bv_p_positive"]) == pytest.approx(1, abs=1e-5)


@pytest.mark.parametrize("content, says", [
    (b"", "is empty"),
    (b"id,label\n1,positive\n2,negative\n", "holds text"),
    (b"text,label\nthe film,neutral\nit was,positive\n", "'neutral' (row 2)"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tiny_model_dir, tmp_path, capsys, content, says):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    assert main(["evaluate", str(path), "--model", str(tiny_model_dir), "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and says in err and "\n" not in err and "Traceback" not in err


# --------------------------------------------------------------------------- the route
@pytest.fixture()
def client(tiny_model_dir, settings):
    import dataclasses

    from fastapi.testclient import TestClient

    from bertviz_app.server import create_app

    app = create_app(dataclasses.replace(settings, max_evaluate_mb=0.05), str(tiny_model_dir), page=False)
    with TestClient(app) as c:
        yield c


def test_route_evaluates_a_small_csv(client, tiny):
    text = _csv(_rows(30))
    r = client.post("/v1/evaluate", json={"csv": text, "words": ["not"]})
    assert r.status_code == 200, r.text
    out = r.json()
    ref = bv.evaluate_file(tiny, text.encode(), words=["not"], name="upload.csv").to_dict()
    assert out["rows"] == 30 and out["accuracy"] == ref["accuracy"] and out["slices"] == ref["slices"]
    assert out["calibration"]["temperature"] == pytest.approx(ref["calibration"]["temperature"])


@pytest.mark.parametrize("body, status, says", [
    ({"csv": "text,label\nthe film,neutral\nit was,positive\n"}, 400, "'neutral' (row 2)"),
    ({"csv": ""}, 400, "is empty"),
    ({"csv": "id,label\n1,positive\n2,negative\n"}, 400, "holds text"),
    ({"csv": "text,label\na,b\n", "colour": 1}, 422, "colour: unknown parameter"),
    ({"text_column": "text"}, 422, "csv: missing"),
    ({"csv": "text,label\n" + "the film was good,positive\n" * 3000}, 413, "send at most 50,000"),
])
def test_route_refuses_bad_input(client, body, status, says):
    r = client.post("/v1/evaluate", json=body)
    assert r.status_code == status, r.text
    out = r.json()
    assert set(out) == {"error"} and says in out["error"] and "Traceback" not in out["error"]
