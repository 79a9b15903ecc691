"""The build panel in a real browser while the default model is being built. The build is faked:
this test process holds the build lock and writes the progress events itself (as the build child
would), and a tiny model stands in for the built one, so the page sees "building" for as long as
the test wants, then "built", without training anything."""

from __future__ import annotations

import logging
import os
from contextlib import ExitStack

import pytest

from conftest import CHROMIUM, make_tiny_model, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

OPEN_S = 6  # build steps the page sees while the build "runs", each refreshed by a tick of its timer


def test_a_page_open_during_a_build_logs_no_errors_then_switches_and_names_the_selected_model(
        browser, tmp_path, capfd, caplog):
    from bertviz_app.models.build_job import EventLog, build_lock

    models = tmp_path / "models"
    caplog.set_level(logging.INFO)
    with ExitStack() as stack:
        building = ExitStack()  # the fake builder's lock, released when its "build" is done
        stack.enter_context(building)
        building.enter_context(build_lock(models))
        url = stack.enter_context(served_app("default", BERTVIZ_MODELS_DIR=models))
        events = EventLog(models / ".build" / "default.jsonl")
        events({"stage": "data", "message": "reading the reviews", "fraction": 0.02, "eta": None})
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        stack.callback(ctx.close)
        page = ctx.new_page()
        page.set_default_timeout(120_000)
        page.goto(url)
        panel = page.locator("#bv-build")
        badges = page.locator("span.error")  # gradio's red "Error" status on a component, hidden ones included
        sync_api.expect(panel).to_contain_text("Building the default model")
        sync_api.expect(page.locator("#bv-model-info")).to_contain_text("encoder")  # the bare encoder opened
        for step in range(1, OPEN_S + 1):  # the build moves on while the page is open, a step a tick
            events({"stage": "train", "message": f"step {step}/100", "fraction": 0.1 + step / 200, "eta": None})
            sync_api.expect(panel).to_contain_text(f"step {step}/100")  # the timer refreshed the panel
        assert badges.count() == 0, f"{badges.count()} error badges on the page while it built"

        # The build finishes (a tiny model stands in for the real one): the page switches to it.
        make_tiny_model(tmp_path / "built")
        os.rename(tmp_path / "built", models / "default")
        events({"stage": "done", "message": "saved", "fraction": 1.0, "eta": 0.0})
        building.close()
        sync_api.expect(panel).to_contain_text("The default model is ready and selected now")
        page.get_by_role("tab", name="Model").click()
        model = page.locator("#bv-model input")
        sync_api.expect(model).to_have_value("default")
        sync_api.expect(page.locator("#bv-model-summary")).to_contain_text("negative, positive")

        # Another model is chosen (as a fine-tune's new run is): the banner names it, not "default".
        model.fill("encoder")
        model.press("Enter")
        sync_api.expect(panel).to_contain_text("Selected now: encoder")
        sync_api.expect(panel).not_to_contain_text("and selected now")
        assert badges.count() == 0, f"{badges.count()} error badges on the page"
    out, err = capfd.readouterr()
    server_log = out + err + "\n".join(r.getMessage() for r in caplog.records)
    assert "Traceback" not in server_log, server_log[-3000:]
    assert "output values" not in server_log, server_log[-3000:]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], server_log[-3000:]
