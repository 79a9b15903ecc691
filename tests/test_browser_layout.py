"""What matters is in view (issue 36), in a real browser (Playwright + the system Chromium, a 1280 x 900 page):
Evaluate's misclassified rows show the true label, the prediction and the confidence inside the table's box,
before the text (which comes back verbatim); a whole document's [CLS] chart draws a bounded number of columns;
the Fine-tune tab's past-runs headers sit on one line each and the Run dropdown shows a long run name whole,
clear of its label and its arrow; the ALTI overview draws one tile per layer, labelled by layer, no "H1"."""

from __future__ import annotations

import csv
import json
import os
import random
import shutil

import pytest

from bertviz_app.evaluate import evaluation_runs as er

from conftest import CHROMIUM, evaluate_file, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
expect = sync_api.expect

from bertviz_app.ui import evaluate_view, plots  # noqa: E402

TIMEOUT_MS = 120_000
WORDS = ["the", "film", "movie", "good", "bad", "great", "awful", "is", "was", "not", "gorgeous", "moving", "tedious",
         "slog", "fun", "it", "a"]
LONGEST_RUN = "sentiment-rotten-tomatoes-minilm-l6-lr5e-5-batch32-epochs3-probe"  # 64 characters: the most allowed


@pytest.fixture(scope="module")
def registry(tmp_path_factory, tiny_model_dir):
    """The app's models folder with past runs (copies of the tiny model with a run.json): two data sets, a
    long source name, three classes, a cancelled run and a run with the longest name allowed."""
    models = tmp_path_factory.mktemp("layout-registry")
    sets = [("rotten_tomatoes_corpus_full.csv", "3b622546aa", ["fresh", "rotten", "plot"]),
            ("reviews.csv", "abcdef0123", ["negative", "positive"])]
    for k, (src, h, labels) in enumerate(sets):
        for i, mode in enumerate(["probe", "full", "full"]):
            name = LONGEST_RUN if (k, i) == (0, 0) else f"{mode}-{h[:8]}-{k}{i}c4d5e6f"
            dest = models / "runs" / name
            shutil.copytree(tiny_model_dir, dest)
            (dest / "run.json").write_text(json.dumps({
                "name": f"runs/{name}", "base": str(tiny_model_dir), "mode": mode, "data_hash": h + "456789",
                "labels": labels, "train_rows": 10712, "val_rows": 1190, "cancelled": i == 2, "source": src,
                "metrics": {"accuracy": 0.8 + i / 10, "macro_f1": 0.79 + i / 10}}), encoding="utf-8")
    return models


@pytest.fixture(scope="module")
def app_url(tiny_model_dir, registry):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=registry) as url:
        yield url


def box(locator) -> dict:
    b = locator.bounding_box()
    assert b is not None, "the element is not drawn"
    return b


def analyze(page, text: str) -> None:
    page.get_by_role("tab", name="Predict").click()
    page.locator("#bv-text textarea").fill(text)
    page.locator("#bv-analyze").click()
    expect(page.locator("#bv-predict-tokens .bv-line")).to_contain_text(text.split()[0])
    expect(page.locator("#bv-analyze")).to_be_enabled()  # Integrated Gradients done too


def pick(page, selector: str, option: str) -> None:
    page.locator(f"{selector} input").click()
    choice = page.get_by_role("option", name=option, exact=True)
    expect(choice.first).to_be_visible()
    choice.first.click()


def test_misclassified_rows_show_label_prediction_and_confidence_inside_the_table(page, app_url, registry, tmp_path):
    rng = random.Random(0)
    data = tmp_path / "reviews.csv"
    with data.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["review", "label"])
        for i in range(40):  # texts of 30-60 words: each far wider than the table when unwrapped
            w.writerow([" ".join(rng.choices(WORDS, k=rng.randint(30, 60))), ["negative", "positive"][i % 2]])
    evaluate_file(page, app_url, data, TIMEOUT_MS)
    view = evaluate_view.load_run(registry / "evaluations" / er.list_evaluations(registry)[0]["name"])
    wrong = evaluate_view.wrong_rows(view)
    assert wrong, "the tiny model gets some of these rows wrong"

    table = page.locator("#bv-ev-wrong")
    table.scroll_into_view_if_needed()
    cells = table.locator("[role=gridcell]")
    expect(cells.first).to_have_text(str(wrong[0]["row"]))
    shown = box(table.locator(".virtual-table-viewport"))  # the table's visible box
    right = shown["x"] + shown["width"]
    headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
    text_col = headers.index("text")
    text_cell = box(cells.nth(text_col))
    for name in ("true", "predicted", "confidence"):
        i = headers.index(name)
        for b in (box(table.locator("thead th").nth(i)), box(cells.nth(i))):
            assert shown["x"] - 1 <= b["x"] and b["x"] + b["width"] <= right + 1, (name, b, shown)
            assert b["x"] + b["width"] <= text_cell["x"] + 1, (name, b, text_cell)  # before the text
    assert text_cell["x"] + text_cell["width"] <= right + 1  # the text wraps inside the box, not past it
    # the verdict cells say the row's verdict, and the text cell holds the text as the file gave it
    assert cells.nth(headers.index("true")).inner_text().strip() == wrong[0]["true"]
    assert cells.nth(headers.index("predicted")).inner_text().strip() == wrong[0]["predicted"]
    assert " ".join(cells.nth(text_col).inner_text().split()) == wrong[0]["text"]


def test_a_whole_documents_cls_chart_draws_a_bounded_number_of_columns(page, app_url):
    text = " ".join(random.Random(2).choices([*WORDS, ",", "."], k=900))  # ~900 tokens in 64-token windows
    page.goto(app_url)
    analyze(page, text)
    page.get_by_role("tab", name="Attention").click()
    page.locator("#bv-attn-doc-panel").get_by_text("Whole document (windows)").first.click()
    page.locator("#bv-attn-doc-run").click()
    expect(page.locator("#bv-attn-doc-reading")).to_contain_text("windows")
    page.wait_for_selector("#bv-attn-doc-cls .js-plotly-plot .heatmaplayer")
    drawn = page.evaluate("""() => { const gd = document.querySelector('#bv-attn-doc-cls .js-plotly-plot');
        return {columns: gd._fullData[0].x.length, title: gd._fullLayout.title.text,
                axis: gd._fullLayout.xaxis.title.text}; }""")
    assert 50 < drawn["columns"] <= plots.MAX_COLUMNS  # 902 tokens would be 902 sub-pixel columns
    assert "words a column" in drawn["title"] and "902 tokens in" in drawn["axis"]


def test_finetune_past_runs_headers_on_one_line_and_the_run_name_shown_whole(page, app_url):
    page.goto(app_url)
    page.get_by_role("tab", name="Fine-tune").click()
    table = page.locator("#bv-ft-runs")
    table.scroll_into_view_if_needed()
    expect(table.locator("[role=gridcell]").filter(has_text="rotten_tomatoes").first).to_be_visible()
    heads = page.evaluate("""() => Array.from(document.querySelectorAll('#bv-ft-runs thead th span.header')).map(
        (s) => [s.textContent.trim(), s.getBoundingClientRect().height, parseFloat(getComputedStyle(s).lineHeight)])""")
    assert len(heads) == 9 and ["probe accuracy", "full macro-F1"] == [heads[4][0], heads[8][0]]
    for name, height, line in heads:  # one line each (a header broken inside a word is two or more)
        assert height <= 1.5 * line, (name, height, line)
    viewport = table.locator(".virtual-table-viewport")
    assert viewport.evaluate("(e) => e.scrollWidth <= e.clientWidth + 1")  # no column pushed out of view

    # the Run dropdown: the longest run name allowed, whole, clear of the label above it and the arrow after it
    pick(page, "#bv-ft-run", f"runs/{LONGEST_RUN}")
    field = page.locator("#bv-ft-run input")
    expect(field).to_have_value(f"runs/{LONGEST_RUN}")
    g = page.evaluate("""() => { const e = document.querySelector('#bv-ft-run'); const i = e.querySelector('input');
        const c = document.createElement('canvas').getContext('2d'); const st = getComputedStyle(i);
        c.font = st.font;
        const r = (x) => { const b = x.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
        return {label: r(e.querySelector('[data-testid=block-info]')), input: r(i),
                arrow: r(e.querySelector('.icon-wrap')), text: c.measureText(i.value).width,
                pad: parseFloat(st.paddingLeft)}; }""")
    label, field_box, arrow = g["label"], g["input"], g["arrow"]
    assert label[3] <= field_box[1] or label[2] <= field_box[0]  # the label's box and the value's do not meet
    assert g["text"] > 300  # a long name (the check below is not met by a short one only)
    assert field_box[0] + g["pad"] + g["text"] <= min(field_box[2], arrow[0]) + 1, g  # the name ends before the arrow


def test_the_alti_overview_is_one_tile_per_layer_labelled_by_layer(page, app_url):
    page.goto(app_url)
    analyze(page, "the film was great , a joy")
    page.get_by_role("tab", name="Attention").click()
    title = page.locator("#bv-overview .js-plotly-plot .gtitle")
    expect(title).to_contain_text("All layers × heads")  # raw attention: the layers x heads grid
    expect(page.locator("#bv-overview .js-plotly-plot .xtick").filter(has_text="H1").first).to_be_attached()
    pick(page, "#bv-measure", "ALTI")
    expect(title).to_contain_text("ALTI: every layer")
    ticks = page.locator("#bv-overview .js-plotly-plot .xtick")
    expect(ticks).to_have_text(["layer 1", "layer 2"])
    assert not any(t.strip() == "H1" for t in ticks.all_text_contents())
    page.wait_for_selector("#bv-overview .js-plotly-plot .heatmaplayer")
