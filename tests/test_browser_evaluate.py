"""The Evaluate tab in a real browser (Playwright + the system Chromium): upload a labelled CSV, evaluate the
tiny model on it, read the accuracy and the slices, open a misclassified row in Predict, see the [CLS]
geometry scatter and move its layer, click a point, reopen the stored evaluation in a fresh page; and bad
files answered in the tab with a message, never a traceback (on the page or in the server's log)."""

from __future__ import annotations

import csv
import json
import logging
import os
import random
import re
import zipfile

import pytest

from bertviz_app.evaluate import evaluation_runs as er

from conftest import CHROMIUM, open_page, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
expect = sync_api.expect

from bertviz_app.ui import evaluate_view  # noqa: E402

TIMEOUT_MS = 120_000
WORDS = {"negative": ["bad", "awful", "tedious", "slog"], "positive": ["good", "great", "fun", "gorgeous"]}


def write_labelled(path, n=40, labels=("negative", "positive"), header=("review", "label", "source")):
    rng = random.Random(1)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i in range(n):
            lab = labels[i % len(labels)]
            words = ["the", "film", "was", *(["not"] if i % 3 == 0 else []),
                     rng.choice(WORDS.get(lab, WORDS["negative"]))]
            w.writerow([" ".join(words), lab, rng.choice(["web", "shop"])][:len(header)])
    return path


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """The app's models folder, holding one registered model ("other": the tiny model with other weights)."""
    from conftest import make_tiny_model

    models = tmp_path_factory.mktemp("eval-browser-registry")
    make_tiny_model(models / "other", seed=1)
    return models


@pytest.fixture(scope="module")
def app_url(tiny_model_dir, registry):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=registry) as url:
        yield url


def open_tab(page, url):
    page.goto(url)
    page.get_by_role("tab", name="Evaluate").click()


def plot_data(page, elem_id):
    """The data of the plotly figure drawn in ``elem_id`` (first trace's x and every trace's point count)."""
    return page.evaluate(f"""() => {{
        const gd = document.querySelector('#{elem_id} .js-plotly-plot');
        if (!gd || !gd._fullData) return null;
        const full = gd._fullData;  // plotly's decoded traces (numpy arrays arrive base64-packed in gd.data)
        return {{x0: Array.from(full[0].x || []).slice(0, 5).map(Number), points: full.map((t) => t._length),
                 types: full.map((t) => t.type), title: gd._fullLayout.title && gd._fullLayout.title.text}};
    }}""")


def test_evaluate_read_slices_open_a_row_see_geometry_and_reopen(browser, page, app_url, registry, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    data = write_labelled(tmp_path / "reviews.csv")
    open_tab(page, app_url)
    page.locator("#bv-ev-upload input[type=file]").set_input_files(str(data))
    expect(page.locator("#bv-ev-notices")).to_contain_text("40 rows")
    expect(page.locator("#bv-ev-text-col input")).to_have_value("review")
    expect(page.locator("#bv-ev-label-col input")).to_have_value("label")
    page.locator("#bv-ev-words input, #bv-ev-words textarea").first.fill("not")
    page.locator("#bv-ev-geometry input[type=checkbox]").check()
    page.locator("#bv-ev-start").click()
    status = page.locator("#bv-ev-status")
    expect(status).to_contain_text("Done", timeout=TIMEOUT_MS)

    entry = er.list_evaluations(registry)[0]
    view = evaluate_view.load_run(registry / "evaluations" / entry["name"])
    expect(status).to_contain_text(entry["name"])
    # the page's link names the evaluation it shows
    page.wait_for_function("(n) => location.search.includes('run=' + n) && location.search.includes('tab=evaluate')",
                           arg=entry["name"])
    link = page.url
    expect(page.locator("#bv-ev-summary")).to_contain_text(f"Accuracy {view.metrics['accuracy']:.1%}")
    expect(page.locator("#bv-ev-summary")).to_contain_text("95% interval")
    # a temperature was fitted (40 rows, two classes); Save is offered only if it helped on the other rows
    helps, why = evaluate_view.temperature_judgement(view)
    save_t = expect(page.locator("#bv-ev-save-t"))
    save_t.to_be_visible() if helps else save_t.to_be_hidden()
    expect(page.locator("#bv-ev-calibration")).to_contain_text("Worth keeping:" if helps else "Not worth keeping:")
    expect(page.locator("#bv-ev-calibration")).to_contain_text(why.split(":")[0])  # "T = ... help(s) on the N rows"
    slices = page.locator("#bv-ev-slices")
    expect(slices).to_contain_text("true label negative")
    expect(slices).to_contain_text("contains")

    # a slice chosen: its misclassified rows listed
    worst = view.slices[0]
    slices.locator("[role=gridcell]").nth(1).click()
    expect(page.locator("#bv-ev-slice-md")).to_contain_text(worst["name"])
    expect(page.locator("#bv-ev-slice-md")).to_contain_text(f"{len(evaluate_view.slice_rows(view, 0))} misclassified")

    # the most confident misclassified row opens in Predict
    wrong = evaluate_view.wrong_rows(view)
    assert wrong, "the tiny model gets some of these rows wrong"
    page.locator("#bv-ev-wrong [role=gridcell]").first.click()
    expect(page.locator("#bv-ev-selected")).to_contain_text(f"Selected row {wrong[0]['row']}")
    page.locator("#bv-ev-to-predict").click()
    expect(page.locator("#bv-text textarea")).to_have_value(wrong[0]["text"])
    page.get_by_role("tab", name="Evaluate").click()
    # in Attributions: the row is analysed and that tab drawn for it
    page.locator("#bv-ev-wrong [role=gridcell]").nth(5).click()  # the second row's first cell
    expect(page.locator("#bv-ev-selected")).to_contain_text(f"Selected row {wrong[1]['row']}")
    page.locator("#bv-ev-to-attributions").click()
    expect(page.get_by_role("tab", name="Attributions")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#bv-text textarea")).to_have_value(wrong[1]["text"])
    # nothing was analysed on this page before: these are the row's own attributions
    expect(page.locator("#bv-attr-tokens")).to_contain_text(wrong[1]["text"].split()[-1], timeout=TIMEOUT_MS)
    page.wait_for_selector("#bv-attr-bar .js-plotly-plot .barlayer")
    page.get_by_role("tab", name="Evaluate").click()

    # geometry: the scatter at the last layer, one point per row; another layer redraws it from the stored data
    page.wait_for_function("() => { const gd = document.querySelector('#bv-ev-scatter .js-plotly-plot');"
                           " return gd && gd.data && gd.data.length > 0; }")
    first = plot_data(page, "bv-ev-scatter")
    assert sum(first["points"]) == 40 and set(first["types"]) == {"scattergl"} and "layer 2" in first["title"]
    probes = plot_data(page, "bv-ev-probes")
    assert probes["points"] == [3, 3]
    page.locator("#bv-ev-layer input[type=range]").fill("0")
    page.wait_for_function("() => { const gd = document.querySelector('#bv-ev-scatter .js-plotly-plot');"
                           " return gd && gd.layout.title.text.includes('embeddings'); }")
    assert plot_data(page, "bv-ev-scatter")["x0"] != first["x0"]
    page.locator("#bv-ev-dims").get_by_text("3-D").click()
    page.wait_for_function("() => { const gd = document.querySelector('#bv-ev-scatter .js-plotly-plot');"
                           " return gd && gd.data[0].type === 'scatter3d'; }")
    # a point clicked (plotly's own click event) opens its row in Predict
    page.wait_for_timeout(700)  # the click bridge hooks the redrawn plot within 300 ms
    page.evaluate("() => document.querySelector('#bv-ev-scatter .js-plotly-plot')"
                  ".emit('plotly_click', {points: [{customdata: 7}]})")
    expect(page.locator("#bv-text textarea")).to_have_value(view.rows[7]["text"])
    assert "Traceback" not in page.content()

    # a fresh page: the stored evaluation is in the list and draws the same page
    fresh = open_page(browser, TIMEOUT_MS)
    try:
        open_tab(fresh, app_url)
        stored = fresh.locator("#bv-ev-stored input")
        stored.click()
        option = fresh.get_by_role("option", name=re.compile(re.escape(entry["name"])))
        expect(option.first).to_be_visible()
        option.first.click()
        fresh.locator("#bv-ev-open").click()
        expect(fresh.locator("#bv-ev-status")).to_contain_text(f"Opened {entry['name']}")
        expect(fresh.locator("#bv-ev-summary")).to_contain_text(f"Accuracy {view.metrics['accuracy']:.1%}")
        expect(fresh.locator("#bv-ev-slices")).to_contain_text("true label negative")
        fresh.wait_for_function("() => { const gd = document.querySelector('#bv-ev-scatter .js-plotly-plot');"
                                " return gd && gd.data && gd.data.length > 0; }")
        assert sum(plot_data(fresh, "bv-ev-scatter")["points"]) == 40
    finally:
        fresh.context.close()
    # the link copied after the evaluation opens the same evaluation in a fresh page, on the Evaluate tab
    linked = open_page(browser, TIMEOUT_MS)
    try:
        linked.goto(link)
        expect(linked.get_by_role("tab", name="Evaluate")).to_have_attribute("aria-selected", "true")
        expect(linked.locator("#bv-ev-summary")).to_contain_text(f"Accuracy {view.metrics['accuracy']:.1%}")
        expect(linked.locator("#bv-ev-slices")).to_contain_text("true label negative")
    finally:
        linked.context.close()
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the server log"


@pytest.mark.parametrize("case", ["no label column", "zip renamed .csv", "labels the model lacks"])
def test_bad_files_get_a_message_in_the_tab(page, app_url, tmp_path, caplog, case):
    caplog.set_level(logging.WARNING)
    if case == "no label column":
        path = tmp_path / "texts.csv"
        path.write_text("review\n" + "".join(f"the film was good {i}\n" for i in range(10)), encoding="utf-8")
        says = "label"
    elif case == "zip renamed .csv":
        path = tmp_path / "data.csv"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("data.csv", "review,label\nthe film,positive\n")
        says = "zip"
    else:
        path = write_labelled(tmp_path / "spam.csv", n=12, labels=("spam", "ham"))
        says = "not among the model's"
    open_tab(page, app_url)
    page.locator("#bv-ev-upload input[type=file]").set_input_files(str(path))
    page.wait_for_timeout(500)
    page.locator("#bv-ev-start").click()
    status = page.locator("#bv-ev-status")
    expect(status).to_contain_text("Error", timeout=TIMEOUT_MS)
    expect(status).to_contain_text(re.compile(says, re.IGNORECASE))
    expect(status).to_contain_text("Nothing was stored")
    assert "Traceback" not in page.content()
    assert page.locator(".toast-title").count() == 0
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the server log"


def test_compare_with_another_model(page, app_url, registry, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    data = write_labelled(tmp_path / "reviews.csv")
    open_tab(page, app_url)
    page.locator("#bv-ev-upload input[type=file]").set_input_files(str(data))
    expect(page.locator("#bv-ev-label-col input")).to_have_value("label")
    compare = page.locator("#bv-ev-compare input")
    compare.click()
    page.get_by_role("option", name="other", exact=True).click()
    expect(compare).to_have_value("other")
    page.locator("#bv-ev-start").click()
    expect(page.locator("#bv-ev-status")).to_contain_text("Done", timeout=TIMEOUT_MS)
    name = page.locator("#bv-ev-status strong").nth(1).inner_text()
    view = evaluate_view.load_run(registry / "evaluations" / name)
    c = view.comparison
    box = page.locator("#bv-ev-comparison")
    expect(box).to_contain_text("McNemar")
    expect(box).to_contain_text(f"only B right {c['only_b_correct']:,}")
    expect(page.locator("#bv-ev-compare-slices")).to_contain_text("points")
    if c["disagreeing_rows"]:  # a disagreeing row opens in Predict
        first = c["disagreeing_rows"][0]
        page.locator("#bv-ev-disagreements [role=gridcell]").first.click()
        expect(page.locator("#bv-ev-selected")).to_contain_text(f"Selected row {first['row']}")
        page.locator("#bv-ev-to-predict").click()
        expect(page.locator("#bv-text textarea")).to_have_value(first["text"])
    assert "Traceback" not in page.content()
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the server log"


def test_a_link_opens_a_stored_evaluation(page, app_url, registry, tiny, caplog):
    """``?tab=evaluate&run=<name>`` (the page's link hook) draws that evaluation; an unknown one is said."""
    import bertviz_app as bv

    caplog.set_level(logging.WARNING)
    ev = bv.evaluate_file(tiny, b"text,label\nthe film was good,positive\nthe film was bad,negative\n"
                                b"a great movie,positive\nan awful movie,negative\n", name="link.csv")
    saved = er.save(ev, registry)
    page.goto(f"{app_url}?tab=evaluate&run={saved.name}")
    expect(page.get_by_role("tab", name="Evaluate")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#bv-ev-status")).to_contain_text(f"Opened {saved.name}")
    expect(page.locator("#bv-ev-summary")).to_contain_text("link.csv")
    expect(page.locator("#bv-ev-stored input")).to_have_value(re.compile(re.escape(saved.name)))
    page.goto(f"{app_url}?tab=evaluate&run=eval-20990101-000000-gone")
    expect(page.locator("#bv-ev-status")).to_contain_text("From the link: No evaluation 'eval-20990101-000000-gone'")
    assert "Traceback" not in page.content()
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the server log"


@pytest.fixture(scope="module")
def public_url(tiny_model_dir, tmp_path_factory):
    models = tmp_path_factory.mktemp("eval-public-registry")
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=models, BERTVIZ_PUBLIC=1) as url:
        yield url, models


def test_public_mode_each_browser_sees_only_its_own_evaluations(browser, public_url, tmp_path, caplog):
    """Two browsers of a public app: A's evaluation is in A's list and opens from A's link; B's list is
    empty and A's link answers B as an evaluation that does not exist."""
    caplog.set_level(logging.WARNING)
    url, models = public_url
    data = write_labelled(tmp_path / "reviews.csv", n=12)
    a, b = open_page(browser, TIMEOUT_MS), open_page(browser, TIMEOUT_MS)
    try:
        open_tab(a, url)
        a.locator("#bv-ev-upload input[type=file]").set_input_files(str(data))
        expect(a.locator("#bv-ev-label-col input")).to_have_value("label")
        a.locator("#bv-ev-start").click()
        expect(a.locator("#bv-ev-status")).to_contain_text("Done", timeout=TIMEOUT_MS)
        [entry] = er.list_evaluations(models)
        name = entry["name"]
        assert json.loads((models / "evaluations" / name / "run.json").read_text())["owner"]  # stored as A's

        open_tab(b, url)
        b.locator("#bv-ev-stored input").click()
        expect(b.get_by_role("option", name=re.compile(re.escape(name)))).to_have_count(0)
        b.goto(f"{url}?tab=evaluate&run={name}")
        expect(b.locator("#bv-ev-status")).to_contain_text(f"From the link: No evaluation '{name}' among your "
                                                           "evaluations")
        expect(b.locator("#bv-ev-summary")).not_to_contain_text("reviews.csv")

        a.goto(f"{url}?tab=evaluate&run={name}")  # the same link in A's browser opens it
        expect(a.locator("#bv-ev-status")).to_contain_text(f"Opened {name}")
        for pg in (a, b):
            assert "Traceback" not in pg.content()
    finally:
        a.context.close()
        b.context.close()
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the server log"
