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
from bertviz_app.cli import main
from bertviz_app.models.calibration import calibration_metrics, softmax_t

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


def hurting_csv(lm, n: int = 60, hold_out: float = 0.5, seed: int = 0) -> str:
    """A labelled file on which temperature scaling, fitted on evaluate's fitting part, makes the measured
    part worse: the fitting rows are labelled as ``lm`` predicts them (all right: T falls, the model is made
    surer), three in five measured rows the other way (mostly wrong: surer is worse there)."""
    from bertviz_app.models.calibration import split_rows

    rows = _rows(n)
    predicted = [p.label for p in bv.predict(lm, [r[0] for r in rows], calibrated=False)]
    fit, _ = split_rows(n, hold_out, seed)
    fit = set(fit.tolist())
    other = {lab: next(x for x in lm.labels if x != lab) for lab in lm.labels}
    return _csv([(text, predicted[i] if i in fit or i % 5 > 2 else other[predicted[i]], src)
                 for i, (text, _, src) in enumerate(rows)])


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


def test_a_row_without_its_second_text_is_skipped_and_named(tiny, tmp_path):
    rows = [(t, lab, f"a second text {i}") for i, (t, lab, _) in enumerate(_rows(24))]
    rows[3] = (rows[3][0], rows[3][1], "  ")  # spreadsheet row 5: no second text
    ev = bv.evaluate_file(tiny, _write(tmp_path / "p.csv", _csv(rows, header=("text", "label", "hypothesis"))),
                          "text", "label", "hypothesis")
    assert ev.rows == 23 and ev.skipped == ((5, "empty second text"),) and 5 not in ev.source_rows
    assert any("empty second text" in n and "row 5" in n and "not evaluated" in n for n in ev.notices)
    assert ev.pairs[0] == "a second text 0"


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


def test_cli_save_temperature_writes_calibration_json_that_predict_applies(tiny_model_dir, data, tmp_path, capsys):
    from conftest import make_overconfident_copy

    # an over-confident model (the tiny one's logits x1000: near-certain, right half the time): T helps
    folder = make_overconfident_copy(tiny_model_dir, tmp_path / "mine")  # the fixture's model stays as it is
    assert main(["evaluate", str(data), "--model", str(folder), "--save-temperature", "--json"]) == 0
    captured = capsys.readouterr()
    c = json.loads(captured.out)["calibration"]
    t = c["temperature"]
    assert c["helps"] is True and c["nll_after"] < 0.5 * c["nll"] and c["ece_after"] < 0.5 * c["ece"]
    assert t > 2 and bv.load_temperature(folder) == pytest.approx(t, rel=1e-9)
    assert "saved temperature" in captured.err and "calibration.json" in captured.err
    assert bv.load_model(str(folder), device="cpu").temperature == pytest.approx(t)
    # nothing to save (one class: no temperature fitted): refused with the reason, the saved one kept
    one = _write(tmp_path / "one.csv", _csv([r for r in _rows(30) if r[1] == "positive"]))
    assert main(["evaluate", str(one), "--model", str(folder), "--save-temperature"]) == 2
    assert "fitted no temperature" in capsys.readouterr().err
    assert bv.load_temperature(folder) == pytest.approx(t, rel=1e-9)


def test_a_temperature_that_makes_the_measured_rows_worse_is_judged_so_and_not_saved(tiny, tiny_model_dir, tmp_path,
                                                                                      capsys):
    import shutil

    path = _write(tmp_path / "hurts.csv", hurting_csv(tiny))
    c = bv.evaluate_file(tiny, path).calibration
    assert c["temperature"] < 0.5  # fitted where the model is always right: made surer
    assert c["helps"] is False and c["nll_after"] > c["nll"] and c["ece_after"] > c["ece"]
    assert c["judgement"].startswith(f"T = {c['temperature']:.3f} does not help on the 30 rows it was not fitted on")
    assert f"NLL {c['nll']:.4f} -> {c['nll_after']:.4f} (higher)" in c["judgement"]
    folder = shutil.copytree(tiny_model_dir, tmp_path / "mine")  # the fixture's model stays as it is
    with pytest.raises(bv.InputError, match="This temperature is not saved: T = .* does not help"):
        bv.save_evaluated_temperature(folder, c, "x")
    assert not (folder / "calibration.json").exists()
    # the CLI: the results still printed, then --save-temperature refused with the reason (status 2)
    assert main(["evaluate", str(path), "--model", str(folder), "--save-temperature", "--json"]) == 2
    captured = capsys.readouterr()
    out = json.loads(captured.out)["calibration"]
    assert out["helps"] is False and out["judgement"] == c["judgement"]
    assert captured.err.strip().splitlines()[-1] == f"error: --save-temperature: This temperature is not saved: " \
                                                     f"{c['judgement']}"
    assert "Traceback" not in captured.err and not (folder / "calibration.json").exists()
    assert main(["evaluate", str(path), "--model", str(folder)]) == 0
    assert f"not worth keeping: {c['judgement']} (--save-temperature refuses it)" in capsys.readouterr().out


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

    from bertviz_app.serve.server import create_app

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


# --------------------------------------------------------------------------- layers and a second model
@pytest.fixture(scope="module")
def other(tmp_path_factory):
    """A tiny model with the same classes and other weights (seed 1)."""
    from bertviz_app.config import Settings

    from conftest import make_tiny_model

    path = make_tiny_model(tmp_path_factory.mktemp("other") / "other-bert", seed=1)
    return bv.load_model(str(path), device="cpu", settings=Settings(memo_size=0))


def test_layers_evaluate_the_same_forwards_logits_and_probe_every_depth(tiny, data):
    plain = bv.evaluate_file(tiny, data, words=["not"])
    ev = bv.evaluate_file(tiny, data, words=["not"], layers=True)
    np.testing.assert_allclose(ev.logits, plain.logits, atol=1e-4)
    np.testing.assert_array_equal(ev.predicted, plain.predicted)
    np.testing.assert_array_equal(ev.n_tokens, plain.n_tokens)
    assert ev.accuracy == pytest.approx(plain.accuracy)
    assert [s.to_dict() for s in ev.slices] == [s.to_dict() for s in plain.slices]
    assert ev.geometry is not None and len(ev.geometry) == 80
    assert [p["layer"] for p in ev.probes] == list(range(tiny.num_layers + 1))
    for p in ev.probes:
        assert 0 <= p["cls_probe_accuracy"] <= 1 and 0 <= p["mean_probe_accuracy"] <= 1
    out = ev.to_dict()
    assert out["layers"] == ev.probes and "layers" not in plain.to_dict() and "comparison" not in out
    # the probes are geometry's, on the evaluated rows' true classes
    from bertviz_app.evaluate.geometry import probe_layers

    assert probe_layers(ev.geometry, ev.true) == ev.probes
    assert not any("stratified random sample" in n for n in ev.notices)


def test_probes_past_the_cap_are_fitted_on_a_sample_and_the_notices_say_so(tiny, data, monkeypatch):
    import functools

    from bertviz_app.evaluate import evaluation, geometry

    monkeypatch.setattr(evaluation, "probe_layers", functools.partial(geometry.probe_layers, max_rows=40))
    ev = bv.evaluate_file(tiny, data, layers=True)
    assert {p["rows"] for p in ev.probes} == {40} and ev.rows == 80
    assert any("sample of 40 of the 80 rows" in n for n in ev.notices)


def test_layers_keep_vectors_in_a_folder_and_cancel_like_predict(tiny, data, tmp_path):
    ev = bv.evaluate_file(tiny, data, layers=True, vectors_folder=tmp_path)
    assert {"cls.npy", "mean.npy", "vectors.json"} <= {p.name for p in tmp_path.iterdir()}
    assert isinstance(ev.geometry.cls, np.memmap)
    seen, stop = [], threading.Event()

    def cancel_after_two(done, total):
        seen.append((done, total))
        if done >= 32:
            stop.set()

    with pytest.raises(bv.CancelledError, match="Evaluation cancelled after 32 of 80 rows"):
        bv.evaluate_file(tiny, data, batch_size=16, layers=True, progress=cancel_after_two, cancel=stop)
    assert seen == [(16, 80), (32, 80)]


def test_a_probe_that_cannot_be_fitted_is_a_notice_not_an_error(tiny, tmp_path):
    path = _write(tmp_path / "one.csv", _csv([(t, "positive", s) for t, _, s in _rows(12)]))
    ev = bv.evaluate_file(tiny, path, layers=True)
    assert ev.probes is None and ev.to_dict()["layers"] is None and ev.rows == 12
    assert any("No [CLS] probe per layer: every evaluated row has one true class" in n for n in ev.notices)
    rows = _rows(12)
    rows = [(t, "negative", s) for t, _, s in rows[:-1]] + [(rows[-1][0], "positive", "web")]
    ev = bv.evaluate_file(tiny, _write(tmp_path / "rare.csv", _csv(rows)), layers=True)
    assert ev.probes is None and any("'positive' has a single row" in n for n in ev.notices)


def test_mcnemar_matches_the_exact_binomial_test():
    from bertviz_app.evaluate.model_comparison import mcnemar_p, mcnemar_reading

    assert mcnemar_p(10, 2) == pytest.approx(0.03857, abs=1e-4)
    assert mcnemar_p(2, 10) == pytest.approx(2 * 79 / 4096, abs=1e-12)  # P(X <= 2), X ~ Bin(12, 1/2), twice
    assert mcnemar_p(7, 7) == 1.0 and mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(0, 5) == pytest.approx(2 / 32, abs=1e-12)
    assert mcnemar_p(700, 300) == pytest.approx(1.7665678e-37, rel=1e-6)  # scipy.stats.binomtest(300, 1000)
    assert mcnemar_reading("A", "B", 3, 14, mcnemar_p(3, 14)) == (
        "B is right on 14 rows A gets wrong, A on 3 rows B gets wrong: p = 0.0127, unlikely to be chance.")
    assert "no evidence either is better" in mcnemar_reading("A", "B", 5, 6, mcnemar_p(5, 6))


def test_a_model_compared_with_itself_agrees_everywhere(tiny, data):
    ev = bv.evaluate_file(tiny, data, compare_with=tiny)
    c = ev.comparison
    assert c.disagreements == 0 and c.disagreeing_rows == () and c.mcnemar_p == 1.0
    assert c.only_a_correct == c.only_b_correct == 0
    assert c.both_correct == int((ev.predicted == ev.true).sum()) and c.both_correct + c.both_wrong == 80
    assert all(s["difference"] == 0 for s in c.slices)
    assert "no evidence either is better" in c.reading


def test_two_models_are_compared_on_the_same_rows(tiny, other, data):
    ev = bv.evaluate_file(tiny, data, words=["not"], compare_with=other)
    b = bv.evaluate_file(other, data, words=["not"])
    c = ev.comparison
    np.testing.assert_allclose(ev.other.logits, b.logits, atol=1e-5)
    ok_a, ok_b = ev.predicted == ev.true, b.predicted == b.true
    assert (c.both_correct, c.only_a_correct, c.only_b_correct, c.both_wrong) == (
        int((ok_a & ok_b).sum()), int((ok_a & ~ok_b).sum()), int((ok_b & ~ok_a).sum()), int((~ok_a & ~ok_b).sum()))
    assert c.both_correct + c.only_a_correct + c.only_b_correct + c.both_wrong == 80
    assert c.accuracy == pytest.approx((ev.accuracy, b.accuracy))
    assert c.disagreements == int((ev.predicted != b.predicted).sum()) == len(c.disagreeing_rows) > 0
    conf = [max(r["confidence_a"], r["confidence_b"]) for r in c.disagreeing_rows]
    assert conf == sorted(conf, reverse=True)
    for r in c.disagreeing_rows:
        assert r["predicted_a"] != r["predicted_b"] and r["text"] == ev.texts[ev.source_rows.index(r["row"])]
    from bertviz_app.evaluate.model_comparison import mcnemar_p

    assert c.mcnemar_p == pytest.approx(mcnemar_p(c.only_a_correct, c.only_b_correct))
    # B's accuracy on each of A's slices: the same rows, A's length buckets
    by_name = {s["name"]: s for s in c.slices}
    for s, mask in zip(ev.slices, ev.slice_masks):
        if s.size:
            assert int(mask.sum()) == s.size
            assert by_name[s.name]["accuracy_b"] == pytest.approx(float(ok_b[mask].mean()))
            assert by_name[s.name]["difference"] == pytest.approx(by_name[s.name]["accuracy_b"] - s.accuracy)
    diffs = [abs(s["difference"]) for s in c.slices]
    assert diffs == sorted(diffs, reverse=True)
    out = ev.to_dict()["comparison"]
    assert {"models", "disagreements", "mcnemar_p", "both_correct", "only_a_correct", "only_b_correct",
            "both_wrong", "accuracy", "macro_f1", "slices", "disagreeing_rows", "reading"} <= set(out)
    assert out["models"] == {"a": tiny.name, "b": other.name}


def test_classes_are_matched_by_name_and_other_classes_are_refused(tiny, data, tmp_path):
    import dataclasses

    from conftest import make_tiny_model

    swapped = dataclasses.replace(tiny, name="swapped")
    swapped.model = _swapped_head(tiny.model)  # the same network with its classes in the other order
    ev = bv.evaluate_file(tiny, data, compare_with=swapped)
    assert ev.other.labels == ("positive", "negative") and ev.comparison.disagreements == 0
    assert ev.comparison.accuracy[0] == pytest.approx(ev.comparison.accuracy[1])
    three = bv.load_model(str(make_tiny_model(tmp_path / "three", num_labels=3)), device="cpu")
    with pytest.raises(bv.DataError, match="do not have the same classes") as err:
        bv.evaluate_file(tiny, data, compare_with=three)
    assert "negative, positive" in str(err.value) and "class_0, class_1, class_2" in str(err.value)


def test_two_classes_of_one_name_cannot_be_matched_by_name():
    from bertviz_app.evaluate.model_comparison import check_same_classes

    check_same_classes("A", ["x", "y"], "B", ["y", "x"])  # the same names in another order
    with pytest.raises(bv.DataError, match="B has more than one class named x"):
        check_same_classes("A", ["x", "y"], "B", ["x", "x"])
    with pytest.raises(bv.DataError, match="do not have the same classes .A: x, y; B: x, z."):
        check_same_classes("A", ["x", "y"], "B", ["x", "z"])


def _swapped_head(model):
    import copy

    import torch

    m = copy.deepcopy(model)
    with torch.no_grad():
        m.classifier.weight.copy_(model.classifier.weight.flip(0))
        m.classifier.bias.copy_(model.classifier.bias.flip(0))
    m.config.id2label = {0: "positive", 1: "negative"}
    m.config.label2id = {"positive": 0, "negative": 1}
    return m


def test_the_run_folder_holds_layers_and_comparison_and_reads_back(tiny, other, tmp_path):
    rows = _rows(30)
    rows[3] = ("", "negative", "shop")  # skipped: kept in predictions.csv
    src = _write(tmp_path / "in.csv", _csv(rows))
    ev = bv.evaluate_file(tiny, src, layers=True, compare_with=other)
    out = bv.write_evaluation(ev, tmp_path / "run")
    names = {p.name for p in out.iterdir()}
    assert {"metrics.json", "predictions.csv", "reliability.json", "layers.json", "comparison.json",
            "projections.json", "cls_layer00.npy", "mean_layer02.npy"} <= names
    back = bv.read_evaluation(out)
    assert back["metrics"]["accuracy"] == ev.accuracy and back["metrics"]["layers"] == ev.probes
    assert back["layers"] == {"layers": ev.probes, "model": tiny.name, "rows": 29, "kinds": ["cls", "mean"]}
    assert back["comparison"]["disagreements"] == ev.comparison.disagreements
    assert len(back["comparison"]["disagreeing_rows"]) == ev.comparison.disagreements
    assert set(back["projections"]) == {(layer, k) for layer in range(3) for k in ("cls", "mean")}
    assert back["projections"][(2, "cls")].coords.shape == (29, 3)
    got = list(csv.DictReader((out / "predictions.csv").open(encoding="utf-8", newline="")))
    assert len(got) == 30 and got[3]["bv_status"] == "skipped: empty text" and got[3]["bv_other_predicted"] == ""
    for g, i in zip([got[0], got[1]], [0, 1]):
        assert g["bv_other_predicted"] == other.labels[ev.other.predicted[i]]
        assert float(g["bv_other_p_negative"]) == pytest.approx(ev.other.probs[i][0], abs=1e-6)
        assert g["bv_other_correct"] == str(bool(ev.other.predicted[i] == ev.other.true[i])).lower()
    plain = bv.read_evaluation(bv.write_evaluation(bv.evaluate_file(tiny, src), tmp_path / "plain"))
    assert plain["layers"] is None and plain["comparison"] is None and plain["projections"] is None


def test_a_folder_that_is_not_an_evaluation_is_refused(tmp_path):
    with pytest.raises(bv.InputError, match="not an evaluation's run folder"):
        bv.read_evaluation(tmp_path)
    (tmp_path / "metrics.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(bv.InputError, match="not what an evaluation writes"):
        bv.read_evaluation(tmp_path)


def test_base_of_reads_a_runs_record(tiny, tmp_path):
    import dataclasses

    from bertviz_app.evaluate.model_comparison import base_of

    assert base_of(tiny) is None  # not a run
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"name": "runs/r1", "base": "encoder"}), encoding="utf-8")
    assert base_of(dataclasses.replace(tiny, path=run)) == "encoder"
    (run / "run.json").write_text("not json", encoding="utf-8")
    assert base_of(dataclasses.replace(tiny, path=run)) is None


def test_route_probes_layers_and_compares_with_a_registered_model(client, tiny, settings):
    from conftest import make_tiny_model

    make_tiny_model(settings.models_dir / "other", seed=1)
    text = _csv(_rows(30))
    r = client.post("/v1/evaluate", json={"csv": text, "layers": True, "compare_with": "other"})
    assert r.status_code == 200, r.text
    out = r.json()
    other = bv.load_model("other", settings=settings)
    ref = bv.evaluate_file(tiny, text.encode(), name="upload.csv", layers=True, compare_with=other).to_dict()
    assert [p["layer"] for p in out["layers"]] == [0, 1, 2]
    for got, want in zip(out["layers"], ref["layers"]):
        assert got["cls_probe_accuracy"] == pytest.approx(want["cls_probe_accuracy"])
    c = out["comparison"]
    assert c["models"] == {"a": tiny.name, "b": "other"}
    for key in ("both_correct", "only_a_correct", "only_b_correct", "both_wrong", "disagreements"):
        assert c[key] == ref["comparison"][key]
    assert c["mcnemar_p"] == pytest.approx(ref["comparison"]["mcnemar_p"]) and c["reading"]
    plain = client.post("/v1/evaluate", json={"csv": text}).json()
    assert "layers" not in plain and "comparison" not in plain  # absent unless asked, not null
    # an unknown second model is refused as an unknown model is
    missing = client.post("/v1/evaluate", json={"csv": text, "model": "no-such-model"})
    r = client.post("/v1/evaluate", json={"csv": text, "compare_with": "no-such-model"})
    assert r.status_code == 404 == missing.status_code and r.json() == missing.json()
    make_tiny_model(settings.models_dir / "three", num_labels=3)
    r = client.post("/v1/evaluate", json={"csv": text, "compare_with": "three"})
    assert r.status_code == 400 and "do not have the same classes" in r.json()["error"]


def test_route_compare_with_follows_public_mode(tiny_model_dir, settings, tmp_path):
    import dataclasses
    import shutil

    from fastapi.testclient import TestClient

    from bertviz_app.models import visitors
    from bertviz_app.serve.server import create_app

    secret = settings.models_dir / "runs" / "secret"
    shutil.copytree(tiny_model_dir, secret)
    (secret / "run.json").write_text(json.dumps({"name": "runs/secret", "base": "encoder",
                                                 "owner": visitors.owner_hash(visitors.new_token())}))
    app = create_app(dataclasses.replace(settings, public=True, allow_local_paths=True), str(tiny_model_dir),
                     page=False)
    text = _csv(_rows(24))
    headers = {visitors.HEADER: visitors.new_token()}
    with TestClient(app) as c:
        r = c.post("/v1/evaluate", json={"csv": text, "compare_with": str(tmp_path)}, headers=headers)
        assert r.status_code == 404 and "turned off" in r.json()["error"]
        other = c.post("/v1/evaluate", json={"csv": text, "compare_with": "runs/secret"}, headers=headers)
        missing = c.post("/v1/evaluate", json={"csv": text, "compare_with": "runs/no-such"}, headers=headers)
        assert other.status_code == 404 == missing.status_code
        assert other.json()["error"].replace("secret", "X") == missing.json()["error"].replace("no-such", "X")
        r = c.post("/v1/evaluate", json={"csv": text, "compare_with": str(tiny_model_dir)}, headers=headers)
        assert r.status_code == 200 and r.json()["comparison"]["disagreements"] == 0  # the operator's default
