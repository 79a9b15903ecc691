"""A DistilBERT and a RoBERTa classifier folder, opened as the app's model in a real browser:
every tab works (Predict, Attention, Attributions with the methods side by side, Model,
Fine-tune, Explain a file). The folders are the tiny random models of test_families (their own
tokenizer classes; no downloads)."""

from __future__ import annotations

import os

import pytest

from conftest import CHROMIUM, served_app, start_finetune  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_families import build_family_model  # noqa: E402
from test_finetune_ui import write_csv  # noqa: E402

TIMEOUT_MS = 120_000
ARCH = {"distilbert": "DistilBertForSequenceClassification", "roberta": "RobertaForSequenceClassification"}


@pytest.mark.parametrize("family", ["distilbert", "roberta"])
def test_every_tab_works_on_another_family(browser, family, tmp_path_factory, tmp_path):
    folder = build_family_model(family, tmp_path_factory.mktemp("family-app") / family)
    expect = sync_api.expect
    with served_app(str(folder), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp(f"{family}-registry")) as url:
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        page.locator("#bv-text textarea").fill("the film was awful , not fun")
        page.locator("#bv-analyze").click()
        page.wait_for_selector("#bv-predict-tokens .bv-tok")
        expect(page.locator("#bv-label")).to_contain_text("positive")
        expect(page.locator("#bv-predict-tokens .bv-line")).to_contain_text("awful")

        page.get_by_role("tab", name="Attention").click()
        page.wait_for_selector("#bv-heatmap .js-plotly-plot .heatmaplayer")
        page.wait_for_selector("#bv-overview .js-plotly-plot .heatmaplayer")

        page.get_by_role("tab", name="Attributions").click()
        expect(page.locator("#bv-delta")).to_contain_text("convergence delta", timeout=TIMEOUT_MS)
        expect(page.locator("#bv-delta")).to_contain_text("Faithfulness")
        page.wait_for_selector("#bv-cls-path .js-plotly-plot .heatmaplayer")
        page.wait_for_selector("#bv-cls-lens .js-plotly-plot")
        page.locator("#bv-compare").click()
        expect(page.locator("#bv-compare-table [role=row]")).to_have_count(7, timeout=TIMEOUT_MS)
        expect(page.locator("#bv-compare-tokens .bv-line")).to_have_count(6)

        page.get_by_role("tab", name="Model").click()
        expect(page.locator("#bv-model-summary")).to_contain_text(ARCH[family])

        # Explain a file, then fine-tune from this folder: both end with their results
        table = tmp_path / "rows.csv"
        table.write_text("review\nthe film was good\na tedious slog !\nit is not fun\n", encoding="utf-8")
        page.get_by_role("tab", name="Explain a file").click()
        page.locator("#bv-bx-upload input[type=file]").set_input_files(str(table))
        # the upload read first (as the page asks: "check the text column, then start"); a Start pressed while the
        # file is still on its way runs with no file, and the upload's line then replaces that run's refusal
        expect(page.locator("#bv-bx-status")).to_contain_text("3 rows, 1 columns", timeout=TIMEOUT_MS)
        page.locator("#bv-bx-start").click()
        expect(page.locator("#bv-bx-status")).to_contain_text("3 of 3 rows explained", timeout=TIMEOUT_MS)

        page.get_by_role("tab", name="Fine-tune").click()
        page.locator("#bv-ft-upload input[type=file]").set_input_files(str(write_csv(tmp_path / "train.csv", n=32)))
        expect(page.locator("#bv-ft-report")).to_contain_text("Ready to train")
        start_finetune(page, folder, epochs=1, batch=8)
        expect(page.locator("#bv-ft-status")).to_contain_text("Done", timeout=TIMEOUT_MS)
        expect(page.locator("#bv-ft-metrics")).to_contain_text("Accuracy")
        assert "Traceback" not in page.content()
        ctx.close()
