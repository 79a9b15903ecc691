"""Issue 35: a sentence pair given to a model that was not trained on pairs gets a note saying so. A fine-tuned
run records in its run.json whether it was trained with a second text column ("pairs"); the default model's
build_info.json means single reviews. predict (service, the JSON route, the Predict tab, the CLI) notes a pair
given to a model trained on single texts; a model trained on pairs, or one whose training is unknown (an
operator's folder, a Hub model, the bare encoder, a run recorded before "pairs"), gets no note."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

import bertviz_app as bv
from bertviz_app import service
from bertviz_app.config import Settings
from bertviz_app.train.data import build_dataset, read_table
from bertviz_app.train.finetune import run_finetune

NOTE = "was trained on single texts, not sentence pairs"
TEXT, PAIR = "the film was good", "it is fun"


def write_pairs_csv(path: Path, n: int = 40) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["review", "context", "sentiment"])
        for i in range(n):
            pos = i % 2 == 1
            w.writerow([f"the film was {'good' if pos else 'bad'} {'!' * (i % 4)}", f"it is {'fun' * (1 + i % 3)}",
                        "positive" if pos else "negative"])
    return path


@pytest.fixture(scope="module")
def registry(tmp_path_factory, tiny_model_dir) -> Path:
    """A models folder with two probe runs of the tiny model, one trained on pairs ("pairs") and one on single
    texts ("single"), and a default model (the tiny one with a build record, as build_default leaves it)."""
    root = tmp_path_factory.mktemp("pair-notice")
    models = root / "models"
    table = read_table(write_pairs_csv(root / "pairs.csv"))
    for name, pair_col in (("pairs", "context"), ("single", None)):
        data = build_dataset(table, "review", "sentiment", pair_col)
        run_finetune(data, models_dir=models, base=str(tiny_model_dir), mode="probe", name=name)
    shutil.copytree(tiny_model_dir, models / "default")
    (models / "default" / "build_info.json").write_text(json.dumps({"train_rows": 1, "pairs": False}))
    return models


@pytest.fixture()
def open_model(registry):
    settings = Settings(models_dir=registry, memo_size=0)
    return lambda name: bv.load_model(name, device="cpu", settings=settings)


def test_a_run_records_whether_it_was_trained_on_pairs(registry):
    def record(name):
        return json.loads((registry / "runs" / name / "run.json").read_text())

    assert record("pairs")["pairs"] is True
    assert record("single")["pairs"] is False
    assert bv.trained_on_pairs(registry / "runs" / "pairs") is True
    assert bv.trained_on_pairs(registry / "runs" / "single") is False


def test_the_default_model_was_trained_on_single_texts(registry, tmp_path, tiny_model_dir):
    assert bv.trained_on_pairs(registry / "default") is False
    # a default model built before its record said "pairs": build_default only ever trains on single reviews
    old = shutil.copytree(tiny_model_dir, tmp_path / "old-default")
    (old / "build_info.json").write_text(json.dumps({"train_rows": 1}))
    assert bv.trained_on_pairs(old) is False


def test_unknown_training_is_none(tiny_model_dir, tmp_path, registry):
    assert bv.trained_on_pairs(tiny_model_dir) is None  # an operator's folder: nothing recorded
    old = shutil.copytree(registry / "runs" / "single", tmp_path / "old-run")  # a run from before "pairs"
    info = json.loads((old / "run.json").read_text())
    del info["pairs"]
    (old / "run.json").write_text(json.dumps(info))
    assert bv.trained_on_pairs(old) is None
    assert bv.trained_on_pairs(registry / "runs" / "single") is False  # positive control: the same run, recorded


def test_service_predict_notes_a_pair_given_to_a_model_trained_on_single_texts(open_model):
    single = open_model("runs/single")
    out = service.predict(single, TEXT, PAIR)
    assert len(out["notices"]) == 1 and NOTE in out["notices"][0] and "runs/single" in out["notices"][0]
    assert out["pair"] == PAIR and set(out["scores"]) == {"negative", "positive"}  # the answer is still given
    assert "notices" not in service.predict(single, TEXT, "")  # no pair, nothing to note
    assert "notices" not in service.predict(single, TEXT, "   ")  # a blank pair is no pair


def test_service_predict_says_nothing_for_a_model_trained_on_pairs(open_model):
    lm = open_model("runs/pairs")
    assert lm.pairs is True  # its record says pairs (so no note below is the reader's answer, not a missing one)
    assert "notices" not in service.predict(lm, TEXT, PAIR)


def test_the_default_model_gets_the_note(open_model):
    lm = open_model("default")
    assert lm.pairs is False
    assert NOTE in service.predict(lm, TEXT, PAIR)["notices"][0]


def test_a_model_of_unknown_training_gets_no_note(tiny, open_model):
    assert tiny.pairs is None
    assert "notices" not in service.predict(tiny, TEXT, PAIR)
    assert "notices" in service.predict(open_model("runs/single"), TEXT, PAIR)  # positive control


def test_the_json_route_carries_the_note(registry):
    from fastapi.testclient import TestClient

    from bertviz_app.serve.server import create_app

    with TestClient(create_app(Settings(models_dir=registry), "default", page=False)) as client:
        def ask(**body):
            r = client.post("/v1/predict", json={"text": TEXT, **body})
            assert r.status_code == 200, r.text
            return r.json()

        single = ask(pair=PAIR, model="runs/single")
        assert NOTE in single["notices"][0]
        assert NOTE in ask(pair=PAIR)["notices"][0]  # the app's default model
        assert ask(pair=PAIR, model="runs/pairs")["notices"] is None  # the route answers null: nothing to note
        assert ask(model="runs/single")["notices"] is None
        schema = client.get("/openapi.json").json()["components"]["schemas"]["PredictResponse"]
        assert "notices" in schema["properties"]


def test_the_predict_tab_shows_the_note_before_the_texts_other_notices(open_model):
    from bertviz_app.ui import analysis, predict_tab

    ui = SimpleNamespace(**{k: k for k in ("model_info", "warnings", "notice", "label", "bar", "calibration", "raw",
                                           "tokens")})
    single, pairs = open_model("runs/single"), open_model("runs/pairs")
    out = predict_tab.render(ui, analysis.analyze_fast(single, TEXT, PAIR), single)
    assert out["notice"].startswith("**Note:**") and NOTE in out["notice"] and "tokens." in out["notice"]
    for lm, pair in ((pairs, PAIR), (single, "")):  # trained on pairs; no pair given
        out = predict_tab.render(ui, analysis.analyze_fast(lm, TEXT, pair), lm)
        assert NOTE not in out["notice"] and "tokens." in out["notice"]


def test_cli_predict_pair_prints_the_note(registry, capsys):
    from bertviz_app.cli import main

    def run(name, *extra):
        code = main(["predict", TEXT, "--pair", PAIR, "--model", str(registry / "runs" / name), *extra])
        out, err = capsys.readouterr()
        assert code == 0, err
        return out, err

    out, err = run("single", "--json")
    assert f"note: {str(registry / 'runs' / 'single')} {NOTE}" in err.replace("\n", " ")
    assert json.loads(out)["pair"] == PAIR  # stdout keeps its one JSON object per line
    assert NOTE in run("single")[1]
    assert NOTE not in run("pairs")[1]  # positive control: a run trained on pairs
