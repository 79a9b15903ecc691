"""The page and temperature scaling (issue 21): where the model folder holds a calibration.json, the
Predict tab says its probabilities are temperature-scaled (T, fitted on what) and shows the raw ones on
a switch redrawn from the record; the Attributions tab names its probabilities raw; nothing of it shows
for an uncalibrated model; the fine-tune report gives ECE/NLL before/after T. Handler level; the browser
test is tests/test_browser_calibration.py."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest
import torch

import bertviz_app as bv
from bertviz_app.models.calibration import CALIBRATION_FILE

T = 0.25  # sharpens the tiny model's near-even scores: raw and scaled differ visibly
TEXT = "the film was good"
FITTED = {"rows": 600, "source": "fine-tune validation split"}


def calibrated_copy(tiny_model_dir, folder, temperature=T, fitted_on=FITTED):
    shutil.copytree(tiny_model_dir, folder)
    data = {"temperature": temperature, **({"fitted_on": fitted_on} if fitted_on is not None else {})}
    (folder / CALIBRATION_FILE).write_text(json.dumps(data), encoding="utf-8")
    return folder


def make_page(model: str, settings):
    import gradio as gr

    from bertviz_app.ui import Page

    with gr.Blocks():
        return Page(settings, model)


def analyze(page, text=TEXT, skip_ig=True) -> dict:
    """The page's one Analyze event run to its end: every output it set, the last value of each."""
    from bertviz_app.ui.control_values import PREDICTED

    out = {}
    for step in page.analyze(page.default, text, "", PREDICTED, "pad", 8, False, 1, "mean of heads", False,
                             False, True, skip_ig=skip_ig):
        out.update(step)
    return out


def logits_of(folder, text=TEXT) -> np.ndarray:
    """The model's own logits for ``text``, straight from the weights (not through the page)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(**tok(text, return_tensors="pt")).logits[0].double().numpy()


def shown(value: dict, labels) -> np.ndarray:
    return np.array([value[lab] for lab in labels])


@pytest.fixture()
def calibrated(tiny_model_dir, tmp_path):
    return calibrated_copy(tiny_model_dir, tmp_path / "calibrated")


# ----------------------------------------------------------------------------- the helpers in calibration.py


def test_calibration_info_says_t_and_what_it_was_fitted_on(calibrated, tmp_path, caplog):
    assert bv.calibration_info(calibrated) == {"temperature": T, **FITTED}
    bare = calibrated_copy(calibrated, tmp_path / "bare", 2.0, fitted_on=None)
    assert bv.calibration_info(bare) == {"temperature": 2.0, "rows": None, "source": None}
    odd = calibrated_copy(calibrated, tmp_path / "odd", 2.0, fitted_on={"rows": "many", "source": ["x"]})
    assert bv.calibration_info(odd) == {"temperature": 2.0, "rows": None, "source": None}
    (bare / CALIBRATION_FILE).write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="bertviz_app.models.calibration"):
        assert bv.calibration_info(bare) is None and bv.calibration_info(tmp_path / "nowhere") is None
    assert CALIBRATION_FILE in caplog.text


def test_rescale_probs_is_softmax_of_the_logits_over_t():
    z = np.array([[1.0, -2.0, 0.5], [3.0, 3.0, -1.0]])
    for t in (0.25, 1.0, 2.5):
        assert bv.rescale_probs(bv.softmax_t(z), t) == pytest.approx(bv.softmax_t(z, t), abs=1e-12)
    assert bv.rescale_probs([0.0, 1.0], 2.0) == pytest.approx([0.0, 1.0])  # a zero stays zero
    for bad in ([], [0.0, 0.0], [np.nan, 1.0], [-0.1, 1.1]):
        with pytest.raises(bv.InputError, match="probabilities"):
            bv.rescale_probs(bad, 2.0)


# ----------------------------------------------------------------------------- Predict tab


def test_the_note_gives_t_and_the_switch_gives_raw_or_scaled_probabilities(calibrated, settings):
    page = make_page(str(calibrated), settings)
    p = page.p
    out = analyze(page)
    rec = out[page.state]
    labels = rec.labels
    z = logits_of(calibrated)
    raw, scaled = bv.softmax_t(z, 1.0), bv.softmax_t(z, T)
    assert not np.allclose(raw, scaled, atol=1e-3)
    # what predict reports (and /v1/predict): temperature-scaled, said so under the probabilities
    assert shown(out[p.label], labels) == pytest.approx(scaled, abs=1e-5)
    assert np.array(out[p.bar].data[0].x) == pytest.approx(scaled, abs=1e-5)
    assert out[p.bar].layout.title.text == "Class probabilities (temperature-scaled)"
    note = out[p.calibration]
    assert note["visible"] is True and "temperature scaling" in note["value"] and "T = 0.25" in note["value"]
    assert "600 rows" in note["value"] and "fine-tune validation split" in note["value"]
    assert out[p.raw] == {"__type__": "update", "value": False, "visible": True}
    assert rec.prediction.probs == pytest.approx(tuple(bv.predict(page.load(page.default), TEXT)[0].probs), abs=1e-6)
    # the switch: the raw softmax, redrawn from the record (no model work), and back
    calls = []
    page_load = page.load
    page.load = lambda *a: calls.append(a) or page_load(*a)
    flipped = page.show_raw(rec, True)
    assert set(flipped) == {p.label, p.bar} and not calls
    assert shown(flipped[p.label], labels) == pytest.approx(raw, abs=1e-5)
    assert np.array(flipped[p.bar].data[0].x) == pytest.approx(raw, abs=1e-5)
    assert flipped[p.bar].layout.title.text == "Class probabilities (raw, before temperature scaling)"
    back = page.show_raw(rec, False)
    assert shown(back[p.label], labels) == pytest.approx(scaled, abs=1e-5)
    # the predicted class is the same either way
    assert labels[int(np.argmax(raw))] == labels[int(np.argmax(scaled))] == rec.prediction.label


def test_a_long_text_classified_whole_is_scaled_too(calibrated, settings):
    page = make_page(str(calibrated), settings)
    lm = page.load(page.default)
    long = "the film was good , it is not a tedious slog ! " * 12
    from bertviz_app.ui import analysis

    rec = analysis.analyze_fast(lm, long, None, window=True)
    whole = bv.predict(lm, long, window=True, stride=lm.max_length // 4)[0]
    raw = bv.predict(lm, long, window=True, stride=lm.max_length // 4, calibrated=False)[0]
    assert rec.prediction.windows > 1 and rec.prediction.temperature == T
    assert rec.prediction.probs == pytest.approx(whole.probs, abs=1e-5)
    assert rec.calibration.raw_probs == pytest.approx(raw.probs, abs=1e-6)


def test_nothing_is_said_or_switchable_without_a_calibration_file(tiny_model_dir, settings):
    page = make_page(str(tiny_model_dir), settings)
    p = page.p
    out = analyze(page)
    rec = out[page.state]
    assert rec.calibration is None
    assert out[p.calibration]["visible"] is False and out[p.raw]["visible"] is False
    assert out[p.bar].layout.title.text == "Class probabilities"
    z = logits_of(tiny_model_dir)
    assert shown(out[p.label], rec.labels) == pytest.approx(bv.softmax_t(z, 1.0), abs=1e-5)
    flipped = page.show_raw(rec, True)
    assert all(isinstance(v, dict) and v.get("__type__") == "update" and set(v) == {"__type__"}
               for v in flipped.values())  # gr.skip(): nothing changes
    assert page.show_raw(None, True)[p.label] == flipped[p.label]


def test_a_failed_analyze_hides_the_note(calibrated, settings):
    page = make_page(str(calibrated), settings)
    out = page.analysis_failed()
    assert out[page.p.calibration]["visible"] is False and out[page.p.raw]["visible"] is False
    assert out[page.p.label] is None


def test_the_switch_is_its_own_quick_event_outside_the_api(calibrated, settings):
    from bertviz_app.ui import build_app

    demo = build_app(settings, str(calibrated))
    deps = demo.get_config_file()["dependencies"]
    raw_id = next(c._id for c in demo.blocks.values() if getattr(c, "elem_id", None) == "bv-raw-probs")
    switch = [d for d in deps if any(t[0] == raw_id for t in d["targets"])]
    assert len(switch) == 1 and switch[0]["queue"] is False and switch[0]["api_visibility"] == "private"
    analyze = next(d for d in deps if d.get("api_name") == "analyze")
    assert raw_id not in analyze["inputs"] and raw_id in analyze["outputs"]


# ----------------------------------------------------------------------------- Attributions tab


def test_the_attributions_name_their_probability_raw(calibrated, tiny_model_dir, settings):
    from bertviz_app.ui import analysis, attribution_tab, control_values

    page = make_page(str(calibrated), settings)
    lm = page.load(page.default)
    rec = analysis.analyze_ig(lm, analysis.analyze_fast(lm, TEXT, None), control_values.PREDICTED, "pad", 8)
    target = rec.attribution.target
    raw = dict(zip(rec.labels, bv.softmax_t(logits_of(calibrated), 1.0)))[target]
    assert rec.attribution.f_x == pytest.approx(raw, abs=1e-4)  # IG explains the raw softmax
    delta = attribution_tab.render(page.t, rec, True)[page.t.delta]
    assert "change in the model's raw probability" in delta
    assert "Raw probabilities on this tab" in delta and "T = 0.25" in delta
    assert f"raw probability {raw:.4f} here" in delta
    assert f"{rec.prediction.scores[target]:.4f} temperature-scaled there" in delta
    pending = attribution_tab.render(page.t, analysis.analyze_fast(lm, TEXT, None), True, skipped=True)[page.t.delta]
    assert "Integrated Gradients skipped" in pending and "Raw probabilities on this tab" in pending
    # an uncalibrated model: one kind of probability, named as before
    plain = page.load(str(tiny_model_dir))
    rec = analysis.analyze_ig(plain, analysis.analyze_fast(plain, TEXT, None), control_values.PREDICTED, "pad", 8)
    delta = attribution_tab.render(page.t, rec, True)[page.t.delta]
    assert "change in the probability" in delta and "raw" not in delta


# ----------------------------------------------------------------------------- Fine-tune report


def test_the_finished_runs_report_gives_ece_and_nll_before_and_after_t(tmp_path):
    from bertviz_app.ui.finetune_tab import metrics_md

    c = {"temperature": 1.83, "rows": 600, "ece_before": 0.071, "ece_after": 0.018, "nll_before": 0.52,
         "nll_after": 0.44, "brier_before": 0.29, "brier_after": 0.28}
    metrics = {"accuracy": 0.8, "macro_f1": 0.79, "n": 600, "val_nll": 0.52, "ece": 0.071, "per_class": {},
               "calibration": c}
    base = dict(path=tmp_path, mode="full", base="encoder", misclassified=[], labels=("a", "b"))
    md = metrics_md([bv.RunResult(name="runs/x", metrics=metrics, **base)])
    line = next(line for line in md.split("  \n") if line.startswith("Temperature scaling"))
    assert "T = 1.830" in line and "ECE 0.071 → 0.018" in line and "NLL 0.520 → 0.440" in line
    assert "measured on the 600 validation rows T was fitted on" in line and "optimistic" in line
    both = metrics_md([bv.RunResult(name="runs/p", metrics=metrics, **{**base, "mode": "probe"}),
                       bv.RunResult(name="runs/f", metrics=metrics, **base)])
    assert "Temperature scaling (runs/p)" in both and "Temperature scaling (runs/f)" in both
    plain = {k: v for k, v in metrics.items() if k != "calibration"}  # multi-label, or a run from before
    assert "Temperature scaling" not in metrics_md([bv.RunResult(name="runs/x", metrics=plain, **base)])


@pytest.mark.parametrize("hurts", [False, True])
def test_the_finished_runs_report_says_whether_the_judged_temperature_was_kept(tmp_path, hurts):
    """Issue 35: T fitted on half the validation rows, judged on the other half; the report gives the
    numbers on the judging half and says whether it helped there, and so was saved, or why not."""
    from bertviz_app.ui.finetune_tab import metrics_md

    rng = np.random.default_rng(0)
    z = rng.normal(size=(400, 2)) * 3
    y = (rng.random(400) < bv.softmax_t(z / 3, 1.0)[:, 1]).astype(int)  # z is 3x over-confident
    if hurts:  # the fitting half all right (T falls: surer), the judging half mostly wrong
        from bertviz_app.models.calibration import split_rows

        fit, judge = split_rows(400)
        y[fit] = z[fit].argmax(1)
        y[judge] = 1 - z[judge].argmax(1)
    c = bv.calibration_report(z, y)
    assert c["helps"] is (not hurts)
    metrics = {"accuracy": 0.8, "macro_f1": 0.79, "n": 400, "val_nll": 0.52, "ece": 0.071, "per_class": {},
               "calibration": c}
    base = dict(path=tmp_path, mode="full", base="encoder", misclassified=[], labels=("a", "b"))
    md = metrics_md([bv.RunResult(name="runs/x", metrics=metrics, **base)])
    line = next(line for line in md.split("  \n") if line.startswith("Temperature scaling"))
    assert f"**T = {c['temperature']:.3f}**, fitted on 200 validation rows and judged on the other 200" in line
    assert f"NLL {c['nll_before']:.3f} \u2192 {c['nll_after']:.3f}" in line
    assert f"ECE {c['ece_before']:.3f} \u2192 {c['ece_after']:.3f}" in line
    if hurts:
        assert "does **not help** there" in line and "**not saved**" in line and "raw softmax" in line
        assert "predict applies it" not in line
    else:
        assert "it **helps** there" in line and "**saved** as calibration.json and predict applies it" in line
