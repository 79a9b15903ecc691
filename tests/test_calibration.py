"""Calibration (issue 21): ECE/NLL/Brier against hand-computed values, temperature scaling recovering a
known temperature, calibration.json read safely and applied by predict (raw probabilities on request),
and fine-tuning fitting and saving it by itself."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest

import bertviz_app as bv
from bertviz_app import InputError
from bertviz_app.calibration import CALIBRATION_FILE, T_MAX, T_MIN

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
    from bertviz_app.training import calibration_metrics as training_metrics

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
    assert set(r) == {"temperature", "rows", "ece_before", "ece_after", "nll_before", "nll_after", "brier_before",
                      "brier_after"}
    assert r["rows"] == 2000 and r["nll_after"] <= r["nll_before"]


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
    with pytest.raises(InputError, match="not a folder"):
        bv.save_calibration(tmp_path / "missing", report, "x")


@pytest.mark.parametrize("content", [
    "{not json", "", "[2.0]", '{"temperature": "2"}', '{"temperature": -1}', '{"temperature": 0}',
    '{"temperature": 1000}', '{"temperature": NaN}', '{"temperature": true}', '{"t": 2}', b"\xff\xfe\x00",
])
def test_a_broken_calibration_file_is_ignored_with_a_warning(tmp_path, caplog, content):
    p = tmp_path / CALIBRATION_FILE
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    with caplog.at_level(logging.WARNING, logger="bertviz_app.calibration"):
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
    from bertviz_app.server import create_app

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


def test_finetune_fits_and_saves_the_temperature(models_dir, tiny_model_dir, tmp_path, settings):
    from test_finetune import FAST, write_csv

    from bertviz_app.data import build_dataset, read_table
    from bertviz_app.finetune import run_finetune

    dataset = build_dataset(read_table(write_csv(tmp_path / "reviews.csv")), "review", "sentiment")
    result = run_finetune(dataset, models_dir=models_dir, base=str(tiny_model_dir), mode="full", name="c1",
                          config=FAST, source="reviews.csv")
    c = result.metrics["calibration"]
    saved = json.loads((result.path / CALIBRATION_FILE).read_text())
    info = json.loads((result.path / "run.json").read_text())
    assert saved["temperature"] == pytest.approx(c["temperature"]) and T_MIN <= c["temperature"] <= T_MAX
    assert saved["fitted_on"] == {"rows": info["val_rows"], "source": "fine-tune validation split"}
    assert c["nll_after"] <= c["nll_before"] + 1e-9 and c["ece_before"] == pytest.approx(result.metrics["ece"])
    assert info["metrics"]["calibration"]["temperature"] == pytest.approx(c["temperature"])
    assert "Temperature scaling" in (result.path / "README.md").read_text()
    lm = bv.load_model("runs/c1", device="cpu", settings=settings)
    assert lm.temperature == pytest.approx(c["temperature"])
