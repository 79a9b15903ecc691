"""The Fine-tune tab in a real browser (Playwright + the system Chromium, as tests/test_browser.py):
upload a CSV, train the tiny model for a few epochs, see the loss curve and the confusion matrix
drawn, send a misclassified row to the explorer. (docs/finetune.png is made by scripts/readme_images.py.)"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import CHROMIUM, open_page, served_app, start_finetune  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_finetune_ui import StandInRun, write_csv  # noqa: E402

TIMEOUT_MS = 120_000


@pytest.fixture(scope="module")
def app_url(tiny_model_dir, tmp_path_factory):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("ft-browser-registry")) as url:
        yield url


def test_upload_train_and_see_curves_and_confusion_matrix(browser, app_url, tiny_model_dir, tmp_path):
    csv_path = write_csv(tmp_path / "reviews.csv", n=48)
    page = open_page(browser, TIMEOUT_MS)
    page.goto(app_url)
    page.get_by_role("tab", name="Fine-tune").click()

    page.locator("#bv-ft-upload input[type=file]").set_input_files(str(csv_path))
    sync_api.expect(page.locator("#bv-ft-report")).to_contain_text("Ready to train")
    sync_api.expect(page.locator("#bv-ft-preview")).to_contain_text("the film was")
    sync_api.expect(page.locator("#bv-ft-text-col input")).to_have_value("review")
    sync_api.expect(page.locator("#bv-ft-label-col input")).to_have_value("sentiment")

    # the tiny model folder as the base (the app's default model is allowed)
    start_finetune(page, tiny_model_dir, "browser-run", epochs=3, batch=8, lr=0.0005)

    sync_api.expect(page.locator("#bv-ft-status")).to_contain_text("Done", timeout=TIMEOUT_MS)
    page.wait_for_selector("#bv-ft-curves .js-plotly-plot .scatterlayer .trace")
    page.wait_for_selector("#bv-ft-confusion .js-plotly-plot .heatmaplayer")
    sync_api.expect(page.locator("#bv-ft-metrics")).to_contain_text("Accuracy")
    sync_api.expect(page.locator("#bv-ft-metrics")).to_contain_text("runs/browser-run")
    assert "Traceback" not in page.content()

    # a misclassified row goes to the Predict tab (when the tiny model gets any wrong)
    # (gradio 6 draws a table's cells as role=gridcell divs; `tbody td` finds only a hidden sizing row)
    said = re.search(r"([\d,]+) misclassified", page.locator("#bv-ft-metrics").inner_text())
    wrong = int(said.group(1).replace(",", ""))
    if wrong:
        cells = page.locator("#bv-ft-wrong [role=gridcell]")
        sync_api.expect(cells.nth(2)).to_be_visible()
        cells.nth(2).click()
        sync_api.expect(page.locator("#bv-ft-selected")).to_contain_text("Selected row")
        page.locator("#bv-ft-send").click()
        sync_api.expect(page.locator("#bv-text textarea")).to_have_value(re.compile("the film was"))
    # the Model tab's dropdown now holds the new run, selected
    page.get_by_role("tab", name="Model").click()
    sync_api.expect(page.locator("#bv-model input")).to_have_value("runs/browser-run")
    page.context.close()


def test_after_a_reload_the_run_list_holds_the_run_and_its_buttons_wait_for_a_choice(browser, app_url, tiny_model_dir,
                                                                                      tmp_path):
    csv_path = write_csv(tmp_path / "reviews.csv", n=24)
    page = open_page(browser, TIMEOUT_MS)
    page.goto(app_url)
    page.get_by_role("tab", name="Fine-tune").click()
    page.locator("#bv-ft-upload input[type=file]").set_input_files(str(csv_path))
    sync_api.expect(page.locator("#bv-ft-report")).to_contain_text("Ready to train")
    start_finetune(page, tiny_model_dir, "reload-run", epochs=1, batch=8)
    sync_api.expect(page.locator("#bv-ft-status")).to_contain_text("Done", timeout=TIMEOUT_MS)

    # the page opened again at the app's plain address: a reload would also restore the view its address holds,
    # and that restore (a model load) can land after the tab click below and take the page back to Predict
    page.goto(app_url)
    page.get_by_role("tab", name="Fine-tune").click()
    page.get_by_text("Compare with the base model").click()
    page.get_by_text("Push to the Hugging Face Hub").click()
    buttons = [page.locator(f"#bv-ft-{b}") for b in ("zip", "cmp", "hub-push")]
    zip_btn, cmp_btn = buttons[:2]
    for button in buttons:  # no run chosen yet: nothing to download, compare or push
        sync_api.expect(button).to_be_disabled()
    run = page.locator("#bv-ft-run input")
    run.click()  # the list offers the run saved before the reload
    option = page.get_by_role("option", name="runs/reload-run")
    sync_api.expect(option.first).to_be_visible()
    option.first.click()
    sync_api.expect(run).to_have_value("runs/reload-run")
    for button in buttons:
        sync_api.expect(button).to_be_enabled()
    zip_btn.click()
    sync_api.expect(page.locator("#bv-ft-zip-file")).to_contain_text(".zip")
    page.locator("#bv-ft-cmp-text textarea").fill("the film was great !")
    cmp_btn.click()
    sync_api.expect(page.locator("#bv-ft-cmp-md")).to_contain_text("fine-tuned")
    assert page.locator("span.error").count() == 0, "error badges on the page"
    page.context.close()


@pytest.mark.parametrize("at_once", [True, False])
def test_cancel_leaves_the_page_saying_cancelled(browser, app_url, tiny_model_dir, tmp_path, monkeypatch, at_once):
    """Cancel says "Cancelling…" while the run winds down and "Cancelled" once it has stopped, and
    "Cancelled" stays, also when the run stops at once (the Cancel button's own "Cancelling…" could
    arrive after it and stay for good). The training is a stand-in that waits for the Cancel (and,
    winding down, for the test to have seen "Cancelling…"), so the test does not race a real run."""
    import threading

    from bertviz_app.train.finetune import job

    release = threading.Event()
    monkeypatch.setattr(job, "run_plan", StandInRun(quiet_ticks=0, release=None if at_once else release))
    csv_path = write_csv(tmp_path / "reviews.csv", n=24)
    page = open_page(browser, TIMEOUT_MS)
    streams = set()  # gradio's open event streams (/queue/data): none once every queued event has ended
    page.on("request", lambda r: streams.add(r) if "/queue/data" in r.url else None)
    page.on("requestfinished", lambda r: streams.discard(r))
    page.on("requestfailed", lambda r: streams.discard(r))
    try:
        page.goto(app_url)
        page.get_by_role("tab", name="Fine-tune").click()
        page.locator("#bv-ft-upload input[type=file]").set_input_files(str(csv_path))
        sync_api.expect(page.locator("#bv-ft-report")).to_contain_text("Ready to train")
        base = page.locator("#bv-ft-base input")
        base.fill(str(tiny_model_dir))
        base.press("Enter")
        page.locator("#bv-ft-start").click()
        status = page.locator("#bv-ft-status")
        sync_api.expect(status).to_contain_text("loss 0.6900", timeout=60_000)
        page.locator("#bv-ft-cancel").click()
        if not at_once:
            sync_api.expect(status).to_contain_text("Cancelling…", timeout=60_000)
            release.set()
        sync_api.expect(status).to_contain_text("Cancelled: stopped at step 1 of 100", timeout=60_000)
        for _ in range(TIMEOUT_MS // 100):  # the run's event, and what follows it, have ended: nothing more comes
            if not streams:
                break
            page.wait_for_timeout(100)
        assert not streams, "the page's event stream never closed"
        sync_api.expect(status).not_to_contain_text("Cancelling")
        sync_api.expect(status).to_contain_text("Cancelled: stopped at step 1 of 100")
        assert page.locator(".toast-title").count() == 0
    finally:
        release.set()  # a failed test lets the stand-in end (the served app outlives it)
        page.context.close()
