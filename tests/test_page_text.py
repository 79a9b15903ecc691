"""The page's generated words (issue 22): notices, legends and warnings say what is drawn, in
sentences that start with a capital; the Analyze button's progress and time left."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("gradio")

import bertviz_app as core  # noqa: E402
from bertviz_app.results import Attribution, TokenInfo  # noqa: E402
from bertviz_app.ui import attribution_tab, common, predict_tab  # noqa: E402


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
    rec = common.analyze_fast(tiny, long, None)
    notice = predict_tab.truncation_notice(rec, tiny.max_length)
    assert "the text was truncated" in notice and "It is longer than this model reads (64 tokens)" in notice
    assert_sentences_capitalised(notice)
    assert_sentences_capitalised(predict_tab.truncation_notice(common.analyze_fast(tiny, long, None, window=True),
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
