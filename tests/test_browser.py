"""The web UI in a real browser (Playwright + the system Chromium; no browser download).

The app runs in-process on a free port with the tiny model. The README's pictures are made by
scripts/readme_images.py; a case here runs it into a temporary folder (no test writes a tracked file)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import CHROMIUM, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

XSS = "<img src=x onerror=alert(1)>"
ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_MS = 90_000


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    return tmp_path_factory.mktemp("registry")


@pytest.fixture(scope="module")
def app_url(registry, tiny_model_dir):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=registry) as url:
        yield url


@pytest.fixture()
def page(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = ctx.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    pg.dialogs = []  # any alert()/confirm() fired by injected script lands here
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    yield pg
    ctx.close()


def analyze(page, url: str, text: str) -> None:
    page.goto(url)
    page.locator("#bv-text textarea").fill(text)
    page.locator("#bv-analyze").click()
    page.wait_for_selector("#bv-predict-tokens .bv-tok")


def test_analyze_shows_probabilities_heatmap_and_coloured_tokens(page, app_url):
    analyze(page, app_url, "the film was great , a joy !")
    label = page.locator("#bv-label")
    sync_api.expect(label).to_contain_text("positive")
    sync_api.expect(label).to_contain_text("negative")
    sync_api.expect(label).to_contain_text("%")
    page.wait_for_selector("#bv-prob-bar .js-plotly-plot .barlayer")  # plotly draws after the data arrives
    tokens = page.locator("#bv-predict-tokens .bv-tok")
    assert tokens.count() >= 9  # [CLS] + 7 words + [SEP] (+ legend swatches)
    assert "rgba(" in (tokens.first.get_attribute("style") or "")
    sync_api.expect(page.locator("#bv-predict-tokens .bv-line")).to_contain_text("great")

    page.get_by_role("tab", name="Attention").click()
    page.wait_for_selector("#bv-heatmap .js-plotly-plot .heatmaplayer")
    sync_api.expect(page.locator("#bv-heatmap .js-plotly-plot .xtick").first).to_be_visible()
    page.wait_for_selector("#bv-overview .js-plotly-plot .heatmaplayer")

    page.get_by_role("tab", name="Attributions").click()
    sync_api.expect(page.locator("#bv-delta")).to_contain_text("convergence delta")
    page.wait_for_selector("#bv-cls-path .js-plotly-plot .heatmaplayer")
    page.wait_for_selector("#bv-cls-lens .js-plotly-plot")


def test_chart_tabs_are_drawn_when_opened_and_follow_a_new_analysis(page, app_url):
    """Analyze draws only the open tab; the Attention and Attributions tabs draw their charts when
    opened, for the latest analysis (never the previous text's), and opening one again after the
    same analysis keeps what is there."""
    analyze(page, app_url, "the film was great , a joy !")
    page.get_by_role("tab", name="Attention").click()
    ticks = page.locator("#bv-heatmap .js-plotly-plot .xtick")
    sync_api.expect(ticks.filter(has_text="joy").first).to_be_visible()
    page.get_by_role("tab", name="Predict").click()
    page.locator("#bv-text textarea").fill("a tedious slog")
    page.locator("#bv-analyze").click()
    sync_api.expect(page.locator("#bv-predict-tokens .bv-line")).to_contain_text("slog")
    page.get_by_role("tab", name="Attention").click()
    sync_api.expect(ticks.filter(has_text="slog").first).to_be_visible()
    assert ticks.filter(has_text="joy").count() == 0
    page.get_by_role("tab", name="Attributions").click()
    sync_api.expect(page.locator("#bv-attr-tokens .bv-line")).to_contain_text("slog")
    page.wait_for_selector("#bv-cls-path .js-plotly-plot .heatmaplayer")


def test_attributions_tab_compares_methods_side_by_side_with_faithfulness(page, app_url):
    analyze(page, app_url, "the film was great , a joy !")
    page.get_by_role("tab", name="Attributions").click()
    delta = page.locator("#bv-delta")
    sync_api.expect(delta).to_contain_text("Faithfulness")  # the shown IG's own comprehensiveness/sufficiency
    sync_api.expect(delta).to_contain_text("comprehensiveness")
    page.locator("#bv-compare").click()
    reading = page.locator("#bv-compare-reading")
    sync_api.expect(reading).to_contain_text("Reading:", timeout=TIMEOUT_MS)
    rows = page.locator("#bv-compare-table [role=row]")  # gradio's table: a header row and one per method
    sync_api.expect(rows).to_have_count(7, timeout=TIMEOUT_MS)
    sync_api.expect(page.locator("#bv-compare-table")).to_contain_text("KernelSHAP")
    sync_api.expect(page.locator("#bv-compare-table")).to_contain_text("★")  # the most faithful one
    sync_api.expect(page.locator("#bv-compare-tokens .bv-line")).to_have_count(6)
    page.wait_for_selector("#bv-compare-heatmap .js-plotly-plot .heatmaplayer")
    page.wait_for_selector("#bv-compare-agreement .js-plotly-plot .heatmaplayer")
    # no method ticked: a clear message, and the comparison shown stays
    for name in ("Integrated Gradients", "gradient × input", "saliency (gradient norm)", "occlusion (per word)",
                 "KernelSHAP (per word)", "LIME (per word)"):
        page.locator("#bv-compare-methods").get_by_label(name).uncheck()
    page.locator("#bv-compare").click()
    sync_api.expect(page.get_by_text("Tick at least one method").first).to_be_visible()
    sync_api.expect(rows).to_have_count(7)
    # a new text hides the old comparison
    page.get_by_role("tab", name="Predict").click()
    page.locator("#bv-text textarea").fill("a tedious slog")
    page.locator("#bv-analyze").click()
    sync_api.expect(page.locator("#bv-predict-tokens .bv-line")).to_contain_text("slog")
    page.get_by_role("tab", name="Attributions").click()
    sync_api.expect(page.locator("#bv-compare-reading")).to_be_hidden()
    assert "Traceback" not in page.content()


def test_explain_a_file_tab_explains_every_row_and_offers_the_results(page, app_url, tmp_path):
    table = tmp_path / "reviews.csv"
    rows = ["the film was good", "a tedious slog !", "", "it is not fun", "the movie is great , moving .",
            "the film was bad", XSS]
    table.write_text("id,review\n" + "".join(f'{i},"{t}"\n' for i, t in enumerate(rows)), encoding="utf-8")
    page.goto(app_url)
    page.get_by_role("tab", name="Explain a file").click()
    page.locator("#bv-bx-upload input[type=file]").set_input_files(str(table))
    sync_api.expect(page.locator("#bv-bx-status")).to_contain_text("7 rows, 2 columns")
    sync_api.expect(page.locator("#bv-bx-text-col input")).to_have_value("review")  # guessed, not the id column
    page.locator("#bv-bx-methods").get_by_label("occlusion (per word)").check()  # IG is ticked already
    page.locator("#bv-bx-start").click()
    status = page.locator("#bv-bx-status")
    sync_api.expect(status).to_contain_text("6 of 7 rows explained")
    sync_api.expect(status).to_contain_text("Skipped 1 rows")
    for shown in ("Integrated Gradients", "occlusion (per word)", "mean comprehensiveness", "seconds per text"):
        sync_api.expect(status).to_contain_text(shown)  # each method's faithfulness and cost
    link = page.locator("#bv-bx-file a").first
    sync_api.expect(link).to_have_attribute("href", re.compile(r"explained-reviews\.csv$"))
    import urllib.request

    with urllib.request.urlopen(link.get_attribute("href"), timeout=30) as r:  # the download itself
        got = r.read().decode("utf-8").splitlines()
    # the table's own columns first, as given; the app's after them (bv_*)
    assert got[0].startswith("id,review,bv_row,bv_prediction,bv_p_negative,bv_p_positive,bv_target")
    assert len(got) == 1 + len(rows) and got[1].startswith("0,the film was good,2,")
    assert "bv_ig_comprehensiveness" in got[0] and "bv_occlusion_sufficiency" in got[0]
    sync_api.expect(page.locator("#bv-bx-words")).to_contain_text("film")  # 'film' occurs in 3 rows
    assert page.dialogs == [] and page.locator("img[src='x']").count() == 0


def test_explain_a_file_tab_says_what_is_wrong_with_a_bad_upload(page, app_url, tmp_path):
    import io
    import zipfile

    zipped = tmp_path / "reviews.csv"  # a spreadsheet export zipped by mistake, with a .csv name
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("reviews.csv", "review\nthe film was good\n")
    zipped.write_bytes(buf.getvalue())
    header_only = tmp_path / "empty.csv"
    header_only.write_text("review,label\n", encoding="utf-8")
    page.goto(app_url)
    page.get_by_role("tab", name="Explain a file").click()
    status = page.locator("#bv-bx-status")
    upload = page.locator("#bv-bx-upload input[type=file]")
    upload.set_input_files(str(zipped))
    sync_api.expect(status).to_contain_text("Error:")
    sync_api.expect(status).to_contain_text("not a text table")
    # the refused file is cleared by itself (issue 35): it does not look uploaded
    sync_api.expect(page.locator("#bv-bx-upload")).not_to_contain_text(re.compile(r"reviews\s*\.csv"))
    upload.set_input_files(str(header_only))
    sync_api.expect(status).to_contain_text("no data rows")
    sync_api.expect(page.locator("#bv-bx-upload")).not_to_contain_text(re.compile(r"empty\s*\.csv"))
    page.locator("#bv-bx-start").click()  # starting anyway: the refused file is not there to run on
    sync_api.expect(status).to_contain_text("Upload a table first", timeout=30_000)
    sync_api.expect(status).to_contain_text("No file was written")
    assert page.locator("#bv-bx-file a").count() == 0
    assert "Traceback" not in page.content()


def test_explain_a_file_tab_names_the_guarded_cells_and_writes_them_raw_on_request(page, app_url, tmp_path):
    import csv
    import urllib.request

    table = tmp_path / "tweets.csv"
    rows = [["@fan the film was good", "positive"], ["a tedious slog", "negative"],
            ["=1+1 the film was bad", "neutral"]]
    with table.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["text", "label"], *rows])
    page.goto(app_url)
    page.get_by_role("tab", name="Explain a file").click()
    page.locator("#bv-bx-upload input[type=file]").set_input_files(str(table))
    status = page.locator("#bv-bx-status")
    sync_api.expect(status).to_contain_text("3 rows, 2 columns")
    for raw in (False, True):
        if raw:
            page.locator("#bv-bx-raw input").check()
        page.locator("#bv-bx-start").click()
        sync_api.expect(status).to_contain_text("The raw CSV has them as given" if raw else "Each got a leading '")
        sync_api.expect(status).to_contain_text("3 of 3 rows explained")
        sync_api.expect(status).to_contain_text("column 'text': rows 2 and 4")
        with urllib.request.urlopen(page.locator("#bv-bx-file a").first.get_attribute("href"), timeout=30) as r:
            got = list(csv.reader(r.read().decode("utf-8").splitlines()))
        guard = "" if raw else "'"
        assert [row[:2] for row in got[1:]] == [[guard + rows[0][0], "positive"], rows[1],
                                                 [guard + rows[2][0], "neutral"]]


def test_explain_a_file_tab_shows_a_refusal_in_its_status_not_starting_and_an_error_badge(page, app_url, tmp_path):
    import io
    import zipfile

    zipped = tmp_path / "reviews.csv"  # refused when read
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("reviews.csv", "review\nthe film was good\n")
    zipped.write_bytes(buf.getvalue())
    blanks = tmp_path / "blanks.csv"  # read fine, refused when explained: no row has a text
    blanks.write_text("review,label\n,pos\n   ,neg\n", encoding="utf-8")
    page.goto(app_url)
    page.get_by_role("tab", name="Explain a file").click()
    status = page.locator("#bv-bx-status")
    upload = page.locator("#bv-bx-upload input[type=file]")
    badges = page.locator("#bv-bx-status .error, #bv-bx-file .error, #bv-bx-words .error, .toast-title")
    for path, says in [(zipped, "is a ZIP archive"), (blanks, "No row of blanks.csv has a text to explain")]:
        if page.locator("#bv-bx-upload button[aria-label=Clear]").count():
            page.locator("#bv-bx-upload button[aria-label=Clear]").click()
        upload.set_input_files(str(path))
        if path is zipped:  # refused on upload (issue 35): cleared from the input, the status says why
            sync_api.expect(status).to_contain_text(says)
            sync_api.expect(page.locator("#bv-bx-upload")).not_to_contain_text(re.compile(path.stem + r"\s*\.csv"))
            page.locator("#bv-bx-start").click()
            sync_api.expect(status).to_contain_text("Upload a table first")
            sync_api.expect(status).to_contain_text("No file was written")
            assert badges.count() == 0, badges.all_inner_texts()
            continue
        sync_api.expect(page.locator("#bv-bx-upload")).to_contain_text(re.compile(path.stem + r"\s*\.csv"))
        sync_api.expect(status).to_contain_text("2 rows, 2 columns")  # the upload read, the last run's words gone
        page.locator("#bv-bx-start").click()
        sync_api.expect(status).to_contain_text(says, timeout=30_000)  # the run's own answer (after opening the model)
        sync_api.expect(status).to_contain_text("No file was written")
        sync_api.expect(status).not_to_contain_text("Starting")
        assert badges.count() == 0, badges.all_inner_texts()
        assert page.locator("#bv-bx-file a").count() == 0
    assert "Traceback" not in page.content()


def test_empty_text_shows_a_clear_message(page, app_url):
    page.goto(app_url)
    page.locator("#bv-text textarea").fill("   ")
    page.locator("#bv-analyze").click()
    sync_api.expect(page.get_by_text("empty or whitespace only").first).to_be_visible()
    assert "Traceback" not in page.content()


def test_xss_text_is_shown_as_text_and_never_runs(page, app_url):
    analyze(page, app_url, XSS)
    page.get_by_role("tab", name="Attributions").click()
    page.wait_for_selector("#bv-attr-tokens .bv-tok")
    page.wait_for_timeout(500)  # give any injected handler the chance to fire
    assert page.dialogs == []
    assert page.locator("img[src='x']").count() == 0
    sync_api.expect(page.locator("#bv-predict-tokens .bv-line")).to_contain_text(XSS)
    sync_api.expect(page.locator("#bv-attr-tokens .bv-line")).to_contain_text(XSS)


def png_size(path: Path) -> tuple[int, int]:
    """A PNG's width and height, read from its IHDR chunk (the file is a PNG, or this fails)."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", head
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_the_readme_images_script_draws_both_pictures(browser, tiny_model_dir, tmp_path):
    """scripts/readme_images.py (which makes docs/screenshot.png and docs/finetune.png) run into a temporary
    folder: both pictures are whole pages of the app, taken once the analysis and the fine-tune are drawn."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_images", ROOT / "scripts" / "readme_images.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    made = script.make_images(str(tiny_model_dir), tmp_path, browser=browser, epochs=1)
    assert made == [tmp_path / "screenshot.png", tmp_path / "finetune.png"]
    for path in made:
        width, height = png_size(path)
        assert width == 1280 and height > 900, (path.name, width, height)  # the viewport's width, the whole page


def test_explain_a_file_tab_shows_progress_and_cancels(page, app_url, tmp_path, monkeypatch):
    """The tab's run streams its progress and stops on Cancel, saying so, with no file written
    (the explain is a stand-in that waits for the cancel, so the test does not race the real one)."""
    import threading

    import bertviz_app as core
    from bertviz_app.ui import batch_tab

    started = threading.Event()

    def slow_explain_csv(lm, path, out, *, progress, cancel, **kw):
        progress(0, 10)
        started.set()
        if not cancel.wait(60):
            raise AssertionError("Cancel never reached the run")
        raise core.CancelledError("Cancelled after 0 of 10 rows; no file was written.")

    monkeypatch.setattr(batch_tab.core, "explain_csv", slow_explain_csv)
    data = tmp_path / "reviews.csv"
    data.write_text("review\nthe film was good\nthe film was bad\n", encoding="utf-8")
    page.goto(app_url)
    page.get_by_role("tab", name="Explain a file").click()
    page.locator("#bv-bx-upload input[type=file]").set_input_files(str(data))
    # gradio's file box shows the name's stem and extension as two parts ("reviews .csv" in its text at times)
    sync_api.expect(page.locator("#bv-bx-upload")).to_contain_text(re.compile(r"reviews\s*\.csv"))
    page.locator("#bv-bx-start").click()
    status = page.locator("#bv-bx-status")
    sync_api.expect(status).to_contain_text("Explaining: 0 of 10 rows", timeout=60_000)
    assert started.is_set()
    page.locator("#bv-bx-cancel").click()
    sync_api.expect(status).to_contain_text("Cancelled after 0 of 10 rows", timeout=60_000)  # a loaded CI took > 5 s
    assert page.locator(".toast-title").count() == 0
