"""Temperature scaling on the page (issue 21), in a real browser (Playwright + the system Chromium): a model
folder holding a calibration.json shows, under its probabilities, that they are temperature-scaled (T and
what it was fitted on), and the "show raw probabilities" switch redraws them as the model's raw softmax and
back. The app runs in-process; its models folder holds a calibrated copy of the tiny model."""

from __future__ import annotations

import os

import pytest
from test_calibration_page import calibrated_copy

from conftest import CHROMIUM, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
expect = sync_api.expect

TIMEOUT_MS = 90_000
T = 0.05  # the smallest temperature: the tiny model's near-even scores become visibly different
TEXT = "the film was good"


@pytest.fixture(scope="module")
def calibrated(tiny_model_dir, tmp_path_factory):
    models = tmp_path_factory.mktemp("registry")
    return models, calibrated_copy(tiny_model_dir, models / "calibrated", T)


@pytest.fixture(scope="module")
def app_url(calibrated):
    models, folder = calibrated
    with served_app(str(folder), BERTVIZ_MODELS_DIR=models) as url:
        yield url


def test_the_page_says_the_probabilities_are_scaled_and_shows_the_raw_ones(page, app_url, calibrated):
    import bertviz_app as bv
    from bertviz_app.config import Settings

    lm = bv.load_model(str(calibrated[1]), device="cpu", settings=Settings(memo_size=0))
    scaled = bv.predict(lm, TEXT)[0].probs
    raw = bv.predict(lm, TEXT, calibrated=False)[0].probs
    top = max(range(len(raw)), key=lambda i: raw[i])
    assert f"{scaled[top]:.1%}" != f"{raw[top]:.1%}"

    page.goto(app_url)
    note, switch, bar = page.locator("#bv-calibration"), page.locator("#bv-raw-probs"), page.locator("#bv-prob-bar")
    page.locator("#bv-skip-ig input[type=checkbox]").check()
    page.locator("#bv-text textarea").fill(TEXT)
    page.locator("#bv-analyze").click()
    expect(note).to_contain_text("Calibrated by temperature scaling")
    expect(note).to_contain_text("T = 0.05")
    expect(note).to_contain_text("fitted on 600 rows of the fine-tune validation split")
    expect(bar).to_contain_text("(temperature-scaled)")
    expect(bar).to_contain_text(f"{scaled[top]:.1%}")
    box = switch.locator("input[type=checkbox]")
    expect(box).not_to_be_checked()
    box.check()
    expect(bar).to_contain_text("(raw, before temperature scaling)")
    expect(bar).to_contain_text(f"{raw[top]:.1%}")
    expect(bar).not_to_contain_text(f"{scaled[top]:.1%}")
    expect(page.locator("#bv-analyze")).to_have_text("Analyze")  # no model work: the button never moved
    box.uncheck()
    expect(bar).to_contain_text(f"{scaled[top]:.1%}")
    # a new Analyze opens on what predict reports
    box.check()
    expect(bar).to_contain_text(f"{raw[top]:.1%}")
    page.locator("#bv-analyze").click()
    expect(bar).to_contain_text(f"{scaled[top]:.1%}")
    expect(box).not_to_be_checked()
    assert "Traceback" not in page.content()
