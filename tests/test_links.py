"""Shareable links (issue 21) without a browser: the view written as a query and read back
(``bertviz_app.service.links``), every crafted value left out with its one-line reason, public mode's
runs, and the page's restore handler (``ui.links.restore_view``) on the tiny model."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import types
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from bertviz_app.config import Settings
from bertviz_app.errors import ModelNotFoundError
from bertviz_app.models import visitors
from bertviz_app.service.links import (
    MAX_QUERY_CHARS,
    Link,
    ModelShape,
    View,
    build_query,
    openable_models,
    read_link,
    share_query,
)

SHAPE = ModelShape(num_layers=6, num_heads=12, labels=("NEGATIVE", "POSITIVE"))
RAW_ONLY = ModelShape(num_layers=6, num_heads=12, labels=("NEGATIVE", "POSITIVE"), measures=("raw",))


def read(query, settings=None, shape=SHAPE, **kw) -> Link:
    return read_link(query, settings or Settings(), "default", lambda name: shape, **kw)


def test_every_field_comes_back_as_it_was_written():
    views = [
        View(model="default", text="A gorgeous, moving film: 100% a joy & more + <b>", pair="second text?",
             tab="attention", target="POSITIVE", methods=("integrated_gradients", "occlusion", "alti"),
             measure="norm", layer=3, head=2),
        View(model="default", text="ünïcödé ✓ / slash, comma", tab="attributions", measure="alti", layer=6),
        View(model="default", tab="evaluate", run="eval-20260101-120000-my-run-v2"),
        View(),  # nothing: the page as it opens
    ]
    for view in views:
        link = read(build_query(view))
        assert link.view == view and link.ignored == () and link.notice() == ""


def test_the_query_is_readable_and_leaves_defaults_out():
    view = View(model="default", text="a film", tab="attention", layer=3, head=2, measure="alti", target="POSITIVE",
                methods=("integrated_gradients",))
    assert build_query(view) == ("model=default&text=a%20film&tab=attention&target=POSITIVE&method=ig&measure=alti"
                                 "&layer=3&head=2")
    assert build_query(View(model="runs/x", text="good")) == "model=runs/x&text=good"
    # "ig" and the registered names are read, in any case and with "-" for "_"
    assert read("method=IG,Kernel-SHAP").view.methods == ("integrated_gradients", "kernel_shap")


def test_a_script_in_the_text_comes_back_as_the_same_string():
    text = '<script>window.__pwned=1</script><img src=x onerror="alert(1)"> & "quotes"'
    query = build_query(View(text=text, pair="</textarea><b>"))
    assert "<" not in query and '"' not in query  # percent-encoded in the link
    link = read(query)
    assert link.view.text == text and link.view.pair == "</textarea><b>" and not link.ignored


@pytest.mark.parametrize("query, ignored, field", [
    ("model=no-such-model", "model 'no-such-model' (not a registered model)", "model"),
    ("model=../../etc", "model '../../etc' (not a registered model)", "model"),
    ("model=/etc/passwd", "model '/etc/passwd' (not a registered model)", "model"),
    ("model=owner/hub-model", "model 'owner/hub-model' (not a registered model)", "model"),
    ("layer=40", "layer 40 (the model has 6 layers: 1-6)", "layer"),
    ("layer=0", "layer 0 (the model has 6 layers: 1-6)", "layer"),
    ("layer=three", "layer 'three' (a whole number: the model has 6 layers: 1-6)", "layer"),
    ("head=13", "head 13 (the model has 12 heads: 1-12)", "head"),
    ("head=-1", "head -1 (the model has 12 heads: 1-12)", "head"),
    ("measure=alti&head=2", "head 2 (ALTI is measured per layer, not per head)", "head"),
    ("measure=attention_flow", "measure 'attention_flow' (measures: raw, norm, value_zeroing, alti)", "measure"),
    ("tab=settings", "tab 'settings' (tabs: predict, attention, attributions, model, finetune, batch, evaluate)",
     "tab"),
    ("target=MAYBE", "target 'MAYBE' (the model's classes: NEGATIVE, POSITIVE)", "target"),
    ("method=magic", "method 'magic' (methods: ig, gradient_x_input", "methods"),
    ("tab=evaluate&run=../../etc", "run '../../etc' (not an evaluation's name, eval-YYYYMMDD-HHMMSS-name)", "run"),
    ("tab=evaluate&run=eval-20260101-120000-" + "x" * 65, "run 'eval-20260101-120000-xxxxxxxxxxxxxxxxxx\u2026' (not "
     "an evaluation's name", "run"),  # a long value is cut in the message
    ("run=eval-20260101-120000-mine", "run 'eval-20260101-120000-mine' (read with tab=evaluate only)", "run"),
    ("tab=evaluate&run=eval-20260101-120000-mine%0A", "run 'eval-20260101-120000-mine\\n' (not an evaluation's name",
     "run"),
    ("layer=" + "9" * 5000, "layer '" + "9" * 39 + "\u2026' (a whole number", "layer"),  # cut at 40 characters
    ("colour=red", "parameter 'colour' (links carry only model, text, pair, tab, target, method, measure", None),
    ("layer=2&layer=3", "layer given 2 times (the first is read)", None),
])
def test_each_crafted_value_is_ignored_with_its_reason(query, ignored, field):
    link = read(query)
    assert len(link.ignored) == 1 and link.ignored[0].startswith(ignored), link.ignored
    assert link.notice() == "From the link: ignored " + link.ignored[0] and "\n" not in link.notice()
    if field is not None:
        assert getattr(link.view, field) == getattr(View(), field)  # the default stands, nothing of the value
    else:
        assert link.view.layer in (1, 2)


def test_several_ignored_values_make_one_line_and_the_rest_is_restored():
    link = read("model=../../etc&text=%3Cscript%3Ex%3C/script%3E&tab=attention&layer=40&head=3")
    assert link.notice() == ("From the link: ignored model '../../etc' (not a registered model); "
                             "layer 40 (the model has 6 layers: 1-6)")
    assert link.view == View(text="<script>x</script>", tab="attention", head=3)


def test_a_thousand_bad_parameters_still_make_one_short_line():
    link = read("&".join(f"p{i}=x" for i in range(1000)) + "&layer=2")
    assert link.view.layer == 2 and len(link.ignored) == 1000
    assert link.notice().endswith("; and 992 more") and link.notice().count("parameter 'p") == 8


def test_text_past_max_chars_is_ignored_whole():
    settings = Settings(max_chars=100)
    link = read(build_query(View(text="a" * 101, pair="short")), settings)
    assert link.view.text == "" and link.view.pair == "short"
    assert link.ignored == ("the text (101 characters; this app reads at most 100)",)
    link = read(build_query(View(text="ok", pair="b" * 5000)), settings)
    assert link.view.pair == "" and link.ignored == ("the second text (5,000 characters; this app reads at most 100)",)


def test_a_measure_the_models_family_lacks_is_ignored():
    link = read("measure=value_zeroing&head=2", shape=RAW_ONLY)
    assert link.view.measure == "raw" and link.view.head == 2  # raw attention has the model's heads
    assert link.ignored == ("measure 'value_zeroing' (this model's family supports only raw)",)


def test_a_model_that_cannot_be_opened_is_ignored_and_the_pages_model_checked_instead(models_dir):
    (models_dir / "broken").mkdir()
    (models_dir / "broken" / "config.json").write_text("{}")
    settings = Settings(models_dir=models_dir)

    def shape_of(name):
        if name == "broken":
            raise ModelNotFoundError("its weights are missing")
        return SHAPE

    link = read_link("model=broken&layer=6", settings, "default", shape_of)
    assert link.view.model is None and link.view.layer == 6
    assert link.ignored == ("model 'broken' (it could not be opened: its weights are missing)",)

    def nothing(name):
        raise ModelNotFoundError("no model")

    link = read_link("text=good&layer=2&target=POSITIVE", settings, "default", nothing)
    assert link.view == View(text="good")
    assert link.ignored == ("layer (no model could be opened to check it against)",
                            "target (no model could be opened to check it against)")


def test_registered_models_open_and_nothing_else(models_dir):
    for name in ("mine", "runs/run1"):
        (models_dir / name).mkdir(parents=True)
        (models_dir / name / "config.json").write_text("{}")
    settings = Settings(models_dir=models_dir)
    assert {"default", "mine", "runs/run1"} <= set(openable_models(settings, "default"))
    assert read("model=mine", settings).view.model == "mine"
    assert read("model=runs/run1", settings).view.model == "runs/run1"  # local mode: every run
    outside = models_dir.parent / "outside"
    outside.mkdir()
    for name in (str(outside), str(models_dir / "mine"), "runs/../mine", "mine/..", ""):
        link = read(f"model={name}", settings)
        assert link.view.model is None
        if not name:
            assert link.ignored == ()
            continue
        (said,) = link.ignored  # a long value cut at 40 characters
        assert said.startswith("model '" + name[:30]) and said.endswith("' (not a registered model)")


def fake_run(runs: Path, name: str, owner: str | None) -> None:
    p = runs / name
    p.mkdir(parents=True)
    (p / "config.json").write_text("{}")
    (p / "run.json").write_text(json.dumps({"name": f"runs/{name}", **({"owner": owner} if owner else {})}))


def test_public_mode_a_link_opens_only_the_visitors_own_runs(models_dir):
    a, b = visitors.owner_hash(visitors.new_token()), visitors.owner_hash(visitors.new_token())
    fake_run(models_dir / "runs", "a1", a)
    fake_run(models_dir / "runs", "b1", b)
    fake_run(models_dir / "runs", "cli", None)
    settings = Settings(models_dir=models_dir, public=True)
    assert read("model=runs/a1", settings, owner=a).view.model == "runs/a1"
    for name, who in (("runs/b1", a), ("runs/a1", b), ("runs/cli", a), ("runs/a1", None),
                      ("runs/../runs/a1", a), ("/tmp", a), ("../models/runs/a1", a)):
        link = read(f"model={name}", settings, owner=who)
        assert link.view.model is None, (name, who)
        assert link.ignored == (f"model {name!r} (not a registered model)",)  # the same words for every one
    assert "runs/b1" not in openable_models(settings, "default", a)


def test_a_long_text_is_left_out_of_the_shared_link():
    short = View(model="default", text="good", tab="attention")
    assert share_query(short) == (build_query(short), "")
    long = View(model="default", text="é" * 3000, tab="attention", layer=2)
    query, note = share_query(long)
    assert len(build_query(long)) > MAX_QUERY_CHARS and len(query) <= MAX_QUERY_CHARS
    assert parse_qs(query) == {"model": ["default"], "tab": ["attention"], "layer": ["2"]}
    assert "too long for a link (3,000 characters)" in note


def test_the_link_module_imports_no_gradio():
    code = "import sys, bertviz_app.service.links; print('gradio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- the page's restore handler
@pytest.fixture()
def page(tiny_model_dir, settings):
    import gradio as gr

    from bertviz_app.ui import Page

    with gr.Blocks():
        return Page(settings, str(tiny_model_dir))


def test_restoring_sets_the_view_and_escapes_what_the_page_shows(page, tiny_model_dir):
    from bertviz_app.ui import attention_tab, links

    model = str(tiny_model_dir)
    text = "<script>window.__pwned=1</script> a good film"
    query = build_query(View(model=model, text=text, tab="attention", layer=2, head=2, measure="norm",
                             target="positive", methods=("occlusion",)))
    out = links.restore_view(page, "?" + query + "&model=x&layer=9", model, "(predicted class)", "pad")
    a, t, p, ln = page.a, page.t, page.p, page.links
    assert out[p.text] == text  # the Textbox shows it as text
    assert out[ln.pending] is True and out[ln.run] is None
    assert out[page.open_tab] == {"tab": "attention"} and out[ln.tab] == "attention"
    assert out[page.tabs].selected == "attention"
    assert out[a.layer]["value"] == 2 and out[a.layer]["maximum"] == 2
    assert out[a.head]["value"] == "head 2" and out[a.head]["choices"] == [attention_tab.LAYER, "head 1", "head 2"]
    assert out[a.measure]["value"] == "norm" and out[page.chosen_measure] == {"measure": "norm"}
    assert out[t.target]["value"] == "positive" and out[t.cmp.methods] == ["occlusion"]
    assert out[ln.notice] == "**From the link: ignored model given 2 times (the first is read); layer given 2 " \
                             "times (the first is read)**"
    # a crafted name is shown escaped, never as HTML
    out = links.restore_view(page, "model=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E", model, "(predicted class)",
                             "pad")
    assert "<img" not in out[ln.notice] and "&lt;img src=x onerror=alert(1)&gt;" in out[ln.notice]
    assert out[ln.pending] is False and p.text not in out


def test_no_query_changes_nothing(page, tiny_model_dir):
    from bertviz_app.ui import links

    assert links.restore_view(page, "", str(tiny_model_dir), None, "pad") == {page.links.pending: False}
    assert links.restore_view(page, "?", str(tiny_model_dir), None, "pad") == {page.links.pending: False}


def test_the_current_view_is_what_the_page_shows(page, tiny_model_dir):
    from bertviz_app.ui import analysis, attention_tab, control_values, links

    lm = page.load(str(tiny_model_dir))
    rec = analysis.analyze_fast(lm, "the film was good", "a joy")
    view = links.current_view(rec, "other-model", "typed, not analysed", "", "attention", control_values.PREDICTED,
                              ["integrated_gradients"], "raw", 2, "head 1")
    assert view == View(model=str(tiny_model_dir), text="the film was good", pair="a joy", tab="attention",
                        methods=("integrated_gradients",), layer=2, head=1)
    before = links.current_view(None, "default", "typed", "", None, "positive", [], "alti", None,
                                attention_tab.LAYER)
    assert before == View(model="default", text="typed", target="positive", measure="alti")
    assert dataclasses.replace(before, methods=None) == before
    assert links.current_view(None, "m", "", "", "predict", None, None, "raw", 3.0, None).layer == 3  # raw slider
    # the Evaluate tab's shown evaluation is in the link there, and only there
    shown = types.SimpleNamespace(name="eval-20260101-120000-default")
    on_eval = links.current_view(None, "default", "", "", "evaluate", None, None, "raw", 1, None, shown)
    assert on_eval.run == shown.name and "run=eval-20260101-120000-default" in build_query(on_eval)
    assert links.current_view(None, "default", "", "", "predict", None, None, "raw", 1, None, shown).run is None
    assert links.current_view(None, "default", "", "", "evaluate", None, None, "raw", 1, None, None).run is None


def test_the_open_tab_follows_the_fine_tune_tabs_send_to_explorer(tiny_model_dir, settings):
    """That handler opens the Predict tab itself (no select event): the link's tab follows it."""
    import gradio as gr

    from bertviz_app.ui import Page, links

    with gr.Blocks() as demo:
        page = Page(settings, str(tiny_model_dir))
        page.wire(demo)
    followers = [fn for fn in demo.fns.values() if (page.f.send._id, "click") in fn.targets
                 and page.links.tab in fn.outputs]
    assert len(followers) == 1 and followers[0].inputs == [page.f.selected]
    assert links.sent_to_predict({"text": "a row"}) == "predict"
    assert isinstance(links.sent_to_predict(None), type(gr.skip()))


def test_no_unqueued_event_writes_a_state_that_others_listen_to(tiny_model_dir, settings):
    """gradio's page (6.31) fires a State's change only after a queued event: one written by an unqueued event
    (queue=False) changes silently, and the link box stayed on the tab shown before (a flaky browser test found
    it). So every event whose outputs hold a State with change listeners is queued. Control: the link's tab State
    is such a State, written by the tab select (queued) and listened to by the link."""
    import gradio as gr

    from bertviz_app.ui import build_app

    demo = build_app(settings, str(tiny_model_dir))
    deps = demo.get_config_file()["dependencies"]
    states = {c._id for c in demo.blocks.values() if isinstance(c, gr.State)}
    listened = {t for d in deps for t, event in d["targets"] if event == "change" and t in states}
    silent = [(d["id"], d["targets"], [o for o in d["outputs"] if o in listened]) for d in deps
              if not d["queue"] and set(d["outputs"]) & listened]
    assert silent == []
    tabs = next(c for c in demo.blocks.values() if isinstance(c, gr.Tabs))
    tab_writers = [d for d in deps if (tabs._id, "select") in map(tuple, d["targets"])
                   and set(d["outputs"]) & listened]
    assert len(tab_writers) == 1 and tab_writers[0]["queue"] is True
