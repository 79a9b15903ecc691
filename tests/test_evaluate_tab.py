"""The Evaluate tab's pure parts (issue 21, the page part): a stored evaluation's folder read back and
drawn (summary, slices, misclassified rows, reliability diagram, [CLS] geometry scatter and probes),
and the handlers that send a chosen row or a clicked point to the Predict tab. Runs on the tiny model;
no browser (tests/test_browser_evaluate.py drives the page)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from test_evaluation_runs import labelled_csv

import bertviz_app as bv
from bertviz_app.evaluate import evaluation_runs as er

from conftest import as_uploaded

pytest.importorskip("gradio")
from bertviz_app.ui import evaluate_events, evaluate_view, uploads  # noqa: E402


def _with_formula_rows(data: bytes) -> bytes:
    """Two rows a spreadsheet would run as formulas (predictions.csv quotes them, the page shows them as given)
    and one of HTML (shown as text, never run)."""
    return data + b'"=1+1 the film was good",positive,web\n"-not fun",negative,shop\n<img src=x> film,positive,web\n'


@pytest.fixture(scope="module")
def other(tmp_path_factory):
    """A second tiny model with the same classes and other weights (the comparison's B)."""
    from conftest import make_tiny_model

    return bv.load_model(str(make_tiny_model(tmp_path_factory.mktemp("other") / "other-bert", seed=1)),
                         device="cpu", settings=bv.Settings(memo_size=0))


@pytest.fixture(scope="module")
def stored(tiny, other, tmp_path_factory):
    """An evaluation with every part (geometry, comparison) stored and read back as the page reads it."""
    models = tmp_path_factory.mktemp("eval-view")
    ev = bv.evaluate_file(tiny, _with_formula_rows(labelled_csv(40)), name="reviews.csv", words=("not",),
                          layers=True, compare_with=other)
    saved = er.save(ev, models)
    return ev, saved, evaluate_view.load_run(saved.folder, saved.name)


def test_the_folder_reads_back_every_evaluated_row_as_given(stored):
    ev, _, view = stored
    assert [r["row"] for r in view.rows] == list(ev.source_rows)
    assert [r["text"] for r in view.rows] == list(ev.texts)  # "=1+1 ..." and "-not fun" unquoted
    assert [r["true"] for r in view.rows] == [ev.labels[i] for i in ev.true]
    assert [r["predicted"] for r in view.rows] == [ev.labels[i] for i in ev.predicted]
    conf = ev.probs[np.arange(ev.rows), ev.predicted]
    np.testing.assert_allclose([r["confidence"] for r in view.rows], conf, atol=1e-5)
    assert len(evaluate_view.wrong_rows(view)) == int((ev.true != ev.predicted).sum())
    md = evaluate_view.summary_md(view)
    assert "43 rows" in md and f"Accuracy {ev.accuracy:.1%}" in md and "95% interval" in md


def test_selecting_a_slice_lists_only_its_misclassified_rows(stored):
    ev, _, view = stored
    frame = evaluate_view.slices_frame(view)
    assert list(frame.columns) == evaluate_view.SLICE_COLUMNS and len(frame) == len(ev.slices)
    assert list(frame["slice"]) == [s.name for s in ev.slices]  # worst first, as the evaluation sorted them
    members = er.slice_members(ev)
    wrong = {ev.source_rows[i] for i in np.flatnonzero(ev.true != ev.predicted)}
    for k, s in enumerate(ev.slices):
        i = evaluate_view.pick_slice(view, [s.kind, s.name, s.size])
        assert i == k
        got = evaluate_view.slice_rows(view, i)
        assert {r["row"] for r in got} == set(members[k]) & wrong, s.name
        assert len(got) == s.size - s.correct
        assert [r["confidence"] for r in got] == sorted((r["confidence"] for r in got), reverse=True)
        assert frame.iloc[k]["misclassified"] == len(got)
    word = next(i for i, s in enumerate(view.slices) if s["kind"] == "word")
    assert all("not" in r["text"].split() for r in evaluate_view.slice_rows(view, word))


def test_the_reliability_diagram_has_the_diagonal_and_before_and_after(stored):
    ev, _, view = stored
    fig = evaluate_view.reliability_figure(view)
    names = [t.name for t in fig.data]
    assert names[0] == "perfectly calibrated" and list(fig.data[0].x) == [0, 1] and list(fig.data[0].y) == [0, 1]
    assert names[1].startswith("before") and names[2].startswith(f"after (T = {ev.calibration['temperature']:.3f}")
    before = [b for b in ev.reliability["before"] if b["count"]]
    np.testing.assert_allclose(fig.data[1].x, [b["confidence"] for b in before], atol=1e-9)
    np.testing.assert_allclose(fig.data[1].y, [b["accuracy"] for b in before], atol=1e-9)
    assert sum(fig.data[1].customdata) == ev.calibration["measured_on_rows"]
    md = evaluate_view.calibration_md(view)
    assert f"{ev.calibration['ece']:.3f}" in md and f"{ev.calibration['ece_after']:.3f}" in md
    assert f"Temperature fitted on {ev.calibration['fitted_on_rows']} rows" in md


def test_the_scatter_has_one_point_per_row_with_its_text_and_labels(stored):
    ev, _, view = stored
    assert view.layers == [0, 1, 2]
    for colour in ("true", "predicted", "correct", "confidence"):
        fig = evaluate_view.scatter_figure(view, 2, 2, colour)
        assert {t.type for t in fig.data} == {"scattergl"}
        ids = np.concatenate([np.asarray(t.customdata) for t in fig.data])
        assert sorted(ids.tolist()) == list(range(ev.rows)), colour
    fig = evaluate_view.scatter_figure(view, 1, 2, "true")
    coords = view.projections[(1, "cls")]
    for t in fig.data:
        idx = np.asarray(t.customdata)
        np.testing.assert_allclose(t.x, coords[idx, 0], atol=1e-6)
        for i, hover in zip(idx, t.hovertext):
            r = view.rows[i]
            assert f"row {r['row']}:" in hover and f"true {r['true']}" in hover
            assert f"predicted {r['predicted']}" in hover
    long = max(view.rows, key=lambda r: len(r["text"]))
    html = next(h for t in fig.data for h in t.hovertext if "img" in h)
    assert "&lt;img src=x&gt;" in html and "<img" not in html
    fig3 = evaluate_view.scatter_figure(view, 2, 3, "correct", "mean")
    assert {t.type for t in fig3.data} == {"scatter3d"}
    np.testing.assert_allclose(np.concatenate([t.z for t in fig3.data]).size, ev.rows)
    assert long["text"][:20] in " ".join(h for t in fig.data for h in t.hovertext)
    # another layer: other coordinates, from the stored projections (no model)
    assert not np.allclose(evaluate_view.scatter_figure(view, 0, 2, "true").data[0].x, fig.data[0].x)


def test_the_probe_chart_has_both_vectors_by_layer(stored):
    _, saved, view = stored
    stored_probes = json.loads((saved.folder / "layers.json").read_text())["layers"]
    fig = evaluate_view.probes_figure(view, 1)
    assert [t.name for t in fig.data] == ["[CLS] vector", "mean word vector"]
    assert list(fig.data[0].x) == [0, 1, 2]
    np.testing.assert_allclose(fig.data[0].y, [p["cls_probe_accuracy"] for p in stored_probes])
    assert all(0 <= y <= 1 for t in fig.data for y in t.y)


def test_no_geometry_says_how_to_get_it(tiny, models_dir):
    ev = bv.evaluate_file(tiny, labelled_csv(24), name="small.csv")
    view = evaluate_view.load_run(er.save(ev, models_dir).folder)
    assert view.projections is None and view.probes is None
    fig = evaluate_view.scatter_figure(view, 1)
    assert "tick" in fig.layout.annotations[0].text


def test_a_damaged_folder_says_which_file(stored, tmp_path):
    import shutil

    _, saved, _ = stored
    copy = tmp_path / saved.name
    shutil.copytree(saved.folder, copy)
    (copy / "predictions.csv").unlink()
    with pytest.raises(bv.DataError, match="no predictions.csv"):
        evaluate_view.load_run(copy)
    (copy / "metrics.json").write_text("{not json")
    with pytest.raises(bv.DataError, match="metrics.json cannot be read"):
        evaluate_view.load_run(copy)


def test_words_and_the_progress_line():
    assert evaluate_events.parse_words(" not, but ;not bad,, not") == ["not", "but", "not bad"]
    assert evaluate_events.parse_words(None) == []
    assert evaluate_events.progress_line(50, 200, None) == ("**Evaluating:** 50 of 200 rows (25%) · time left: "
                                                            "measuring...")
    assert "about 12 s left" in evaluate_events.progress_line(50, 200, 12.2)
    assert "cancelling" in evaluate_events.progress_line(50, 200, 12.2, cancelling=True)


def test_a_chosen_row_or_a_clicked_point_goes_to_predict(stored):
    import gradio as gr

    _, _, view = stored
    text, pair, tabs = object(), object(), object()
    h = evaluate_events.Handlers(SimpleNamespace(), default="x", settings=bv.Settings(), predict_text=text,
                              predict_pair=pair, tabs=tabs)
    row = evaluate_view.wrong_rows(view)[0]
    assert evaluate_view.pick_row(view, [row["row"], row["text"]]) is row
    out = h.to_predict(row)
    assert out[text] == row["text"] and out[pair] == "" and out[tabs].selected == "predict"
    assert h.to_attributions(row)[tabs].selected == "attributions"
    linked = evaluate_events.Handlers(SimpleNamespace(), default="x", settings=bv.Settings(), predict_text=text,
                                   predict_pair=pair, tabs=tabs, link_tab="link-tab")
    assert linked.to_attributions(row)["link-tab"] == "attributions"  # the page's link follows the tab opened
    assert linked.on_point(view, "bad")["link-tab"] == gr.skip()
    open_tab = {"tab": "other"}  # the page's record of the open tab, which its Analyze reads
    h.to_attributions(row, open_tab)
    assert open_tab == {"tab": "attributions"}
    out = h.on_point(view, "3:1700000000000")
    assert out[text] == view.rows[3]["text"]
    with pytest.raises(bv.InputError, match="Select a row"):
        h.to_predict(None)
    for bad in (None, "", "x:1", "999999:1", "-1:2"):
        assert h.on_point(view, bad)[text] == gr.skip()  # nothing happens, no error


# --------------------------------------------------------------------------- the /evaluate endpoint
@pytest.fixture(scope="module")
def client(tiny_model_dir, tmp_path_factory):
    from gradio_client import Client

    from conftest import served_app

    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("eval-api")) as url:
        yield Client(url, verbose=False)


def test_the_evaluate_endpoint_answers_the_evaluation_json(client, tiny, tmp_path):
    from gradio_client import handle_file

    path = tmp_path / "reviews.csv"
    path.write_bytes(labelled_csv(40))
    got = client.predict(handle_file(str(path)), "", "", "", "not, film", api_name="/evaluate")
    ref = bv.evaluate_file(tiny, path, words=("not", "film")).to_dict()
    assert got["rows"] == 40 and got["columns"] == {"text": "text", "label": "label", "pair": None}
    assert got["accuracy"] == pytest.approx(ref["accuracy"], abs=1e-9)
    assert [s["name"] for s in got["slices"]] == [s["name"] for s in ref["slices"]]
    assert any(s["kind"] == "word" and s["value"] == "film" for s in got["slices"])
    assert got["calibration"]["ece"] == pytest.approx(ref["calibration"]["ece"], abs=1e-6)


def test_the_evaluate_endpoint_refuses_bad_input_with_a_message(client, tmp_path):
    from gradio_client import handle_file

    spam = tmp_path / "spam.csv"
    spam.write_text("text,label\nthe film,spam\nthe movie,ham\n", encoding="utf-8")
    with pytest.raises(Exception, match="not among the model's 2 classes"):
        client.predict(handle_file(str(spam)), api_name="/evaluate")
    texts = tmp_path / "texts.csv"
    texts.write_text("text,source\nthe film,web\nthe movie,shop\n", encoding="utf-8")
    with pytest.raises(Exception, match="[Ll]abel"):
        client.predict(handle_file(str(texts)), "text", "", api_name="/evaluate")


def test_the_endpoint_reads_only_files_uploaded_with_the_call(tmp_path):
    """gradio_client uploads a local file; a request naming a path on the server is refused unread."""
    secret = tmp_path / "secret.csv"
    secret.write_text("text,label\nthe film,positive\n", encoding="utf-8")
    for fake in ({"path": str(secret), "meta": {"_type": "gradio.FileData"}}, {"path": "/etc/passwd"},
                 {"path": "/tmp/gradio/../../etc/passwd"}, "reviews.csv"):
        with pytest.raises(bv.InputError, match="not a path on the server"):
            uploads.upload_path(fake)
    for nothing in (None, {}, {"path": ""}):
        with pytest.raises(bv.InputError, match="Send a file"):
            uploads.upload_path(nothing)


def test_public_mode_lists_and_opens_only_the_visitors_own(stored, monkeypatch, tmp_path):
    """The tab's stored list and Open, for two visitors of a public app: each sees and opens only theirs."""
    import dataclasses

    from bertviz_app.ui import visitor

    ev, _, _ = stored
    settings = dataclasses.replace(bv.Settings(), public=True, models_dir=tmp_path)
    alice, bob = "a" * 64, "b" * 64
    mine = er.save(ev, tmp_path, owner=alice)
    ui = SimpleNamespace(stored="stored", compare="compare", status="status", **{k: k for k in (
        "view", "selected", "selected_md", "summary", "per_class", "confusion", "slices", "slice_md", "slice_rows",
        "wrong", "calibration", "save_t", "save_t_md", "reliability", "geometry_box", "layer", "scatter", "probes",
        "dims", "colour", "vector", "compare_box", "comparison", "disagreements", "compare_slices", "classifier_box",
        "tagger_box")})
    h = evaluate_events.Handlers(ui, default="x", settings=settings, predict_text="t", predict_pair="p", tabs="tabs")
    monkeypatch.setattr(visitor, "owner", lambda: alice)
    assert [v for _, v in h.choices()] == [mine.name]
    assert "Opened" in h.open_stored(mine.name)["status"]
    monkeypatch.setattr(visitor, "owner", lambda: bob)
    assert h.choices() == []
    with pytest.raises(bv.ModelNotFoundError, match="No evaluation"):
        h.open_stored(mine.name)
    monkeypatch.setattr(visitor, "owner", lambda: "nobody")  # a page whose visitor is not known yet
    with pytest.raises(bv.InputError, match="reload the page"):
        h.open_stored(mine.name)


def test_a_table_lists_at_most_the_cap(stored):
    _, _, view = stored
    many = [dict(view.rows[0], row=i) for i in range(evaluate_view.MAX_LISTED + 5)]
    assert len(evaluate_view.rows_frame(many)) == evaluate_view.MAX_LISTED
    # the verdict first, the texts (as given) last: a long text cannot push the labels out of view
    assert list(evaluate_view.rows_frame(many[:3], pairs=True).columns) == ["row", "true", "predicted", "confidence",
                                                                           "text", "second text"]


def _handlers(models_dir, public=False):
    names = ("table", "refused", "notices", "text_col", "label_col", "pair_col", "status", "stored", "compare", "view",
             "selected", "selected_md", "summary", "per_class", "confusion", "slices", "slice_md", "slice_rows",
             "wrong", "calibration", "save_t", "save_t_md", "reliability", "geometry_box", "layer", "scatter", "probes",
             "dims", "colour", "vector", "compare_box", "comparison", "disagreements", "compare_slices", "start",
             "model_note", "file_hint", "columns_row", "geometry", "words", "classifier_box", "tagger_box",
             "tag_summary", "tag_types", "tag_comparison", "tag_slices", "tag_errors")
    ui = SimpleNamespace(**{k: k for k in ("upload", *names)})
    settings = bv.Settings(models_dir=models_dir, memo_size=0, public=public)
    return evaluate_events.Handlers(ui, default="x", settings=settings, predict_text="t", predict_pair="p", tabs="tabs")


def test_the_evaluate_handler_stores_and_draws_or_says_why_not(tiny_model_dir, models_dir, tmp_path):
    from bertviz_app.ui.streaming import CancelFlag

    h = _handlers(models_dir)
    path = tmp_path / "reviews.csv"
    path.write_bytes(labelled_csv(30))
    up = h.on_upload(as_uploaded(path))
    assert up["text_col"]["value"] == "text" and up["label_col"]["value"] == "label" and "30 rows" in up["notices"]
    run = lambda flag, table, geometry=False, label="label": list(h.run(  # noqa: E731
        flag, str(tiny_model_dir), table, None, "text", label, "", "not", "", geometry))
    out = run(CancelFlag(), up["table"], geometry=True)[-1]
    [entry] = er.list_evaluations(models_dir)
    assert out["status"].startswith(f"**Done:** stored as **{entry['name']}**")
    assert out["stored"]["value"] == entry["name"] and out["view"].name == entry["name"]
    assert out["view"].layers == [0, 1, 2] and out["geometry_box"]["visible"] is True
    assert out["layer"]["maximum"] == 2
    # cancelled before the first batch: nothing stored, and the status says so
    flag = CancelFlag()
    flag.event.set()
    out = run(flag, up["table"])[-1]
    assert out["status"].startswith("**Cancelled:**") and len(er.list_evaluations(models_dir)) == 1
    # one class: evaluated and stored, the geometry skipped with the reason
    one = bv.read_table(b"text,label\nthe film was good,positive\nthe film was fun,positive\n", "one.csv")
    out = run(CancelFlag(), one, geometry=True)[-1]
    assert "**Done:**" in out["status"] and "No geometry" in out["status"]
    assert out["geometry_box"]["visible"] is False
    # no file, no label column: the status says what to do, nothing is stored
    assert "Upload a labelled file first" in run(CancelFlag(), None)[-1]["status"]
    assert "Choose the label column" in run(CancelFlag(), up["table"], label="")[-1]["status"]
    assert len(er.list_evaluations(models_dir)) == 2
    refused = h.on_upload(as_uploaded(_zip(tmp_path)))
    assert refused["table"] is None and refused["notices"].startswith("**Error:**")
    assert "ZIP archive" in refused["refused"]
    # the refused file is cleared (it does not look uploaded) and the status line says why and what to do
    assert refused["upload"] is None and "ZIP archive" in refused["status"]
    assert "Fix the file and upload it again" in refused["status"]
    assert up["status"] == "" and "upload" not in up  # positive control: a good file stays, the line is cleared


def test_the_fitted_temperature_is_saved_into_the_models_folder_and_predict_applies_it(tiny_model_dir, models_dir,
                                                                                       tmp_path, monkeypatch):
    from bertviz_app.models.calibration import load_temperature
    from bertviz_app.ui import model_loading, visitor
    from bertviz_app.ui.streaming import CancelFlag

    from conftest import make_overconfident_copy

    # an over-confident model (the tiny one's logits x1000: near-certain, right half the time): T helps
    folder = make_overconfident_copy(tiny_model_dir, tmp_path / "mine")  # the fixture's model stays as it is
    h = _handlers(models_dir)
    path = tmp_path / "reviews.csv"
    path.write_bytes(labelled_csv(40))
    up = h.on_upload(as_uploaded(path))
    out = list(h.run(CancelFlag(), str(folder), up["table"], None, "text", "label", "", "", "", False))[-1]
    view, t = out["view"], out["view"].metrics["calibration"]["temperature"]
    assert t is not None and out["save_t"]["visible"] is True and view.metrics["calibration"]["helps"] is True
    assert "**Worth keeping:** T = " in out["calibration"] and "helps on the 20 rows" in out["calibration"]
    said = h.save_temperature(view)
    assert f"T = {t:.3f}" in said and "calibration.json" in said
    assert load_temperature(folder) == pytest.approx(t, rel=1e-9)
    saved = json.loads((folder / "calibration.json").read_text())
    assert saved["fitted_on"]["rows"] == view.metrics["calibration"]["fitted_on_rows"] and view.name in \
        saved["fitted_on"]["source"]
    lm = model_loading.load(str(folder), "x", h.settings)
    assert lm.temperature == pytest.approx(t)  # the loaded model applies it at once
    raw = bv.predict(lm, ["the film was good"], calibrated=False)[0].probs
    scaled = bv.predict(lm, ["the film was good"])[0].probs
    assert scaled == pytest.approx(bv.rescale_probs(np.array(raw), t).tolist(), abs=1e-5)
    with pytest.raises(bv.InputError, match="first"):
        h.save_temperature(None)
    # public mode: a shared model's temperature is not the visitor's to change
    monkeypatch.setattr(visitor, "owner", lambda: "a" * 64)
    with pytest.raises(bv.InputError, match="only into your own"):
        _handlers(models_dir, public=True).save_temperature(view)


def test_a_temperature_that_did_not_help_is_not_offered_and_saving_it_is_refused(tiny, tiny_model_dir, models_dir,
                                                                                tmp_path):
    import dataclasses
    import shutil

    from test_evaluation import hurting_csv

    from bertviz_app.ui.streaming import CancelFlag

    folder = shutil.copytree(tiny_model_dir, tmp_path / "mine")  # the fixture's model stays as it is
    h = _handlers(models_dir)
    path = tmp_path / "hurts.csv"
    path.write_text(hurting_csv(tiny, 40), encoding="utf-8")
    up = h.on_upload(as_uploaded(path))
    out = list(h.run(CancelFlag(), str(folder), up["table"], None, "text", "label", "", "", "", False))[-1]
    view, c = out["view"], out["view"].metrics["calibration"]
    assert c["temperature"] is not None and c["helps"] is False and c["nll_after"] > c["nll"]
    assert out["save_t"]["visible"] is False  # not offered
    md = out["calibration"]
    assert f"after (T = {c['temperature']:.3f})" in md and f"{c['nll_after']:.3f}" in md  # the numbers stay visible
    assert "**Not worth keeping:** T = " in md and "does not help on the 20 rows it was not fitted on" in md
    assert "not offered for saving" in md
    # an old page (or a direct call) that still clicks Save is refused with the reason; nothing written
    with pytest.raises(bv.InputError, match=r"This temperature is not saved: T = \S+ does not help .*\(higher\)"):
        h.save_temperature(view)
    assert not (folder / "calibration.json").exists()
    # a stored evaluation from before the judging (no "helps" saved) is judged from its numbers the same way
    old = dataclasses.replace(view, metrics={**view.metrics, "calibration": {
        k: v for k, v in c.items() if k not in ("helps", "judgement")}})
    assert evaluate_view.temperature_judgement(old) == (False, c["judgement"])  # what render's Save button follows
    with pytest.raises(bv.InputError, match="does not help"):
        h.save_temperature(old)


def _zip(tmp_path):
    import zipfile

    path = tmp_path / "data.csv"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("data.csv", "text,label\nthe film,positive\n")
    return path


def test_the_comparison_shows_both_models_counts_and_differences(stored):
    ev, _, view = stored
    c = ev.comparison
    md = evaluate_view.comparison_md(view)
    assert f"{c.accuracy[0]:.1%}" in md and f"{c.accuracy[1]:.1%}" in md
    assert f"only A right **{c.only_a_correct:,}**" in md and f"only B right **{c.only_b_correct:,}**" in md
    assert f"p = {c.mcnemar_p:.3g}" in md and "McNemar" in md
    assert c.models[0] in c.reading and c.models[0] not in md  # the reading's model folders shown by their name
    assert c.only_a_correct + c.only_b_correct + c.both_correct + c.both_wrong == ev.rows
    rows = evaluate_view.disagreement_frame(view)
    assert len(rows) == c.disagreements and list(rows["row"]) == [d["row"] for d in c.disagreeing_rows]
    assert evaluate_view.pick_row(view, [rows.iloc[0]["row"] if len(rows) else ev.source_rows[0]]) is not None
    slices = evaluate_view.comparison_frame(view)
    assert list(slices["slice"]) == [s["name"] for s in c.slices]
    for (_, r), s in zip(slices.iterrows(), c.slices):
        assert r["B - A"] == f"{s['difference'] * 100:+.1f} points"


def test_a_runs_base_is_offered_for_the_comparison_when_it_has_the_same_classes(tiny_model_dir, models_dir,
                                                                                  tmp_path):
    import shutil

    from conftest import make_tiny_model

    def run(name: str, base: str):
        dest = models_dir / "runs" / name
        shutil.copytree(tiny_model_dir, dest)
        (dest / "run.json").write_text(json.dumps({"name": f"runs/{name}", "base": base}))

    run("tuned", str(tiny_model_dir))  # trained from the tiny classifier: the same classes
    three = make_tiny_model(tmp_path / "three", num_labels=3)
    run("other-classes", str(three))  # a base with other classes: no before/after pair
    h = _handlers(models_dir)
    offered = h.suggest("runs/tuned")["compare"]
    assert offered["value"] == str(tiny_model_dir)
    assert (evaluate_events.shown_name(str(tiny_model_dir)), str(tiny_model_dir)) in offered["choices"]
    assert h.suggest("runs/other-classes")["compare"]["value"] == ""
    assert h.suggest(str(tiny_model_dir))["compare"]["value"] == ""  # not a run: nothing to compare by default
    assert h.suggest("runs/missing")["compare"]["value"] == ""  # an unknown model: no suggestion, no error


def test_compare_with_offers_only_models_with_the_same_classes_and_never_the_model_itself(tiny_model_dir, models_dir,
                                                                                          tmp_path):
    """Issue 36: the list offered models the evaluation then refused ("... do not have the same classes");
    now a model of other classes (the bare encoder's LABEL_0/LABEL_1, a 3-class run) and the evaluated model
    itself are left out, and the control's note says which and why. The control: a copy with the same classes
    is offered."""
    import shutil

    from conftest import make_tiny_model

    shutil.copytree(tiny_model_dir, models_dir / "runs" / "same-classes")
    make_tiny_model(models_dir / "runs" / "three-classes", num_labels=3)
    shutil.copytree(tiny_model_dir, models_dir / "itself")
    h = _handlers(models_dir)
    offered = h.suggest("itself")["compare"]
    values = [v for _, v in offered["choices"]]
    assert "runs/same-classes" in values
    for refused in ("runs/three-classes", "itself", bv.ENCODER):
        assert refused not in values
    assert "runs/three-classes" in offered["info"] and "other classes" in offered["info"]
    assert "itself (the model evaluated)" in offered["info"]
    assert bv.ENCODER in offered["info"]  # the bare encoder: LABEL_0/LABEL_1, not these classes
    # the page-load refresh offers the same list for the chosen model
    assert h.refresh(None, "itself")["compare"]["choices"] == offered["choices"]
    # a model that cannot be opened offers nothing to compare with, and says so
    assert [v for _, v in h.suggest("runs/missing")["compare"]["choices"]] == [""]


def test_a_large_scatter_draws_a_fixed_sample(stored, monkeypatch):
    _, _, view = stored
    monkeypatch.setattr(evaluate_view, "MAX_POINTS", 10)
    fig = evaluate_view.scatter_figure(view, 1, 2, "correct")
    ids = sorted(np.concatenate([np.asarray(t.customdata) for t in fig.data]).tolist())
    assert len(ids) == 10 and ids == evaluate_view.shown_points(len(view.rows)).tolist()
    assert f"10 of {len(view.rows)} rows, a random sample" in fig.layout.title.text
    other = evaluate_view.scatter_figure(view, 0, 2, "true")  # the same rows at every layer and colouring
    assert sorted(np.concatenate([np.asarray(t.customdata) for t in other.data]).tolist()) == ids


def test_the_stored_list_names_model_file_rows_and_accuracy(stored, tiny_model_dir):
    ev, saved, _ = stored
    [(label, name)] = evaluate_view.stored_choices(er.list_evaluations(saved.folder.parent.parent))
    assert name == saved.name and label.startswith(saved.name)
    assert f"folder {tiny_model_dir.name}" in label and str(tiny_model_dir) not in label  # no server path
    assert "reviews.csv" in label and f"{ev.rows} rows" in label and f"accuracy {ev.accuracy:.1%}" in label
