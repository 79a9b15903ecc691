"""The page's generated words (issue 22): notices, legends and warnings say what is drawn, in
sentences that start with a capital; the Analyze button's progress and time left."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

pytest.importorskip("gradio")

import bertviz_app as core  # noqa: E402
from bertviz_app.results import Attribution, TokenInfo  # noqa: E402
from bertviz_app.ui import analysis, attribution_tab, predict_tab, streaming  # noqa: E402


def sentence_starts(text: str) -> list[str]:
    """The first word of every sentence of ``text`` (Markdown/HTML stripped)."""
    plain = re.sub(r"<[^>]+>|\*\*|\\", "", text)
    return [m.group(1) for m in re.finditer(r"(?:^|[.!?]\s+)([A-Za-z]\w*)", plain)]


def assert_sentences_capitalised(text: str) -> None:
    low = [w for w in sentence_starts(text) if w[0].islower()]
    assert not low, f"sentences starting with {low} in: {text}"


def attr_of(scores, change: float, method: str = "integrated_gradients", f_baseline: float = 0.5) -> Attribution:
    words = ["a", "good", "film", "bad", "plot"][: len(scores) - 2]
    tokens = ("[CLS]", *words, "[SEP]")
    offsets, at = [(0, 0)], 0
    for w in words:
        offsets.append((at, at + len(w)))
        at += len(w) + 1
    info = TokenInfo(tokens=tokens, offsets=(*offsets, (0, 0)), sequence_ids=(None, *[0] * len(words), None),
                     text=" ".join(words), pair=None, truncated=False)
    return Attribution(info=info, scores=np.asarray(scores, dtype=np.float32), target="positive", target_index=1,
                       output="prob", f_x=f_baseline + change, f_baseline=f_baseline, delta=0.0, n_steps=50,
                       baseline="pad", method=method)


# --------------------------------------------------------------------------- item 6: capitals
def test_truncation_notice_sentences_start_with_a_capital(tiny):
    long = "the film was good . " * 40  # > 64 tokens of the tiny model
    rec = analysis.analyze_fast(tiny, long, None)
    notice = predict_tab.truncation_notice(rec, tiny.max_length)
    assert "the text was truncated" in notice and "It is longer than this model reads (64 tokens)" in notice
    assert_sentences_capitalised(notice)
    assert_sentences_capitalised(predict_tab.truncation_notice(analysis.analyze_fast(tiny, long, None, window=True),
                                                               tiny.max_length))


def test_attribution_texts_start_sentences_with_a_capital():
    for a in (attr_of([0, 0.3, -0.3, 0.002, 0], 0.002), attr_of([0, 0.001, 0.002, 0.001, 0], 0.004),
              attr_of([0, 0.3, 0.2, -0.05, 0], 0.45)):
        for text in (attribution_tab.delta_md(a), core.attribution_tokens_html(a, merge=False, min_change=0.05),
                     core.colour_scale(a).describe(), core.change_warning(a) or ""):
            assert_sentences_capitalised(text)
    for skipped in (True, False):
        assert_sentences_capitalised(attribution_tab.pending_md(skipped))


# --------------------------------------------------------------------------- item 2: pale or not
def test_a_tiny_change_with_cancelling_strong_tokens_is_not_called_pale():
    """A sentence pair whose texts pull opposite ways: +-0.3 per word, +0.002 in all. The words are
    drawn at full strength, so the warning must not say the colours are kept pale."""
    a = attr_of([0, 0.3, -0.3, 0.002, 0], 0.002)
    scale = core.colour_scale(a, min_change=0.05)
    assert scale.too_small and scale.alpha(0.3) == 1.0
    warning = core.change_warning(a, scale)
    assert "pale" not in warning and "cancel each other out" in warning and "\u00b10.3" in warning
    page = core.attribution_tokens_html(a, merge=False, min_change=0.05)
    assert "pale" not in page and "cancel each other out" in page
    assert "pale" not in scale.describe() and "pale" not in attribution_tab.delta_md(a)
    assert "pale" not in core.explanation_html(a, min_change=0.05)


def test_a_tiny_change_with_small_tokens_is_still_called_pale():
    a = attr_of([0, 0.001, 0.002, 0.001, 0], 0.004)
    scale = core.colour_scale(a, min_change=0.05)
    assert max(scale.alpha(v) for v in a.scores) < 0.1
    assert "the colours are kept pale on purpose" in core.change_warning(a, scale)
    assert core.change_warning(attr_of([0, 0.3, 0.2, -0.05, 0], 0.45), None) is None


def test_the_warning_follows_the_drawn_units_when_pieces_are_merged():
    """Two pieces at +0.02 each are pale as tokens (0.4 of full) but 0.8 of full as one word."""
    a = attr_of([0, 0.02, 0.02, 0.0, 0], 0.004)
    scale = core.colour_scale(a, min_change=0.05)
    assert "kept pale" in core.change_warning(a, scale)
    assert "kept pale" not in core.change_warning(a, scale, drawn=[0.0, 0.04, 0.0, 0.0])


# --------------------------------------------------------------------------- item 3: magnitudes
def test_saliency_legend_says_magnitude_not_direction():
    a = attr_of([0, 0.3, 0.1, 0.05, 0], 0.2, method="saliency")
    page = core.attribution_tokens_html(a, merge=False)
    legend = page[page.index('class="bv-legend"'):]
    assert "pushes towards" not in legend and "pushes away" not in legend
    assert "magnitude with no direction" in legend
    assert "44, 160, 44" not in page  # no green: green means "for the class"
    assert "pushes towards" not in core.explanation_html(a)
    for method in ("integrated_gradients", "gradient_x_input", "occlusion", "kernel_shap", "lime"):
        signed = core.attribution_tokens_html(attr_of([0, 0.3, -0.1, 0.05, 0], 0.2, method=method), merge=False)
        assert "pushes towards" in signed and "magnitude" not in signed
    assert set(core.METHODS) >= {"saliency"} and not core.is_signed("saliency")
    assert "no direction" in attribution_tab.unsigned_note(["integrated_gradients", "saliency"])
    assert attribution_tab.unsigned_note(["integrated_gradients", "occlusion"]) == ""


# --------------------------------------------------------------------------- item 1: progress at the button
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_analyze_progress_counts_time_left_in_the_texts_own_passes():
    clock = Clock()
    p = streaming.AnalyzeProgress(n_layers=6, clock=clock)
    assert p.label() == "Analyzing\u2026 2%"  # nothing timed yet: no time left to say
    assert "Skip Integrated Gradients" in p.status() and p.status().startswith("**Loading the model\u2026**")
    p.step(0.05, "Predicting")
    clock.now += 0.5
    p.step(0.1, "Reading attention")
    clock.now += 0.4  # one forward pass of this text: 0.4 s
    p.step(0.15, "[CLS] lens")
    # lens 0.4 + IG 20 evaluations x 2 passes x 0.4 + faithfulness 3 x 0.4 + path 7 depths x 20 steps x 0.5 x 0.8
    assert p.left() == pytest.approx(0.4 + 16 + 1.2 + 56)
    assert p.label() == "Analyzing\u2026 2% \u00b7 about 74 s left"  # 0.9 s of 74.5 is 1%, but it never goes back

    clock.now += 0.4  # the same event carries on into Integrated Gradients, with the same tracker
    ig = p
    ig.step(0.2, streaming.AnalyzeProgress.IG_PHASES[0])
    assert ig.n_layers == 6 and "the prediction and attention are ready" in ig.status()
    ig.step(0.25, "Integrated Gradients")
    clock.now += 5.2
    ig.ig_done(dataclasses.replace(attr_of([0, 0.1, 0.2, 0.1, 0], 0.4), n_steps=13))  # 13 evaluations in 5.2 s
    ig.step(0.55, "Faithfulness")  # one evaluation took 0.4 s here: the path is re-estimated from it
    assert ig.left() == pytest.approx(1.2 + 7 * 20 * 0.5 * 0.4)
    before = ig.fraction()
    ig.step(0.6, "[CLS] path through the layers")
    clock.now += 100  # far past its 28 s estimate: taken as about 85% done, never "0 s left"
    assert ig.left() == pytest.approx(15)
    assert before < ig.fraction() <= 0.99
    assert "about 15 s left" in ig.label() and ig.status().startswith("**[CLS] path through the layers\u2026**")


def test_analyze_progress_without_integrated_gradients_and_in_minutes():
    clock = Clock()
    p = streaming.AnalyzeProgress(n_layers=12, skip_ig=True, clock=clock)
    p.step(0.1, "Reading attention")
    clock.now += 2.0
    p.step(0.15, "[CLS] lens")
    assert p.left() == pytest.approx(2.0) and "Skip Integrated Gradients" not in p.status()
    assert streaming.AnalyzeProgress.duration(0.4) == "about a second"
    assert streaming.AnalyzeProgress.duration(150) == "about 2 min"
    assert_sentences_capitalised(p.status())


def test_stream_work_yields_updates_while_the_work_runs_and_returns_or_raises():
    import threading

    release = threading.Event()

    def handler(work):
        out = yield from streaming.stream_work(work, lambda: "tick")
        yield ("done", out)

    def slow():
        release.wait(5)
        return 42

    gen = handler(slow)
    assert next(gen) == "tick"  # at once, before the work ends
    release.set()
    assert list(gen)[-1] == ("done", 42)

    def broken():
        raise core.InputError("the text is empty")

    with pytest.raises(core.InputError, match="empty"):
        list(handler(broken))
