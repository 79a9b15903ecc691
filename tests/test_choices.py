"""Issue 36: a control offers only what its handler will do. The filtering functions behind the page's
choices, each checked both ways: what it leaves out is what the core refuses (the refusal stays, for raw
API callers), and what it offers runs. The same controls in a real browser: test_browser_choices.py."""

from __future__ import annotations

import json
import re
import shutil
from types import SimpleNamespace

import pytest

import bertviz_app as bv

TEXT = "the film was good"


# --------------------------------------------------------------------------- models that lack something
def make_no_mask_model(path):
    """The tiny classifier whose tokenizer has no [MASK] token (a [MASK] baseline is refused)."""
    from conftest import make_tiny_model

    make_tiny_model(path)
    cfg = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg["mask_token"] = None
    (path / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return path


def make_undecomposable_model(path, src):
    """A copy of the tiny classifier configured as a decoder: its family's layers cannot be decomposed,
    so only raw attention is a context-mixing measure it has (the others are refused)."""
    shutil.copytree(src, path)
    cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    cfg["is_decoder"] = True
    (path / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return path


def load(path):
    return bv.load_model(str(path), device="cpu", settings=bv.Settings(memo_size=0))


@pytest.fixture(scope="module")
def no_mask(tmp_path_factory):
    return load(make_no_mask_model(tmp_path_factory.mktemp("no-mask") / "m"))


@pytest.fixture(scope="module")
def undecomposable(tmp_path_factory, tiny_model_dir):
    return load(make_undecomposable_model(tmp_path_factory.mktemp("dec") / "m", tiny_model_dir))


def tab():
    return SimpleNamespace(target="target", baseline="baseline", cmp=SimpleNamespace(methods="methods"))


# --------------------------------------------------------------------------- the Attributions tab
def test_baselines_offered_are_those_the_tokenizer_builds(no_mask, tiny):
    from bertviz_app.ui.attribution_tab import BASELINE_INFO, baseline_options

    assert bv.usable_baselines(no_mask) == ("pad", "unk", "zero")
    choices, note = baseline_options(no_mask)
    assert [v for _, v in choices] == ["pad", "unk", "zero"] and "[MASK] tokens" in note
    with pytest.raises(bv.InputError, match=r"no \[MASK\] token"):  # the refusal stays for API callers
        bv.attribute(no_mask, TEXT, baseline="mask", n_steps=4)
    for _, value in choices:  # each offered baseline explains
        assert len(bv.attribute(no_mask, TEXT, baseline=value, n_steps=4).scores) > 0
    # positive control: a tokenizer with every token gets every baseline and the plain note
    assert baseline_options(tiny) == ([(n, v) for n, v in bv_choices()], BASELINE_INFO)


def bv_choices():
    from bertviz_app.ui.control_values import BASELINE_CHOICES

    return BASELINE_CHOICES


def test_methods_offered_are_those_the_family_runs(undecomposable, tiny):
    from bertviz_app.ui.attribution_tab import METHOD_LABELS, method_options

    choices, note = method_options(undecomposable)
    offered = [v for _, v in choices]
    for left in ("norm", "value_zeroing", "alti"):
        assert left not in offered and METHOD_LABELS[left] in note
        with pytest.raises(bv.InputError, match="cannot locate"):  # the refusal stays
            bv.compare_methods(undecomposable, TEXT, methods=["gradient_x_input", left])
    assert "raw" in offered and "integrated_gradients" in offered
    c = bv.compare_methods(undecomposable, TEXT, methods=["gradient_x_input", "raw"])  # offered: it runs
    assert c.methods == ("gradient_x_input", "raw")
    # positive control: a model whose layers decompose is offered every method, with no note
    choices, note = method_options(tiny)
    assert [v for _, v in choices] == list(METHOD_LABELS) and note == ""


def test_choices_for_a_model_keep_what_it_offers_and_replace_the_rest(no_mask, undecomposable, tiny):
    from bertviz_app.ui import control_values
    from bertviz_app.ui.attribution_tab import choices_for

    out = choices_for(tab(), no_mask, "positive", "mask", ["integrated_gradients", "alti"])
    assert out["target"]["choices"] == [control_values.PREDICTED, "negative", "positive"]
    assert out["target"]["value"] == "positive"
    assert out["baseline"]["value"] == "pad"  # [MASK] is not offered: the recommended one instead
    assert out["methods"]["value"] == ["integrated_gradients", "alti"]
    out = choices_for(tab(), undecomposable, "class_2", "unk", ["integrated_gradients", "alti"])
    assert out["target"]["value"] == control_values.PREDICTED  # a class of another model
    assert out["baseline"]["value"] == "unk" and out["methods"]["value"] == ["integrated_gradients"]


def test_after_a_model_change_the_target_classes_are_the_analysed_texts(tiny_model_dir, settings, tmp_path):
    """The target acts on the analysed text (Explain again): after another model is shown, its classes are
    still the analysed text's model's, since Explain again refuses another model's class; with no text
    analysed they are the model shown's."""
    import gradio as gr

    from bertviz_app.ui import Page, analysis, control_values

    from conftest import make_tiny_model

    three = make_tiny_model(tmp_path / "three", num_labels=3)
    with gr.Blocks():
        page = Page(settings, str(tiny_model_dir))
    rec = analysis.analyze_fast(page.load(str(tiny_model_dir)), TEXT, None)
    out = page.follow_choices(rec, str(three), control_values.PREDICTED, "pad", ["integrated_gradients"])
    assert out[page.t.target]["choices"] == [control_values.PREDICTED, "negative", "positive"]
    with pytest.raises(bv.InputError, match="Unknown class"):  # what the other model's class would get
        page.explain_again(rec, "class_1", "pad", 4, False, {}, 1, "mean of heads", False, False, True,
                           progress=lambda *a, **k: None)
    out = page.follow_choices(None, str(three), control_values.PREDICTED, "pad", ["integrated_gradients"])
    assert out[page.t.target]["choices"] == [control_values.PREDICTED, "class_0", "class_1", "class_2"]


# --------------------------------------------------------------------------- the Evaluate tab
def test_evaluate_greys_its_button_for_a_multi_label_model_and_lists_none_to_compare(tiny_model_dir, models_dir):
    from bertviz_app.ui import evaluate_events

    from conftest import make_tiny_model

    make_tiny_model(models_dir / "multi", multi_label=True)
    shutil.copytree(tiny_model_dir, models_dir / "single")
    ui = SimpleNamespace(**{k: k for k in ("compare", "start", "model_note", "stored", *HEAD_FOLLOWERS)})
    h = evaluate_events.Handlers(ui, default="x", settings=bv.Settings(models_dir=models_dir, memo_size=0),
                                 predict_text="t", predict_pair="p", tabs="tabs")
    out = h.suggest("multi")
    assert out["start"]["interactive"] is False and "multi-label" in out["model_note"]
    with pytest.raises(bv.InputError, match="multi-label"):  # what Evaluate would have said
        bv.evaluate_file(load(models_dir / "multi"), str(tiny_model_dir / "x.csv"))
    out = h.suggest(str(tiny_model_dir))  # positive control: a single-label classifier
    assert out["start"]["interactive"] is True and out["model_note"] == ""
    values = [v for _, v in out["compare"]["choices"]]
    assert "single" in values and "multi" not in values and "multi (multi-label)" in out["compare"]["info"]
    out = h.suggest("runs/missing")  # a model that does not open: greyed, and why
    assert out["start"]["interactive"] is False and "cannot be opened" in out["model_note"]


# --------------------------------------------------------------------------- a link's ticks
def test_a_link_ticks_no_measure_the_models_family_cannot_decompose():
    from bertviz_app.config import Settings
    from bertviz_app.service.links import ModelShape, read_link

    raw_only = ModelShape(num_layers=2, num_heads=2, labels=("negative", "positive"), measures=("raw",))
    link = read_link("text=good&method=ig,alti,raw", Settings(), "default", lambda name: raw_only)
    assert link.view.methods == ("integrated_gradients", "raw")
    assert any("method 'alti'" in i and "supports only the measures raw" in i for i in link.ignored)
    every = ModelShape(num_layers=2, num_heads=2, labels=("negative", "positive"))  # positive control
    assert read_link("text=good&method=ig,alti", Settings(), "default", lambda name: every).view.methods == (
        "integrated_gradients", "alti")


# --------------------------------------------------------------------------- Evaluate's Save temperature
def test_save_temperature_is_offered_only_for_a_model_it_can_be_saved_into(tiny_model_dir, models_dir, tmp_path,
                                                                           monkeypatch):
    """A temperature that helps was offered for saving whatever the model; on a shared app a model that is not
    the visitor's run, and a Hub model anywhere, then refused it. Now the button is hidden there and the line
    under it says why; a folder of one's own keeps it offered (the positive control)."""
    import dataclasses

    from test_evaluate_tab import labelled_csv

    from bertviz_app.ui import visitor
    from bertviz_app.ui.streaming import CancelFlag

    from conftest import as_uploaded, make_overconfident_copy

    folder = make_overconfident_copy(tiny_model_dir, tmp_path / "mine")  # near-certain, right half the time
    h = evaluate_handlers(models_dir)
    path = tmp_path / "reviews.csv"
    path.write_bytes(labelled_csv(40))
    up = h.on_upload(as_uploaded(path))
    out = list(h.run(CancelFlag(), str(folder), up["table"], None, "text", "label", "", "", "", False))[-1]
    view = out["view"]
    assert view.metrics["calibration"]["helps"] is True and out["save_t"]["visible"] is True  # a folder: offered
    assert out["save_t_md"] == ""
    hub = dataclasses.replace(view, metrics={**view.metrics, "model": "someone/some-model"})
    assert "Hub model" in h.save_refused(hub)
    with pytest.raises(bv.BertvizError):  # what Save said for it ("a Hub model with no folder"; offline: not found)
        h.save_temperature(hub)
    monkeypatch.setattr(visitor, "owner", lambda: "a" * 64)
    shared = evaluate_handlers(models_dir, public=True)
    why = shared.save_refused(view)
    assert "only into your own" in why
    with pytest.raises(bv.InputError, match="only into your own"):
        shared.save_temperature(view)
    drawn = shared.render(folder_of(models_dir, view), view.name)
    assert drawn["save_t"]["visible"] is False and "only into your own" in drawn["save_t_md"]


# the Evaluate tab's components that follow the model's head, and those a tagger's evaluation is drawn in
HEAD_FOLLOWERS = ("upload", "file_hint", "columns_row", "geometry", "words")
TAGGER_RESULTS = ("classifier_box", "tagger_box", "tag_summary", "tag_types", "tag_comparison", "tag_slices",
                  "tag_errors")


def folder_of(models_dir, view):
    return models_dir / "evaluations" / view.name


def evaluate_handlers(models_dir, public=False):
    """The Evaluate tab's handlers, each component named by its own name (an output dict's keys)."""
    from bertviz_app.ui import evaluate_events

    names = ("upload", "table", "refused", "notices", "text_col", "label_col", "pair_col", "status", "stored",
             "compare", "view", "selected", "selected_md", "summary", "per_class", "confusion", "slices", "slice_md",
             "slice_rows", "wrong", "calibration", "save_t", "save_t_md", "reliability", "geometry_box", "layer",
             "scatter", "probes", "dims", "colour", "vector", "compare_box", "comparison", "disagreements",
             "compare_slices", "start", "model_note", *HEAD_FOLLOWERS, *TAGGER_RESULTS)
    settings = bv.Settings(models_dir=models_dir, memo_size=0, public=public)
    return evaluate_events.Handlers(SimpleNamespace(**{k: k for k in names}), default="x", settings=settings,
                                    predict_text="t", predict_pair="p", tabs="tabs")


# --------------------------------------------------------------------------- Evaluate and Explain a file by head
ENTITIES = {"joy": "PER", "slog": "LOC"}  # test_tagging's toy task: these words are entities, the rest O


def write_entity_conll(path, n: int = 24, seed: int = 5, noisy: bool = False):
    """``n`` sentences of test_tagging's toy task as CoNLL (a word and its tag per line, a blank line between).
    ``noisy``: tags the toy tagger gets wrong, so precision, recall and F1 differ: in every 3rd sentence the first
    "film" or "movie" is a B-LOC (a miss), in every 4th the entities are O (found where the file has none)."""
    from test_tagging import entity_rows

    lines = []
    for i, text in enumerate(entity_rows(n, seed=seed)):
        words = text.split(" ")
        tags = ["B-" + ENTITIES[w] if w in ENTITIES and not (noisy and i % 4 == 0) else "O" for w in words]
        if noisy and i % 3 == 0:
            first = next((k for k, w in enumerate(words) if w in ("film", "movie")), None)
            if first is not None:
                tags[first] = "B-LOC"
        lines += [f"{w}\t{t}" for w, t in zip(words, tags)] + [""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.fixture
def heads_registry(tiny_model_dir, models_dir):
    """A registry of two taggers with the same tags, one with other tags, a classifier and a question answerer."""
    from test_answering import build_qa
    from test_tagging import BIO, IO, build_tagger

    build_qa("bert", models_dir / "qa")
    build_tagger("bert", models_dir / "tagger-a", BIO)
    build_tagger("bert", models_dir / "tagger-b", BIO, seed=1)
    build_tagger("bert", models_dir / "tagger-io", IO)
    shutil.copytree(tiny_model_dir, models_dir / "single")
    return models_dir


def test_compare_with_lists_only_models_of_the_same_head_and_says_why_not_the_others(heads_registry):
    """Compare with compared label sets only: a tagger with two tags could be offered to a two-class classifier
    (which compare_taggers and evaluate_file refuse), and a classifier to a tagger. Now each head is offered its
    own kind, and the note names the others with the reason."""
    from bertviz_app.ui import evaluate_reader, evaluate_tagger

    h = evaluate_handlers(heads_registry)
    out = h.suggest("tagger-a")
    values = [v for _, v in out["compare"]["choices"] if v]
    assert values == ["tagger-b"]  # the same tags, never itself, no classifier
    info = out["compare"]["info"]
    assert "another tagger with the tags O, B-PER, I-PER, B-LOC, I-LOC" in info
    assert re.search(r"(: |; )[^;]*\bsingle\b[^;]*\(a sequence classifier\)", info), info
    assert "tagger-io (other tags)" in info and "qa (a question answering model)" in info
    assert "tagger-a (the model evaluated)" in info
    assert out["start"]["interactive"] is True and out["file_hint"] == evaluate_tagger.TAGGER_FILE
    assert out["columns_row"]["visible"] is False and out["geometry"]["visible"] is False
    assert out["upload"]["label"] == evaluate_tagger.TAGGER_UPLOAD
    out = h.suggest("single")  # a classifier: the taggers left out, as token classifiers
    assert not [v for _, v in out["compare"]["choices"] if v.startswith("tagger")]
    assert re.search(r"tagger-a, tagger-b, tagger-io \(a token classifier\)", out["compare"]["info"]), out["compare"]
    assert "qa (a question answering model)" in out["compare"]["info"]
    assert out["file_hint"] == evaluate_tagger.CLASSIFIER_FILE and out["columns_row"]["visible"] is True
    out = h.suggest("qa")  # a reader: evaluated on a SQuAD file, its upload and hint say so
    assert out["start"]["interactive"] is True and out["file_hint"] == evaluate_reader.READER_FILE
    assert out["upload"]["label"] == evaluate_reader.READER_UPLOAD and out["columns_row"]["visible"] is False
    # ... and compared only with other readers: the taggers and the classifier left out by their heads
    assert [v for _, v in out["compare"]["choices"] if v] == []  # the only reader here is the one evaluated
    assert out["compare"]["info"].startswith("another question answering model, on the same questions")
    assert "(a token classifier)" in out["compare"]["info"] and "qa (the model evaluated)" in out["compare"]["info"]


def test_evaluate_reads_a_tagged_file_for_a_tagger_and_shows_its_scores_unstored(heads_registry, tmp_path):
    import gradio as gr

    from bertviz_app.evaluate.tagger_evaluation import compare_taggers, evaluate_tagged
    from bertviz_app.ui import evaluate_events
    from bertviz_app.ui.streaming import CancelFlag

    from conftest import as_uploaded

    h = evaluate_handlers(heads_registry)
    path = write_entity_conll(tmp_path / "test.conll")
    up = h.on_upload(as_uploaded(path), "tagger-a")
    assert "24 sentences" in up["notices"] and "entity types: LOC, PER" in up["notices"]
    run = lambda model, table, compare="", refused=None: list(h.run(  # noqa: E731
        CancelFlag(), model, table, refused, None, None, "", "", compare, False))
    outs = run("tagger-a", up["table"])
    out = outs[-1]
    want = evaluate_tagged(load(heads_registry / "tagger-a"), str(path))
    assert out["tagger_box"]["visible"] is True and out["classifier_box"]["visible"] is False
    assert f"**{want.entity_f1:.3f}**" in out["tag_summary"] and "not stored" in out["tag_summary"]
    assert "Not stored" in out["status"] and "stored" not in out  # the stored list is not touched
    assert list(out["tag_types"]["type"]) == list(want.per_type)
    assert outs[0]["status"].startswith("**Starting")  # then the progress, counted in sentences:
    assert "5 of 10 sentences" in evaluate_events.progress_line(5, 10, None, unit="sentences")
    assert not (heads_registry / "evaluations").is_dir() or not any((heads_registry / "evaluations").iterdir())
    # with a second tagger of the same tags: the paired comparison
    out = run("tagger-a", up["table"], compare="tagger-b")[-1]
    cmp = compare_taggers(load(heads_registry / "tagger-a"), load(heads_registry / "tagger-b"), str(path))
    assert f"B − A **{cmp.difference:+.3f}**" in out["tag_comparison"]
    # the file read for a tagger, then a classifier chosen: said plainly, nothing run
    out = run("single", up["table"])[-1]
    assert "read as tagged words" in out["status"] and "tag_summary" not in out
    # ... and put away as soon as the classifier is chosen (Evaluate is not offered a file it would refuse)
    put = h.file_for_model("single", up["table"])
    assert put["table"] is None and put["upload"] is None and "tagged file read for a tagger was put away" in (
        put["notices"])
    kept = h.file_for_model("tagger-b", up["table"])  # positive control: another tagger keeps it
    assert all(v == gr.skip() for v in kept.values()), kept
    # a bad tagged file: the reader's refusal with its line, in the status line; the file cleared
    bad = tmp_path / "bad.conll"
    bad.write_text("the\tO\njoy\n\nit\tO\n", encoding="utf-8")
    up = h.on_upload(as_uploaded(bad), "tagger-a")
    assert up["table"] is None and up["upload"] is None and "line 2" in up["status"] and "no tag" in up["status"]
    out = run("tagger-a", None, refused=up["refused"])[-1]  # Evaluate then: the refusal again, not "upload a file"
    assert "no tag" in out["status"] and "Nothing was stored" in out["status"]
    # a classifier's table given to the tagger: the library's refusal (it names the other task), no traceback
    table = tmp_path / "reviews.csv"
    table.write_text("text,label\nthe film was joy,positive\nthe film was a slog,negative\n", encoding="utf-8")
    up = h.on_upload(as_uploaded(table), "tagger-a")
    assert up["table"] is None and "text-classification" in up["status"] and "Traceback" not in up["status"]


def test_explain_a_file_greys_start_for_a_tagger_and_offers_it_for_a_classifier(heads_registry, tmp_path):
    from bertviz_app.ui import batch_tab

    ui = SimpleNamespace(start="start", model_note="model_note")
    h = batch_tab.Handlers(ui, default="x", settings=bv.Settings(models_dir=heads_registry, memo_size=0))
    out = h.model_state("tagger-a")
    assert out["start"]["interactive"] is False
    assert "tagger-a is a tagger" in out["model_note"] and "Explain a file reads sequence classifiers" in (
        out["model_note"])
    assert "press Analyze, then open Attributions" in out["model_note"]  # where the page explains its entities
    table = tmp_path / "texts.csv"
    table.write_text("text\nthe film was joy\nthe film was a slog\n", encoding="utf-8")
    with pytest.raises(bv.InputError, match="sequence classification"):  # what Start met: it reads classifiers
        bv.explain_csv(load(heads_registry / "tagger-a"), str(table), tmp_path / "out.csv")
    out = h.model_state("qa")  # another head: greyed too, named
    assert out["start"]["interactive"] is False and "qa is a question answering model" in out["model_note"]
    out = h.model_state("single")  # positive control
    assert out["start"]["interactive"] is True and out["model_note"] == ""
