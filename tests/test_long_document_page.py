"""The Attention tab's whole-document part (issue 20, "Documents of any length"): for a text longer than the
model reads, a closed part reads it in predict's windows on its own button (never on Analyze), shows the
picked window's map for the tab's measure, layer and head, and the [CLS] rows merged over the whole
document. Handler level; the browser test is tests/test_browser_long_documents.py."""

from __future__ import annotations

import numpy as np
import pytest

import bertviz_app as bv
from bertviz_app.interpret.long_documents import attention_windows, window_maps

LONG = " ".join(["the film was good , it is not a tedious slog ! joyless fun"] * 12)  # > 64 tokens of the tiny model
SHORT = "the film was good"


@pytest.fixture()
def page(tiny_model_dir, settings):
    import gradio as gr

    from bertviz_app.ui import Page

    with gr.Blocks():
        return Page(settings, str(tiny_model_dir))


def analysed(page, text: str, measure: str = "raw"):
    from bertviz_app.ui import analysis

    return analysis.analyze_fast(page.load(page.default), text, None, measure=measure)


def test_the_part_shows_for_a_long_text_only_and_analyze_reads_no_window(page):
    from bertviz_app.ui import attention_tab

    d = page.a.doc
    for text, shown in ((LONG, True), (SHORT, False)):
        rec = analysed(page, text)
        out = attention_tab.document_reset(page.a, rec)
        assert out[d.panel]["visible"] is shown and out[d.panel]["open"] is False
        assert out[d.state] is None and "Read the whole document" in out[d.reading]  # nothing read on Analyze
    # Analyze's one event carries the reset (the part emptied for each new text)
    assert page.document_outputs <= page.analyze_outputs
    assert attention_tab.document_reset(page.a, None)[d.panel]["visible"] is False  # a failed Analyze hides it


def test_reading_the_document_lists_its_windows_and_draws_the_picked_one(page, settings):
    from bertviz_app.ui import attention_tab

    a, d = page.a, page.a.doc
    rec = analysed(page, LONG)
    view = attention_tab.read_document(rec, 1, 128, settings)  # the slider's 128: at most half the length, 32
    ref = attention_windows(page.load(page.default), LONG, window=1, stride=32)
    assert view.stride == 32 and view.doc.windows == ref.windows > 2 and view.doc.window == 1
    out = attention_tab.render_document(a, view, 2, "head 2", False, False)
    labels = [lab for lab, _ in out[d.window]["choices"]]
    assert len(labels) == ref.windows and out[d.window]["value"] == 1
    a0, b0 = ref.spans[1]
    assert labels[1] == f"window 1: tokens {a0}–{b0 - 1}"
    assert f"**{ref.windows} windows**" in out[d.reading] and "**Shown: window 1**" in out[d.reading]
    title = out[d.heatmap].layout.title.text
    assert title.startswith(f"Window 1 (document tokens {a0}–{b0 - 1})") and "layer 2, head 2" in title
    np.testing.assert_allclose(np.asarray(out[d.heatmap].data[0].z), np.round(ref.maps.weights[1, 1], 4), atol=2e-3)
    # the merged rows cover every document token, the last words of the text included
    cls = out[d.cls]
    assert np.asarray(cls.data[0].z).shape == (2, len(ref.info))
    assert cls.data[0].x[-2].startswith("fun")
    np.testing.assert_allclose(np.asarray(cls.data[0].z), np.round(ref.cls_row, 4), atol=1e-4)
    np.testing.assert_allclose(np.asarray(out[d.agg].data[0].z), np.round(ref.rollout_cls, 4), atol=1e-4)
    for fig in (out[d.heatmap], out[d.cls], out[d.agg]):  # each downloads under a name that says what it is
        assert fig.layout.meta["download"]


def test_picking_a_window_reads_that_window_alone(page, settings, monkeypatch):
    from bertviz_app.ui import attention_tab

    rec = analysed(page, LONG)
    view = attention_tab.read_document(rec, 0, 16, settings)
    monkeypatch.setattr(attention_tab, "attention_windows", None)  # not the whole document again
    two = attention_tab.pick_window(rec, view, 2, 16, settings)
    assert two.doc.window == 2 and two.doc.cls_row is view.doc.cls_row
    ref = window_maps(page.load(page.default), LONG, window=2, stride=16)
    np.testing.assert_allclose(two.doc.maps.weights, ref.weights, atol=1e-3)
    assert two.doc.maps.info.tokens == ref.info.tokens
    assert attention_tab.pick_window(rec, two, 2, 16, settings) is two  # the same window: nothing read


def test_window_maps_are_the_windows_own(tiny):
    whole = attention_windows(tiny, LONG, window=1, stride=16, measure="alti")
    one = window_maps(tiny, LONG, window=1, stride=16, measure="alti")
    np.testing.assert_allclose(one.combined, whole.maps.combined, atol=1e-5)
    assert one.info.tokens == whole.maps.info.tokens and one.measure == "alti"


def test_another_measure_stales_the_document_and_the_window_follows_it(page, settings):
    import gradio as gr

    from bertviz_app.ui import attention_tab

    a, d = page.a, page.a.doc
    rec = analysed(page, LONG)
    view = attention_tab.read_document(rec, 1, 16, settings)
    out = page.change_measure(page.default, rec, "value_zeroing", {}, 1, attention_tab.MEAN, False, False)
    assert out[d.state] is None and out[d.panel]["visible"] is True  # read with raw attention: emptied
    vz = out[page.state]
    # picking a window with the document read for another measure reads it all again with the tab's
    again = attention_tab.pick_window(vz, view, 1, 16, settings)
    assert again.doc.measure == "value_zeroing" and again.doc.window == 1
    drawn = attention_tab.render_document(a, again, 1, attention_tab.LAYER, False, False)
    assert drawn[d.heatmap].layout.title.text.endswith("Value zeroing, layer 1, whole layer")
    assert "value zeroing" in drawn[d.cls].layout.title.text and "Value zeroing aggregated" in \
        drawn[d.agg].layout.title.text
    ref = attention_windows(page.load(page.default), LONG, window=1, stride=16, measure="value_zeroing")
    np.testing.assert_allclose(again.doc.rollout_cls, ref.rollout_cls, atol=1e-5)
    # the tab's layer/head/token-view controls redraw from what was read; before any reading, nothing
    merged = attention_tab.rerender_document(a, again, 2, attention_tab.LAYER, True, True)
    assert "layer 2" in merged[d.heatmap].layout.title.text
    assert "[CLS]" not in list(merged[d.cls].data[0].x)[0]  # specials hidden
    assert all(v == gr.skip() for v in attention_tab.rerender_document(a, None, 1, "x", 0, 0).values())


def test_bad_input_gets_a_message(page, settings):
    from bertviz_app.ui import attention_tab

    rec = analysed(page, LONG)
    with pytest.raises(bv.InputError, match=r"window must be a whole number from 0 to \d+ \(this text is read in"):
        attention_tab.read_document(rec, 99, 16, settings)
    with pytest.raises(bv.InputError, match="window must be a whole number"):
        attention_tab.read_document(rec, "first", 16, settings)
    with pytest.raises(bv.InputError, match="Press Analyze first"):
        attention_tab.read_document(None, 0, 16, settings)
    with pytest.raises(bv.InputError, match="Press Analyze first"):
        attention_tab.pick_window(None, None, 0, 16, settings)
    # a text that fits: one window, and the part says so
    short = analysed(page, SHORT)
    view = attention_tab.read_document(short, 0, 16, settings)
    assert view.doc.windows == 1
    assert "**1 window:** this text fits the model" in attention_tab.document_reading(view)
    with pytest.raises(bv.InputError, match="this text fits the model: it is read in 1 window"):
        attention_tab.read_document(short, 1, 16, settings)


def test_the_guarded_handlers_show_the_message_not_a_traceback(page):
    import gradio as gr

    from bertviz_app.ui import attention_tab, guards

    rec = analysed(page, LONG)
    guarded = guards.guard(attention_tab.read_document)
    with pytest.raises(gr.Error) as exc:
        guarded(rec, 50, 16, page.settings)
    assert "window must be a whole number from 0 to" in exc.value.message and "Traceback" not in exc.value.message
