"""The page's generated words (issue 22): notices, legends and warnings say what is drawn, in
sentences that start with a capital."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("gradio")

from bertviz_app.results import Attribution, TokenInfo  # noqa: E402
from bertviz_app.ui import common, predict_tab  # noqa: E402


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
