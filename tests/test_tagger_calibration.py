"""A tagger run's calibration, as a classifier run's: how honest its word probabilities are on the validation
sentences (NLL, ECE), a temperature fitted on half of their words and judged on the other half, saved beside the
weights when it helps, and ``tag`` reporting scores from the temperature-scaled probabilities (labels unchanged).

References are computed apart: the logits of each word's first piece from the model's own forward over the
tokenizer's word ids, and the cross-entropy by torch."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_tagger_training import TAGS, _conll, _sentences

import bertviz_app as bv
from bertviz_app.train.tagger_training import tagger_calibration, tags_of, train_tagger, word_logits
from bertviz_app.train.training import TrainConfig

from conftest import build_family_model

CONFIG = TrainConfig(epochs=12, learning_rate=1e-2, batch_size=16, warmup_ratio=0.0, eval_every=3,
                     early_stopping_patience=0, seed=0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    base = build_family_model("bert", tmp_path_factory.mktemp("cal") / "bert")
    model, tok, _ = train_tagger(base, TAGS, _sentences(96, seed=1), _sentences(40, seed=2), CONFIG)
    return model, tok


def _reference_logits(model, tok, sentence) -> np.ndarray:
    """The logits at each word's first piece, from the tokenizer's word ids and the model's own forward."""
    enc = tok(list(sentence.tokens), is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits[0].float().numpy()
    ids = enc.word_ids(0)
    first = {w: i for i, w in reversed(list(enumerate(ids))) if w is not None}
    return np.stack([logits[first[w]] for w in range(len(sentence.tokens))])


def test_word_logits_and_the_validation_nll_match_a_reference_computed_apart(trained):
    model, tok = trained
    val = _sentences(40, seed=2)
    got = word_logits(model, tok, val)
    for words, s in zip(got, val):
        ref = _reference_logits(model, tok, s)
        assert np.allclose(words, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    z = torch.tensor(np.concatenate([_reference_logits(model, tok, s) for s in val]))
    y = torch.tensor([TAGS.index(t) for s in val for t in s.tags])
    nll = torch.nn.functional.cross_entropy(z, y).item()
    m = tagger_calibration(got, val, TAGS)
    assert m["val_nll"] == pytest.approx(nll, rel=1e-4) and 0 <= m["ece"] <= 1
    report = m["calibration"]
    assert report["temperature"] is not None and report["fitted_on_rows"] + report["judged_on_rows"] == len(y)
    assert tags_of(got, model.config.id2label) == [[TAGS[int(r.argmax())] for r in w] for w in got]


def test_tag_reports_scores_from_the_saved_temperature_with_the_labels_unchanged(trained, tmp_path):
    """A temperature in the folder's calibration.json rescales every piece's probabilities (the entity scores
    with them); calibrated=False is the raw softmax; the entities and labels are the same either way."""
    model, tok = trained
    folder = tmp_path / "tagger"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    text = "it was gorgeous moving the film was awful"
    raw = bv.tag(bv.load_model(str(folder), device="cpu"), text)[0]
    t = 2.5
    (folder / "calibration.json").write_text(json.dumps({"temperature": t, "fitted_on": {"rows": 9, "source": "x"}}))
    bv.clear_cache()  # the folder changed: load it afresh
    lm = bv.load_model(str(folder), device="cpu")
    assert lm.temperature == t
    scaled, uncal = bv.tag(lm, text)[0], bv.tag(lm, text, calibrated=False)[0]
    assert [(e.text, e.label, e.start, e.end) for e in scaled.entities] == [
        (e.text, e.label, e.start, e.end) for e in raw.entities] and scaled.labels == raw.labels
    assert [e.score for e in uncal.entities] == pytest.approx([e.score for e in raw.entities], rel=1e-5)
    # the reference: each entity's pieces' softmax(logits / T) at their label, averaged (the "simple" score)
    enc = lm.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits[0].float()
    p = torch.softmax(logits / t, -1).numpy()
    offsets = lm.tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    for e in scaled.entities:
        pieces = [i for i, (a, b) in enumerate(offsets) if b > a and a >= e.start and b <= e.end]
        want = float(np.mean([p[i].max() for i in pieces]))
        assert e.score == pytest.approx(want, rel=1e-4)
    assert all(abs(a.score - b.score) > 1e-3 for a, b in zip(scaled.entities, raw.entities))  # T changed them
    from types import SimpleNamespace

    from bertviz_app.ui import predict_tab

    names = ("model_info", "warnings", "notice", "label", "bar", "tokens", "calibration", "raw", "entities",
             "tag_words", "answer", "n_best")
    ui = SimpleNamespace(**{n: n for n in names})
    notice = predict_tab.render_tagging(ui, scaled, lm)["notice"]
    assert "T = 2.5" in notice and "the tags are the same either way" in notice
    (folder / "calibration.json").unlink()
    bv.clear_cache()
    uncalibrated = bv.load_model(str(folder), device="cpu")
    assert "temperature" not in predict_tab.render_tagging(ui, raw, uncalibrated)["notice"]  # the control


def test_a_tagger_run_saves_its_calibration_with_the_numbers_and_the_card_says_so(tmp_path, monkeypatch, capsys):
    from bertviz_app.cli import main

    monkeypatch.setenv("BERTVIZ_MODELS_DIR", str(tmp_path / "models"))
    base = build_family_model("bert", tmp_path / "base")
    data = tmp_path / "train.conll"
    data.write_text(_conll(_sentences(160, seed=3)), encoding="utf-8")
    code = main(["finetune", str(data), "--task", "token-classification", "--base", str(base), "--name", "ner",
                 "--epochs", "12", "--lr", "1e-2", "--batch-size", "16", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    folder = tmp_path / "models" / "runs" / "ner"
    run = json.loads((folder / "run.json").read_text())
    m = run["metrics"]
    assert m["val_nll"] > 0 and 0 <= m["ece"] <= 1
    report = m["calibration"]
    printed = json.loads(out)  # --json carries them as a classifier run's does
    assert printed["metrics"]["val_nll"] == pytest.approx(m["val_nll"]) and printed["calibration"] == report
    card = (folder / "README.md").read_text()
    assert f"{m['val_nll']:.4f}" in card and f"{m['ece']:.4f}" in card
    saved = folder / "calibration.json"
    assert saved.is_file() == bool(report["helps"]), report
    if report["helps"]:
        assert json.loads(saved.read_text())["temperature"] == pytest.approx(report["temperature"])
        assert bv.load_model(str(folder), device="cpu").temperature == pytest.approx(report["temperature"])
