"""Public mode in a real browser (Playwright + Debian's Chromium): two separate browser contexts are
two visitors. A fine-tunes (probe mode, a small file) and downloads the zip; B sees none of A's runs
anywhere on the page, cannot open A's run by typing its name, and cannot fetch A's zip or run files
by URL; a second fine-tune from another tab of A is refused; A deletes its run, then all its data."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import CHROMIUM, free_port, served_app, start_finetune  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
expect = sync_api.expect

from test_finetune_ui import write_csv  # noqa: E402

TIMEOUT_MS = 120_000


@pytest.fixture(scope="module")
def public_app(tiny_model_dir, tmp_path_factory):
    models = tmp_path_factory.mktemp("public-browser-registry")
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=models, BERTVIZ_PUBLIC=1,
                    BERTVIZ_MAX_RUNS_PER_VISITOR=1) as url:
        yield url, models


def runs_refresh_index(url: str) -> int:
    """The page-load event that fills the Fine-tune tab's run lists, run once the visitor's token is known
    (``refresh_runs``, chained after the token's load event), as the page's /config lists it."""
    import httpx

    cfg = httpx.get(f"{url}config", timeout=30).json()
    comps = {c["id"]: c["type"] for c in cfg["components"]}
    deps = cfg["dependencies"]
    token = next(i for i, d in enumerate(deps) if [comps[c] for c in d["inputs"]] == ["browserstate"]
                 and d.get("backend_fn"))
    return next(i for i, d in enumerate(deps) if d.get("api_name", "").startswith("refresh_runs")
                and d.get("trigger_after") == token)


def open_finetune(browser, url):
    """A new visitor's page on the Fine-tune tab, returned once its run lists have loaded: ``page.runs_loaded``
    is the answer of the page-load refresh that filled them (what the page then draws)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = ctx.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    refresh = runs_refresh_index(url)

    def is_refresh(response):
        try:
            return "/run/predict" in response.url and (response.request.post_data_json or {}).get("fn_index") == refresh
        except ValueError:  # a body that is not JSON
            return False

    with page.expect_response(is_refresh) as answer:
        page.goto(url)
    assert answer.value.ok
    page.runs_loaded = json.dumps(answer.value.json()["data"])
    page.get_by_role("tab", name="Fine-tune").click()
    return ctx, page


def start_probe(page, csv_path, tiny_model_dir, name):
    page.locator("#bv-ft-upload input[type=file]").set_input_files(str(csv_path))
    expect(page.locator("#bv-ft-report")).to_contain_text("Ready to train")
    # the app's default model (a folder, allowed as the default)
    start_finetune(page, tiny_model_dir, name, mode="probe: frozen encoder")


def dropdown_options(page, selector) -> list[str]:
    box = page.locator(f"{selector} input")
    box.click()
    box.press("Control+a")
    box.press("Backspace")  # an empty filter: every option is listed
    page.wait_for_timeout(500)
    options = page.locator("[role=option]").all_inner_texts()
    page.keyboard.press("Escape")
    return [o.replace("✓", "").strip() for o in options]


def test_two_visitors_each_see_and_reach_only_their_own_runs(browser, public_app, tiny_model_dir, tmp_path):
    url, models = public_app
    csv_path = write_csv(tmp_path / "reviews.csv", n=24)
    ctx_a, a = open_finetune(browser, url)
    start_probe(a, csv_path, tiny_model_dir, "a-run")
    expect(a.locator("#bv-ft-status")).to_contain_text("Done", timeout=TIMEOUT_MS)
    run = a.locator("#bv-ft-run input").input_value()
    assert run.startswith("runs/") and run.endswith("a-run"), run
    folder = models / run
    assert (folder / "config.json").is_file()
    assert run in dropdown_options(a, "#bv-ft-run")  # the owner's lists hold it (what B's must not)
    assert run in dropdown_options(a, "#bv-ft-base")
    expect(a.locator("#bv-ft-runs")).to_contain_text("a-run")

    # A downloads the zip
    a.locator("#bv-ft-zip").click()
    link = a.locator("#bv-ft-zip-file a").first
    expect(link).to_be_attached(timeout=TIMEOUT_MS)
    href = link.get_attribute("href")
    assert href and ".zip" in href
    zip_url = href if href.startswith("http") else url.rstrip("/") + href
    assert a.request.get(zip_url).status == 200

    # B: a separate browser (context) sees none of A's runs anywhere
    ctx_b, b = open_finetune(browser, url)  # returned once B's run lists have loaded
    assert '"encoder"' in b.runs_loaded and "a-run" not in b.runs_loaded  # the shared models, none of A's runs
    expect(b.locator("#bv-ft-runs")).not_to_contain_text("a-run")
    assert not any("a-run" in o for o in dropdown_options(b, "#bv-ft-run"))
    assert not any("a-run" in o for o in dropdown_options(b, "#bv-ft-base"))
    b.get_by_role("tab", name="Model").click()
    assert not any("a-run" in o for o in dropdown_options(b, "#bv-model"))
    assert "a-run" not in b.content()
    # ... cannot open it by typing its name (the answer of a run that does not exist) ...
    model = b.locator("#bv-model input")
    model.fill(run)
    model.press("Enter")
    b.get_by_role("button", name=re.compile("Load", re.I)).first.click()
    expect(b.locator("#bv-model-status")).to_contain_text(f"No run '{run}' among your runs")  # stays in the tab
    # ... nor fetch A's zip or the run's files by URL
    assert b.request.get(zip_url).status == 404
    for f in ("model.safetensors", "run.json", "config.json"):
        assert b.request.get(f"{url}gradio_api/file={folder / f}").status in (403, 404)
    ctx_b.close()

    # A's second tab is the same visitor: its run list holds A's run; past the limit of 1 run it is refused
    tab2 = ctx_a.new_page()
    tab2.set_default_timeout(TIMEOUT_MS)
    tab2.goto(url)
    tab2.get_by_role("tab", name="Fine-tune").click()
    expect(tab2.locator("#bv-ft-runs")).to_contain_text("a-run")
    start_probe(tab2, csv_path, tiny_model_dir, "a-run-2")
    expect(tab2.locator("#bv-ft-status")).to_contain_text("a visitor may keep 1")
    expect(tab2.locator("#bv-ft-run input")).to_have_value(run)  # the oldest run, offered beside Delete this run
    assert not any(p.name.endswith("a-run-2") for p in (models / "runs").iterdir())
    tab2.locator("#bv-ft-delete").click()  # A takes the offer
    expect(tab2.locator("#bv-ft-delete-md")).to_contain_text("Deleted runs/")
    assert not folder.exists()
    tab2.close()

    # then deletes all its data (the zip goes with it)
    a.get_by_role("tab", name="Fine-tune").click()
    a.locator("#bv-ft-delete-all").click()
    expect(a.locator("#bv-ft-delete-md")).to_contain_text("Deleted your data")
    assert a.request.get(zip_url).status in (403, 404)  # removed from the cache
    assert "Traceback" not in a.content()
    ctx_a.close()
    assert re.fullmatch(r"runs/[0-9a-f]{8}-a-run", run), run  # the visitor's tag: names never collide


def test_a_visitors_runs_stay_theirs_after_a_server_restart(browser, tiny_model_dir, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    env = dict(BERTVIZ_MODELS_DIR=models, BERTVIZ_PUBLIC=1)
    port = free_port()  # a browser's storage is per origin: the restarted server comes back on this port
    ctx_a = browser.new_context(viewport={"width": 1280, "height": 900})
    with served_app(str(tiny_model_dir), port=port, **env) as url:
        a = ctx_a.new_page()
        a.set_default_timeout(TIMEOUT_MS)
        a.goto(url)
        a.get_by_role("tab", name="Fine-tune").click()
        start_probe(a, write_csv(tmp_path / "reviews.csv", n=24), tiny_model_dir, "kept")
        expect(a.locator("#bv-ft-status")).to_contain_text("Done", timeout=TIMEOUT_MS)
        run = a.locator("#bv-ft-run input").input_value()
        a.close()
    with served_app(str(tiny_model_dir), port=port, **env) as url:  # restarted, same origin
        a = ctx_a.new_page()  # the same browser, a fresh page
        a.set_default_timeout(TIMEOUT_MS)
        a.goto(url)
        a.get_by_role("tab", name="Fine-tune").click()
        expect(a.locator("#bv-ft-runs")).to_contain_text("kept")
        assert run in dropdown_options(a, "#bv-ft-run")
        ctx_b, b = open_finetune(browser, url)  # returned once B's run lists have loaded
        assert '"encoder"' in b.runs_loaded and "kept" not in b.runs_loaded
        expect(b.locator("#bv-ft-runs")).not_to_contain_text("kept")
        assert run not in dropdown_options(b, "#bv-ft-run")
        ctx_b.close()
    ctx_a.close()


def test_a_fine_tune_runs_on_after_its_browser_closes_and_is_found_on_return(browser, tiny_model_dir, tmp_path):
    """Issue 35: closing the browser mid-training cancelled the fine-tune (saved "cancelled" at step 66 of
    150). A fine-tune is a job: the visitor closes the browser while it trains, comes back with the same
    stored token (the context's storage state) and finds the run finished, listed and not cancelled."""
    import json

    models = tmp_path / "models"
    models.mkdir()
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=models, BERTVIZ_PUBLIC=1) as url:
        ctx_a, a = open_finetune(browser, url)
        a.locator("#bv-ft-upload input[type=file]").set_input_files(str(write_csv(tmp_path / "long.csv", n=120)))
        expect(a.locator("#bv-ft-report")).to_contain_text("Ready to train")
        # long enough to outlast the browser's close on a loaded CI machine (8 epochs, ~400 tiny steps, ended first
        # in two CI runs of 2026-11-27): ~1,900 steps, still seconds
        start_finetune(a, tiny_model_dir, "walked-away", epochs=40, batch=2, patience=0)
        expect(a.locator("#bv-ft-status")).to_contain_text("loss", timeout=TIMEOUT_MS)  # training now
        state = ctx_a.storage_state()  # the browser's stored owner token
        ctx_a.close()  # the visitor walks away mid-training
        runs = models / "runs"
        assert not runs.exists() or not any(runs.iterdir()), "the run ended before the browser closed"

        ctx_back = browser.new_context(viewport={"width": 1280, "height": 900}, storage_state=state)
        back = ctx_back.new_page()
        back.set_default_timeout(TIMEOUT_MS)
        back.goto(url)
        back.get_by_role("tab", name="Fine-tune").click()
        # still training when the page opens: the tab follows it, then shows its results; else it is listed
        expect(back.locator("#bv-ft-runs")).to_contain_text("walked-away", timeout=3 * TIMEOUT_MS)
        (folder,) = [p for p in runs.iterdir() if p.name.endswith("walked-away")]
        info = json.loads((folder / "run.json").read_text())
        assert info["cancelled"] is False and info["steps"] >= 1
        assert info["verdict"]["status"] != "cancelled"
        expect(back.locator("#bv-ft-runs")).not_to_contain_text("(cancelled)")
        assert f"runs/{folder.name}" in dropdown_options(back, "#bv-ft-run")
        assert "Traceback" not in back.content()
        ctx_back.close()
