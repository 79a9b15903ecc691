"""Issue 36: no control offers what it will refuse. In a real browser (Playwright + the system Chromium),
each fixed control is opened and its offered options read: the ones that cannot work are absent, a workable
one is present (the positive control), and picking an offered one does not end in a refusal. The filtering
functions themselves: test_choices.py. The app runs in-process with the tiny model and a registry holding
models that lack something (another label set, no [MASK] token, layers that cannot be decomposed,
multi-label outputs)."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from conftest import CHROMIUM, evaluate_file, served_app  # noqa: E402

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
expect = sync_api.expect

TIMEOUT_MS = 90_000
TEXT = "the film was great , a joy !"
REFUSED = ("Error", "Unknown class", "no [MASK] token", "cannot locate", "not among")


@pytest.fixture(scope="module")
def registry(tmp_path_factory, tiny_model_dir):
    from test_choices import make_no_mask_model, make_undecomposable_model

    from conftest import make_tiny_model

    models = tmp_path_factory.mktemp("choices-registry")
    make_tiny_model(models / "three", num_labels=3)  # another label set
    make_no_mask_model(models / "nomask")  # a tokenizer without [MASK]
    make_undecomposable_model(models / "decoder", tiny_model_dir)  # only raw attention as a mixing measure
    make_tiny_model(models / "multi", multi_label=True)
    shutil.copytree(tiny_model_dir, models / "same")  # the tiny model's classes, another folder
    return models


@pytest.fixture(scope="module")
def app_url(tiny_model_dir, registry):
    with served_app(str(tiny_model_dir), BERTVIZ_MODELS_DIR=registry) as url:
        yield url


def options(page, selector: str) -> list[str]:
    """The options the dropdown ``selector`` lists when opened (closed again after)."""
    page.locator(f"{selector} input").click()
    expect(page.locator("[role=option]").first).to_be_visible()
    found = [o.replace("✓", "").strip() for o in page.locator("[role=option]").all_inner_texts()]
    page.keyboard.press("Escape")
    expect(page.locator("[role=option]")).to_have_count(0)
    page.locator(f"{selector} input").blur()  # a focused box does not open again on a click
    return found


def wait_options(page, selector: str, check, timeout_s: float = 60.0) -> list[str]:
    """The dropdown's options once ``check(options)`` holds (they follow an event still running), read again
    until then; the last ones read are returned either way, for the caller's assert to show."""
    deadline = time.monotonic() + timeout_s
    found = options(page, selector)
    while not check(found) and time.monotonic() < deadline:
        page.wait_for_timeout(250)  # the poll's interval
        found = options(page, selector)
    return found


def choose(page, selector: str, name: str) -> None:
    """Pick the option ``name`` of the dropdown ``selector`` as a user does: open it, type, click the option."""
    box = page.locator(f"{selector} input")
    box.click()
    box.fill(name)
    page.get_by_role("option", name=name, exact=True).click()
    expect(box).to_have_value(name)


def load_model(page, name: str) -> None:
    page.get_by_role("tab", name="Model").click()
    box = page.locator("#bv-model input")
    box.fill(name)
    box.press("Enter")
    page.get_by_role("button", name="Load model").click()
    expect(page.locator("#bv-model-summary")).to_contain_text(name)


def analyze(page, label: str = "") -> None:
    """Analyze the text (Integrated Gradients skipped: Explain again computes them); ``label``: a part of the
    predicted class the label then shows."""
    page.get_by_role("tab", name="Predict").click()
    page.locator("#bv-text textarea").fill(TEXT)
    page.locator("#bv-skip-ig input[type=checkbox]").check()
    page.locator("#bv-analyze").click()
    expect(page.locator("#bv-label")).to_contain_text(label)
    expect(page.locator("#bv-label")).not_to_have_text("")
    expect(page.locator("#bv-analyze")).to_be_enabled()


def explain_again(page) -> None:
    """Explain again, then: explained (the faithfulness line), and no refusal in the tab's status line."""
    delta, status = page.locator("#bv-delta"), page.locator("#bv-attr-status")
    page.locator("#bv-explain").click()
    expect(delta).to_contain_text("comprehensiveness")
    expect(status).to_have_text("")


def no_refusal(page) -> None:
    content = page.content()
    assert "Traceback" not in content
    for line in ("#bv-attr-status", "#bv-compare-status", "#bv-ev-status"):
        if not page.locator(line).count():  # a tab never opened is not drawn
            continue
        text = page.locator(line).inner_text()
        assert not any(r in text for r in REFUSED), f"{line}: {text}"


def test_target_classes_after_a_model_change_are_the_analysed_texts(page, app_url, tiny_model_dir):
    """Explain again explains the analysed text with its own model: after another model (3 classes) is shown,
    the target offers the analysed model's classes, not the new model's (which Explain again refused)."""
    page.goto(app_url)
    analyze(page)  # the tiny model's prediction, whichever class
    load_model(page, "three")
    page.get_by_role("tab", name="Attributions").click()
    offered = wait_options(page, "#bv-target", lambda o: "negative" in o)
    assert "negative" in offered and "positive" in offered  # positive control: the analysed model's classes
    assert not {"class_0", "class_1", "class_2"} & set(offered), offered
    for name in ("negative", "positive"):  # each offered class explains
        choose(page, "#bv-target", name)
        explain_again(page)
        expect(page.locator("#bv-delta")).to_contain_text(f"Target: {name}")
    no_refusal(page)
    # the new model's text analysed: now its classes are offered
    analyze(page, "class_")
    page.get_by_role("tab", name="Attributions").click()
    offered = wait_options(page, "#bv-target", lambda o: "class_2" in o)
    assert {"class_0", "class_1", "class_2"} <= set(offered) and "negative" not in offered, offered


def test_baselines_offered_are_those_the_models_tokenizer_has(page, app_url):
    page.goto(app_url)
    load_model(page, "nomask")
    page.get_by_role("tab", name="Attributions").click()
    offered = wait_options(page, "#bv-baseline", lambda o: "[MASK] tokens" not in o)
    assert "[MASK] tokens" not in offered, offered
    assert "[PAD] tokens" in offered and "[UNK] tokens" in offered  # positive control
    expect(page.locator("#bv-baseline")).to_contain_text("not offered: [MASK] tokens")
    analyze(page)
    page.get_by_role("tab", name="Attributions").click()
    for name in offered:  # each offered baseline explains
        choose(page, "#bv-baseline", name)
        explain_again(page)
    no_refusal(page)


def test_compare_methods_offers_only_what_the_models_family_runs(page, app_url, tiny_model_dir):
    page.goto(app_url)
    methods = "#bv-compare-methods"
    box = lambda name: page.locator(methods).get_by_role("checkbox", name=name, exact=True)  # noqa: E731
    page.get_by_role("tab", name="Attributions").click()
    expect(box("ALTI")).to_have_count(1)  # positive control: the tiny BERT runs every method
    load_model(page, "decoder")
    page.get_by_role("tab", name="Attributions").click()
    expect(box("ALTI")).to_have_count(0)
    for left in ("attention-norm", "value zeroing"):
        expect(box(left)).to_have_count(0)
    for offered in ("raw attention (rollout)", "gradient × input", "Integrated Gradients"):
        expect(box(offered)).to_have_count(1)
    expect(page.locator(methods)).to_contain_text("Not offered")
    analyze(page)
    page.get_by_role("tab", name="Attributions").click()
    for ticked in page.locator(f"{methods} input[type=checkbox]").all():
        ticked.uncheck()
    box("gradient × input").check()
    box("raw attention (rollout)").check()
    page.locator("#bv-compare").click()
    expect(page.locator("#bv-compare-table")).to_contain_text("gradient × input")
    expect(page.locator("#bv-compare-status")).to_have_text("")
    no_refusal(page)


def test_evaluate_is_greyed_for_a_multi_label_model_and_compare_with_lists_the_same_classes(page, app_url):
    page.goto(app_url)
    page.get_by_role("tab", name="Evaluate").click()
    start, note = page.locator("#bv-ev-start"), page.locator("#bv-ev-model-note")
    expect(start).to_be_enabled()  # positive control: the tiny single-label classifier
    offered = wait_options(page, "#bv-ev-compare", lambda o: "same" in o)
    assert "same" in offered, offered  # the tiny model's classes, another folder
    for left in ("three", "multi", "encoder"):  # other classes, multi-label, LABEL_0/LABEL_1
        assert left not in offered, offered
    expect(page.locator("#bv-ev-compare")).to_contain_text("multi (multi-label)")
    load_model(page, "multi")
    page.get_by_role("tab", name="Evaluate").click()
    expect(start).to_be_disabled()
    expect(note).to_contain_text("multi-label model")
    load_model(page, "same")
    page.get_by_role("tab", name="Evaluate").click()
    expect(start).to_be_enabled()
    # the reason is gone (not "the note is empty": a loaded CI run showed progress timers on the note for 30 s)
    expect(note).not_to_contain_text("multi-label")
    no_refusal(page)


def test_start_training_is_greyed_while_this_pages_fine_tune_runs(page, app_url, tiny_model_dir, tmp_path,
                                                                 monkeypatch):
    """A second Start while the page's fine-tune runs was refused (one fine-tune per visitor) and re-armed the
    page's cancel flag; now Start is greyed until the run has ended, then offered again. The training is a
    stand-in that waits for Cancel (test_finetune_ui.StandInRun)."""
    from test_finetune_ui import StandInRun, write_csv

    from bertviz_app.train.finetune import job

    monkeypatch.setattr(job, "run_plan", StandInRun(quiet_ticks=0))
    page.goto(app_url)
    page.get_by_role("tab", name="Fine-tune").click()
    page.locator("#bv-ft-upload input[type=file]").set_input_files(str(write_csv(tmp_path / "reviews.csv", n=24)))
    expect(page.locator("#bv-ft-report")).to_contain_text("Ready to train")
    start, status = page.locator("#bv-ft-start"), page.locator("#bv-ft-status")
    expect(start).to_be_enabled()  # positive control: nothing runs yet
    base = page.locator("#bv-ft-base input")
    base.fill(str(tiny_model_dir))
    base.press("Enter")
    start.click()
    expect(status).to_contain_text("loss 0.6900")
    expect(start).to_be_disabled()
    page.locator("#bv-ft-cancel").click()
    expect(status).to_contain_text("Cancelled")
    expect(start).to_be_enabled()  # the run ended: Start is offered again
    assert "already have a fine-tune" not in status.inner_text()


@pytest.fixture(scope="module")
def public_url(tiny_model_dir, tmp_path_factory):
    """A public app whose model is a shared one (not a visitor's run): the tiny model made over-confident, so a
    temperature helps it."""
    from conftest import make_overconfident_copy

    root = tmp_path_factory.mktemp("choices-public")
    shared = make_overconfident_copy(tiny_model_dir, root / "shared")
    (root / "models").mkdir()
    with served_app(str(shared), BERTVIZ_MODELS_DIR=root / "models", BERTVIZ_PUBLIC=1) as url:
        yield url


def test_save_temperature_is_not_offered_for_a_shared_model(page, public_url, tmp_path):
    """On a shared app a temperature is saved only into the visitor's own runs: for the shared model Save was
    offered (the temperature helped) and then refused; now it is hidden and the line under it says why."""
    from test_evaluate_tab import labelled_csv

    data = tmp_path / "reviews.csv"
    data.write_bytes(labelled_csv(40))
    evaluate_file(page, public_url, data, TIMEOUT_MS)
    # the temperature helps (what offered the button before), yet the button is not there, and the line says why
    expect(page.locator("#bv-ev-calibration")).to_contain_text("Worth keeping:")
    expect(page.locator("#bv-ev-save-t")).to_be_hidden()
    expect(page.locator("#bv-ev-save-t-md")).to_contain_text("Not offered for saving")
    expect(page.locator("#bv-ev-save-t-md")).to_contain_text("only into your own fine-tuned runs")
    no_refusal(page)
