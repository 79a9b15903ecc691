"""Calibration (issue 21): ECE/NLL/Brier against hand-computed values, temperature scaling recovering a
known temperature, calibration.json read safely and applied by predict (raw probabilities on request),
and fine-tuning fitting and saving it by itself; a temperature is fitted on one part of the held-out rows
and kept only when it helps on the other (issue 35)."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest

import bertviz_app as bv
from bertviz_app import InputError
from bertviz_app.models.calibration import CALIBRATION_FILE, MIN_SPLIT_ROWS, T_MAX, T_MIN, split_rows

# ----------------------------------------------------------------------------- metrics


def test_metrics_match_hand_computed_values():
    probs = np.array([[0.9, 0.1], [0.4, 0.6], [0.7, 0.3], [0.2, 0.8]])
    labels = np.array([0, 0, 1, 1])
    m = bv.calibration_metrics(probs, labels)
    # top confidences 0.9 (right), 0.6 (wrong), 0.7 (wrong), 0.8 (right): each alone in its 15-bin
    # bin, so ECE = mean |correct - confidence| = (0.1 + 0.6 + 0.7 + 0.2) / 4
    assert m["ece"] == pytest.approx((0.1 + 0.6 + 0.7 + 0.2) / 4)
    assert m["nll"] == pytest.approx(-(np.log(0.9) + np.log(0.4) + np.log(0.3) + np.log(0.8)) / 4)
    # multi-class Brier: sum over classes of (p - onehot)^2, mean over rows
    assert m["brier"] == pytest.approx((0.02 + 0.72 + 0.98 + 0.08) / 4)
    assert all(isinstance(v, float) for v in m.values())


def test_ece_pools_rows_sharing_a_bin_and_nll_is_clipped():
    # 0.75 and 0.78 share the bin (0.733, 0.8]: accuracy 1/2, confidence 0.765 -> |0.5 - 0.765| * 2/3
    probs = np.array([[0.75, 0.25, 0.0], [0.78, 0.22, 0.0], [0.0, 0.0, 1.0]])
    labels = np.array([0, 1, 0])
    m = bv.calibration_metrics(probs, labels)
    assert m["ece"] == pytest.approx(2 / 3 * abs(0.5 - 0.765) + 1 / 3 * 1.0)
    assert m["nll"] == pytest.approx((-np.log(0.75) - np.log(0.22) - np.log(1e-12)) / 3)
    assert m["brier"] == pytest.approx(((0.25**2 + 0.25**2) + (0.78**2 + 0.78**2) + (1 + 1)) / 3)


def test_the_ece_agrees_with_the_fine_tunes_own():
    from bertviz_app.train.classifier_metrics import calibration_metrics as training_metrics

    rng = np.random.default_rng(3)
    z = rng.normal(size=(300, 4)) * 2
    y = rng.integers(0, 4, 300)
    ours = bv.calibration_metrics(bv.softmax_t(z, 1.0), y)
    theirs = training_metrics(z, y)
    assert ours["ece"] == pytest.approx(theirs["ece"], abs=1e-12)
    assert ours["nll"] == pytest.approx(theirs["val_nll"], abs=1e-12)


def test_reliability_bins():
    probs = np.array([[0.9, 0.1], [0.4, 0.6], [0.95, 0.05], [1.0, 0.0]])
    labels = np.array([0, 0, 1, 0])
    bins = bv.reliability_bins(probs, labels, n_bins=5)
    assert [b["count"] for b in bins] == [0, 0, 1, 0, 3]
    assert bins[0]["low"] == 0.0 and bins[-1]["high"] == 1.0 and bins[1]["high"] == pytest.approx(0.4)
    assert bins[0]["confidence"] is None and bins[0]["accuracy"] is None
    assert bins[2]["confidence"] == pytest.approx(0.6) and bins[2]["accuracy"] == 0.0
    assert bins[4]["confidence"] == pytest.approx((0.9 + 0.95 + 1.0) / 3)
    assert bins[4]["accuracy"] == pytest.approx(2 / 3)
    assert sum(b["count"] for b in bv.reliability_bins(probs, labels)) == 4  # 15 bins by default
    assert len(bv.reliability_bins(probs, labels)) == 15


@pytest.mark.parametrize("probs, labels, says", [
    (np.zeros((0, 2)), np.zeros(0, int), "non-empty"),
    (np.array([0.5, 0.5]), np.array([0]), "(rows, classes)"),
    (np.array([[0.5, 0.5]]), np.array([0, 1]), "one integer per row"),
    (np.array([[0.5, 0.5]]), np.array([2]), "0..1"),
    (np.array([[0.5, 0.5]]), np.array([0.5]), "integer"),
    (np.array([[np.nan, 0.5]]), np.array([0]), "NaN"),
])
def test_bad_arrays_get_a_clear_message(probs, labels, says):
    with pytest.raises(InputError, match=None) as e:
        bv.calibration_metrics(probs, labels)
    assert says in str(e.value)


# ----------------------------------------------------------------------------- temperature


def _calibrated_sample(n=6000, c=3, seed=0):
    """Logits of a perfectly calibrated model and labels drawn from its own probabilities."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, c)) * 2.0
    p = bv.softmax_t(z, 1.0)
    u = rng.random(n)[:, None]
    y = (u > np.cumsum(p, axis=1)).sum(axis=1)
    return z, np.minimum(y, c - 1)


def test_fit_temperature_recovers_a_known_temperature_and_lowers_nll():
    z, y = _calibrated_sample()
    t = bv.fit_temperature(3.0 * z, y)  # overconfident by 3x
    assert t == pytest.approx(3.0, rel=0.05)
    before = bv.calibration_metrics(bv.softmax_t(3.0 * z, 1.0), y)
    after = bv.calibration_metrics(bv.softmax_t(3.0 * z, t), y)
    assert after["nll"] < before["nll"] and after["ece"] < before["ece"]
    assert bv.fit_temperature(3.0 * z, y) == t  # deterministic
    assert bv.fit_temperature(z / 2.0, y) == pytest.approx(0.5, rel=0.05)  # underconfident


def test_fit_temperature_stays_in_range_and_keeps_the_argmax():
    z = np.array([[5.0, -5.0], [4.0, -3.0], [-2.0, 6.0]])
    y = np.array([0, 0, 1])  # all right: the NLL keeps falling as T shrinks, to the lower bound
    t = bv.fit_temperature(z, y)
    assert T_MIN <= t <= T_MAX and t == pytest.approx(T_MIN, rel=1e-3)
    assert (bv.softmax_t(z, t).argmax(1) == z.argmax(1)).all()
    y_wrong = np.array([1, 1, 0])  # all wrong: the NLL falls as T grows, to the upper bound
    assert bv.fit_temperature(z, y_wrong) == pytest.approx(T_MAX, rel=1e-3)


def test_softmax_t_and_calibration_report():
    z = np.array([[2.0, 0.0], [0.0, 1.0]])
    assert bv.softmax_t(z, 2.0)[0, 0] == pytest.approx(np.exp(1) / (np.exp(1) + 1))
    with pytest.raises(InputError, match="positive"):
        bv.softmax_t(z, 0.0)
    zz, y = _calibrated_sample(n=2000, seed=1)
    r = bv.calibration_report(2 * zz, y)
    assert set(r) == {"temperature", "rows", "seed", "fitted_on_rows", "judged_on_rows", "ece_before", "ece_after",
                      "nll_before", "nll_after", "brier_before", "brier_after", "helps", "judgement"}
    assert r["rows"] == 2000 and r["nll_after"] <= r["nll_before"]


# ----------------------------------------------------------------------------- judged on other rows


def _hurting_sample(n=400, seed=0):
    """Logits whose fitting part the model gets all right (so T shrinks to its lower bound: surer) and
    whose judging part it gets 30% wrong: a sharper softmax there is worse on every measure."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 2))
    y = z.argmax(1)
    _, judge = split_rows(n)
    flip = judge[rng.random(len(judge)) < 0.3]
    y[flip] = 1 - y[flip]
    return z, y


def test_the_temperature_is_fitted_on_one_part_and_judged_on_the_other():
    z, y = _calibrated_sample(n=2000, seed=2)
    r = bv.calibration_report(3.0 * z, y)  # over-confident by 3x: T helps on rows it never saw
    fit, judge = split_rows(2000)
    assert len(fit) == r["fitted_on_rows"] == 1000 and len(judge) == r["judged_on_rows"] == 1000
    assert not set(fit) & set(judge) and len(set(fit) | set(judge)) == 2000
    assert r["temperature"] == pytest.approx(bv.fit_temperature(3.0 * z[fit], y[fit]), rel=1e-12)
    assert r["temperature"] == pytest.approx(3.0, rel=0.1)
    before = bv.calibration_metrics(bv.softmax_t(3.0 * z[judge], 1.0), y[judge])
    after = bv.calibration_metrics(bv.softmax_t(3.0 * z[judge], r["temperature"]), y[judge])
    assert (r["ece_before"], r["nll_before"], r["brier_before"]) == pytest.approx(
        (before["ece"], before["nll"], before["brier"]), rel=1e-9)
    assert (r["ece_after"], r["nll_after"], r["brier_after"]) == pytest.approx(
        (after["ece"], after["nll"], after["brier"]), rel=1e-9)
    assert r["helps"] is True and r["nll_after"] < 0.8 * r["nll_before"] and r["ece_after"] < r["ece_before"]
    assert r["judgement"].startswith(f"T = {r['temperature']:.3f} helps on the 1,000 rows it was not fitted on")
    assert f"NLL {r['nll_before']:.4f} -> {r['nll_after']:.4f} (lower)" in r["judgement"]
    assert bv.calibration_report(3.0 * z, y) == r  # the split is seeded: the same report again


def test_a_temperature_that_hurts_where_it_is_judged_does_not_help_and_is_not_saved(tmp_path):
    z, y = _hurting_sample()
    r = bv.calibration_report(z, y)
    assert r["temperature"] == pytest.approx(T_MIN, rel=1e-3)  # the fitting part asked for a surer model
    assert r["helps"] is False and r["nll_after"] > r["nll_before"] and r["ece_after"] > r["ece_before"]
    assert "does not help on the 200 rows it was not fitted on" in r["judgement"]
    assert "(higher)" in r["judgement"] and "lower the NLL without raising the ECE" in r["judgement"]
    with pytest.raises(InputError, match="Not saved: T = 0.050 does not help"):
        bv.save_calibration(tmp_path, r, "validation split")
    assert list(tmp_path.iterdir()) == []  # nothing written
    # positive control: the over-confident model's report is saved, with what it was judged on
    zz, yy = _calibrated_sample(n=400, seed=3)
    good = bv.calibration_report(3.0 * zz, yy)
    assert good["helps"] is True
    data = json.loads(bv.save_calibration(tmp_path, good, "validation split").read_text())
    assert data["temperature"] == pytest.approx(good["temperature"]) and data["judged_on_rows"] == 200
    assert data["fitted_on"] == {"rows": 200, "source": "validation split"} and "helps" in data["judgement"]


def test_too_few_rows_fit_no_temperature_and_say_so(tmp_path):
    z, y = _calibrated_sample(n=400, seed=4)
    small = bv.calibration_report(3.0 * z[:MIN_SPLIT_ROWS - 1], y[:MIN_SPLIT_ROWS - 1])
    assert small["temperature"] is None and small["helps"] is False and small["nll_after"] is None
    assert small["fitted_on_rows"] == small["judged_on_rows"] == 0
    assert small["judgement"] == (f"No temperature fitted: {MIN_SPLIT_ROWS - 1} rows are too few to fit a temperature "
                                  f"on one part and judge it on the other (at least {MIN_SPLIT_ROWS}).")
    before = bv.calibration_metrics(bv.softmax_t(3.0 * z[:MIN_SPLIT_ROWS - 1], 1.0), y[:MIN_SPLIT_ROWS - 1])
    assert small["nll_before"] == pytest.approx(before["nll"], rel=1e-9)  # measured on every row
    with pytest.raises(InputError, match="too few"):
        bv.save_calibration(tmp_path, small, "x")
    # positive control: at the threshold a temperature is fitted on 10 rows and judged on the other 10
    enough = bv.calibration_report(3.0 * z[:MIN_SPLIT_ROWS], y[:MIN_SPLIT_ROWS])
    assert enough["temperature"] is not None and enough["fitted_on_rows"] == enough["judged_on_rows"] == 10


@pytest.mark.parametrize(("after", "helps"), [
    ({"nll": 0.5, "ece": 0.10}, True),    # NLL lower, ECE the same: helps
    ({"nll": 0.5, "ece": 0.05}, True),    # both lower
    ({"nll": 0.5, "ece": 0.11}, False),   # NLL lower but ECE higher
    ({"nll": 0.6, "ece": 0.05}, False),   # NLL the same
    ({"nll": 0.7, "ece": 0.05}, False),   # NLL higher
])
def test_the_rule_nll_lower_and_ece_not_higher(after, helps):
    ok, why = bv.judge_temperature(1.5, {"nll": 0.6, "ece": 0.10}, after, 30)
    assert ok is helps and ("T = 1.500 helps" in why) is helps and ("does not help" in why) is not helps


# ----------------------------------------------------------------------------- calibration.json


def test_save_and_load_round_trip_atomically(tmp_path):
    report = {"temperature": 2.5, "rows": 40, "ece_before": 0.2, "ece_after": 0.05, "nll_before": 0.9,
              "nll_after": 0.6}
    path = bv.save_calibration(tmp_path, report, "held-out rows")
    assert path == tmp_path / CALIBRATION_FILE and [p.name for p in tmp_path.iterdir()] == [CALIBRATION_FILE]
    data = json.loads(path.read_text())
    assert data["temperature"] == 2.5 and data["fitted_on"] == {"rows": 40, "source": "held-out rows"}
    assert data["ece_after"] == 0.05 and "created" in data
    assert bv.load_temperature(tmp_path) == 2.5
    with pytest.raises(InputError, match="temperature"):
        bv.save_calibration(tmp_path, {**report, "temperature": 100.0}, "x")
    assert bv.load_temperature(tmp_path) == 2.5  # the old file stands
    with pytest.raises(InputError, match=r"Not saved: .*NLL 0.9000 -> 0.9500 \(higher\)"):  # worse where judged
        bv.save_calibration(tmp_path, {**report, "temperature": 3.0, "nll_after": 0.95}, "x")
    assert bv.load_temperature(tmp_path) == 2.5
    with pytest.raises(InputError, match="not a folder"):
        bv.save_calibration(tmp_path / "missing", report, "x")


@pytest.mark.parametrize("content", [
    "{not json", "", "[2.0]", '{"temperature": "2"}', '{"temperature": -1}', '{"temperature": 0}',
    '{"temperature": 1000}', '{"temperature": NaN}', '{"temperature": true}', '{"t": 2}', b"\xff\xfe\x00",
])
def test_a_broken_calibration_file_is_ignored_with_a_warning(tmp_path, caplog, content):
    p = tmp_path / CALIBRATION_FILE
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    with caplog.at_level(logging.WARNING, logger="bertviz_app.models.calibration"):
        assert bv.load_temperature(tmp_path) is None
    assert CALIBRATION_FILE in caplog.text
    assert bv.load_temperature(tmp_path / "nowhere") is None and bv.load_temperature(None) is None


# ----------------------------------------------------------------------------- predict


def _calibrated_copy(tiny_model_dir, tmp_path, temperature=2.5, text=None):
    folder = tmp_path / "calibrated"
    shutil.copytree(tiny_model_dir, folder)
    (folder / CALIBRATION_FILE).write_text(
        text if text is not None else json.dumps({"temperature": temperature}), encoding="utf-8")
    return folder


TEXTS = ["the film was good", "a bad , awful slog", "it is fun"]


def test_predict_applies_the_saved_temperature(tiny_model_dir, tmp_path, settings):
    folder = _calibrated_copy(tiny_model_dir, tmp_path, 0.25)  # sharpens the tiny model's near-even scores
    before = sorted(p.name for p in folder.iterdir())
    lm = bv.load_model(str(folder), device="cpu", settings=settings)
    assert lm.temperature == 0.25
    raw = np.array([p.probs for p in bv.predict(lm, TEXTS, calibrated=False)])
    cal = bv.predict(lm, TEXTS)
    probs = np.array([p.probs for p in cal])
    # log p_raw = logits - const, so softmax(log p_raw / T) = softmax(logits / T)
    assert probs == pytest.approx(bv.softmax_t(np.log(raw), 0.25), abs=1e-5)
    assert (probs.argmax(1) == raw.argmax(1)).all() and not np.allclose(probs, raw)
    assert [p.label for p in cal] == [lm.labels[i] for i in raw.argmax(1)]
    assert cal[0].to_dict()["temperature"] == 0.25
    assert "temperature" not in bv.predict(lm, TEXTS[:1], calibrated=False)[0].to_dict()
    # the window path and the batched single-text path apply it too
    win = bv.predict(lm, TEXTS, window=True, stride=16)
    assert np.array([p.probs for p in win]) == pytest.approx(probs, abs=1e-5)
    assert bv.predict_one(lm, TEXTS[0]).probs == pytest.approx(tuple(probs[0]), abs=1e-5)
    assert bv.predict_one(lm, TEXTS[0], calibrated=False).probs == pytest.approx(tuple(raw[0]), abs=1e-5)
    # attributions explain the model's own probabilities: the same with or without calibration.json
    plain = bv.load_model(str(tiny_model_dir), device="cpu", settings=settings)
    a = bv.attribute(lm, TEXTS[0], n_steps=8)
    b = bv.attribute(plain, TEXTS[0], n_steps=8)
    assert a.scores == pytest.approx(b.scores, abs=1e-5)
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written into the model folder


def test_a_model_without_calibration_is_unchanged(tiny):
    assert tiny.temperature == 1.0
    a, b = bv.predict(tiny, TEXTS), bv.predict(tiny, TEXTS, calibrated=False)
    assert [p.probs for p in a] == [p.probs for p in b] and "temperature" not in a[0].to_dict()


def test_a_broken_calibration_json_does_not_stop_the_model_loading(tiny_model_dir, tmp_path, settings):
    folder = _calibrated_copy(tiny_model_dir, tmp_path, text='{"temperature": ')
    lm = bv.load_model(str(folder), device="cpu", settings=settings)
    assert lm.temperature == 1.0
    plain = bv.load_model(str(tiny_model_dir), device="cpu", settings=settings)
    assert np.array([p.probs for p in bv.predict(lm, TEXTS)]) == pytest.approx(
        np.array([p.probs for p in bv.predict(plain, TEXTS)]))


def test_multi_label_models_ignore_the_temperature(tmp_path, settings):
    from conftest import make_tiny_model

    folder = make_tiny_model(tmp_path / "multi", num_labels=3, multi_label=True)
    (folder / CALIBRATION_FILE).write_text('{"temperature": 3.0}')
    lm = bv.load_model(str(folder), device="cpu", settings=settings)
    assert lm.temperature == 1.0
    assert bv.predict(lm, TEXTS)[0].probs == bv.predict(lm, TEXTS, calibrated=False)[0].probs


def test_cli_predict_raw_probabilities(capsys, tiny_model_dir, tmp_path):
    from bertviz_app.cli import main

    folder = _calibrated_copy(tiny_model_dir, tmp_path, 0.25)
    assert main(["predict", *TEXTS, "--model", str(folder), "--json"]) == 0
    cal = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["predict", *TEXTS, "--model", str(folder), "--json", "--raw-probabilities"]) == 0
    raw = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all(r["temperature"] == 0.25 for r in cal) and all("temperature" not in r for r in raw)
    assert [r["label"] for r in cal] == [r["label"] for r in raw]
    p_raw = np.array([[r["scores"][k] for k in ("negative", "positive")] for r in raw])
    p_cal = np.array([[r["scores"][k] for k in ("negative", "positive")] for r in cal])
    assert p_cal == pytest.approx(bv.softmax_t(np.log(p_raw), 0.25), abs=1e-5)


def test_route_predict_calibrated_switch(tiny_model_dir, tmp_path):
    from fastapi.testclient import TestClient

    from bertviz_app.config import Settings
    from bertviz_app.serve.server import create_app

    folder = _calibrated_copy(tiny_model_dir, tmp_path, 0.25)
    with TestClient(create_app(Settings(), str(folder), page=False)) as client:
        cal = client.post("/v1/predict", json={"text": TEXTS[0]})
        raw = client.post("/v1/predict", json={"text": TEXTS[0], "calibrated": False})
        bad = client.post("/v1/predict", json={"text": TEXTS[0], "calibrated": "maybe"})
    assert cal.status_code == 200 and raw.status_code == 200, (cal.text, raw.text)
    assert cal.json()["temperature"] == 0.25 and raw.json().get("temperature") is None
    assert cal.json()["label"] == raw.json()["label"] and cal.json()["scores"] != raw.json()["scores"]
    assert bad.status_code == 422 and "Traceback" not in bad.text


# ----------------------------------------------------------------------------- fine-tuning


def _finetune(models_dir, tiny_model_dir, tmp_path, name):
    from test_finetune import FAST, write_csv

    from bertviz_app.train.data import build_dataset, read_table
    from bertviz_app.train.finetune import run_finetune

    dataset = build_dataset(read_table(write_csv(tmp_path / "reviews.csv")), "review", "sentiment")
    return run_finetune(dataset, models_dir=models_dir, base=str(tiny_model_dir), mode="full", name=name,
                        config=FAST, source="reviews.csv")


def test_finetune_with_too_few_validation_rows_fits_no_temperature_and_says_why(models_dir, tiny_model_dir, tmp_path,
                                                                                settings):
    result = _finetune(models_dir, tiny_model_dir, tmp_path, "c0")
    info = json.loads((result.path / "run.json").read_text())
    c = info["metrics"]["calibration"]
    assert info["val_rows"] < MIN_SPLIT_ROWS  # 48 rows, a fifth held out
    assert c["temperature"] is None and c["helps"] is False and c["nll_before"] > 0
    assert f"{info['val_rows']} rows are too few" in c["judgement"]
    assert not (result.path / CALIBRATION_FILE).exists()
    card = (result.path / "README.md").read_text()
    assert c["judgement"] in card and "Predict reports the model's raw softmax." in card
    assert c["judgement"] in result.verdict.message and c["judgement"] in info["verdict"]["message"]
    assert bv.load_model("runs/c0", device="cpu", settings=settings).temperature == 1.0


@pytest.mark.parametrize("case", ["hurts", "helps"])
def test_finetune_saves_the_temperature_only_when_it_helps_where_it_is_judged(models_dir, tiny_model_dir, tmp_path,
                                                                              settings, monkeypatch, case):
    """The run's validation logits replaced by ones of known effect (the tiny run has too few rows to
    judge a temperature on): the runner keeps calibration.json, and says so, by the report's judgement."""
    import bertviz_app.train.finetune.runner as runner

    z, y = _hurting_sample() if case == "hurts" else (lambda s: (3.0 * s[0], s[1]))(_calibrated_sample(400, 2, 5))
    real = runner.evaluate

    def evaluate(*args, **kwargs):
        metrics, wrong = real(*args, **kwargs)
        return {**metrics, "calibration": bv.calibration_report(z, y)}, wrong

    monkeypatch.setattr(runner, "evaluate", evaluate)
    result = _finetune(models_dir, tiny_model_dir, tmp_path, f"c-{case}")
    c = json.loads((result.path / "run.json").read_text())["metrics"]["calibration"]
    assert c == bv.calibration_report(z, y) | {"judgement": c["judgement"]} and c["judged_on_rows"] == 200
    card = (result.path / "README.md").read_text()
    assert c["judgement"] in card and c["judgement"] in result.verdict.message
    assert f"T = {c['temperature']:.3f}" in card and f"NLL {c['nll_before']:.4f} -> {c['nll_after']:.4f}" in card
    lm = bv.load_model(f"runs/c-{case}", device="cpu", settings=settings)
    if case == "hurts":
        assert c["helps"] is False and "does not help" in c["judgement"]
        assert not (result.path / CALIBRATION_FILE).exists() and lm.temperature == 1.0
        assert "Not saved: predict reports the model's raw softmax." in card
    else:
        assert c["helps"] is True and c["temperature"] > 1.5  # over-confident: softened
        saved = json.loads((result.path / CALIBRATION_FILE).read_text())
        assert saved["temperature"] == pytest.approx(c["temperature"], rel=1e-12)
        assert saved["fitted_on"] == {"rows": 200, "source": "fine-tune validation split"}
        assert lm.temperature == pytest.approx(c["temperature"], rel=1e-12)  # predict applies it
        assert "Saved as calibration.json: predict applies it." in card
