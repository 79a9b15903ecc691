"""What matters is in view (issue 36), on the figure objects: a whole document's [CLS] charts draw a bounded
number of columns, each the sum of the document tokens it names (checked against the merged [CLS] rows
directly, not through the code that made the columns), and a short document's chart is what it was; a
context-mixing measure without heads (ALTI, value zeroing) gets one tile per layer, labelled by layer, no
"H1" axis, while a measure with heads keeps its layers x heads grid."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

import bertviz_app as bv
from bertviz_app.interpret.mixing_measures import context_mixing
from bertviz_app.ui import analysis, attention_tab, plots, token_views

WORDS = ["the", "film", "movie", "good", "bad", "joyless", "slogging", "is", "not", ",", "."]
SPAN = re.compile(r"\((?:token (\d+)|tokens (\d+)–(\d+))\)$")  # the end of a column's hover: its document tokens


@pytest.fixture(scope="module")
def long_doc(tiny):
    """A ~1,600-token document (joyless, slogging: two pieces each) read whole in windows."""
    text = " ".join(random.Random(0).choices(WORDS, k=1200))
    d = bv.attention_windows(tiny, text)
    assert len(d.info.tokens) > 2 * plots.MAX_COLUMNS  # far more tokens than a chart has pixels for
    return attention_tab.DocumentView(d, 32, text, None, tiny.max_length)


def _token_spans(fig) -> list[tuple[int, int]]:
    """Each drawn column's first and last document token, read from its hover (the x category)."""
    out = []
    for cat in fig.data[0].x:
        m = SPAN.search(cat)
        assert m, f"a column's hover does not say which tokens it covers: {cat!r}"
        out.append((int(m.group(1)),) * 2 if m.group(1) else (int(m.group(2)), int(m.group(3))))
    return out


@pytest.mark.parametrize("merge", [False, True])
def test_a_long_documents_cls_charts_draw_bounded_columns_each_the_sum_of_its_tokens(long_doc, merge):
    d = long_doc.doc
    n = len(d.info.tokens)
    _, cls, agg = attention_tab.document_charts(long_doc, 1, attention_tab.MEAN, False, merge)
    for fig, merged in ((cls, d.cls_row), (agg, d.rollout_cls)):
        z = np.asarray(fig.data[0].z, dtype=np.float64)  # (L, B)
        assert 20 < z.shape[1] <= plots.MAX_COLUMNS and z.shape[0] == d.cls_row.shape[0]
        spans = _token_spans(fig)
        # the columns tile the document: every token in exactly one column, in order, [CLS] and [SEP] alone
        assert spans[0] == (0, 0) and spans[-1] == (n - 1, n - 1)
        assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:]))
        expected = np.stack([merged[:, a:b + 1].astype(np.float64).sum(axis=1) for a, b in spans], axis=1)  # (L, B)
        np.testing.assert_allclose(z, expected, rtol=1e-3, atol=1e-4)  # z is drawn rounded to 4 decimals
        assert expected.max() > 10 * 1e-4  # the tolerance is small against the values compared
    title, axis = cls.layout.title.text, cls.layout.xaxis.title.text
    per = max(b - a for a, b in _token_spans(cls))
    assert "words a column" in title and f"{n:,} tokens in {len(cls.data[0].x):,} columns" in axis
    assert per > 1  # a column covers several tokens here: the sums above compare more than single tokens


def test_hiding_cls_and_sep_drops_their_columns_and_keeps_the_others_sums(long_doc):
    d = long_doc.doc
    n = len(d.info.tokens)
    _, cls, _ = attention_tab.document_charts(long_doc, 1, attention_tab.MEAN, True, False)
    spans = _token_spans(cls)
    assert spans[0][0] == 1 and spans[-1][1] == n - 2  # no [CLS] (token 0), no [SEP] (the last)
    z = np.asarray(cls.data[0].z, dtype=np.float64)
    expected = np.stack([d.cls_row[:, a:b + 1].astype(np.float64).sum(axis=1) for a, b in spans], axis=1)
    np.testing.assert_allclose(z, expected, rtol=1e-3, atol=1e-4)


def test_a_short_documents_cls_chart_is_unchanged(tiny):
    """A document that fits in the chart's columns: one column per token, drawn as before (no column note)."""
    text = " ".join(random.Random(1).choices(WORDS, k=150))
    d = bv.attention_windows(tiny, text)
    assert d.windows > 1 and len(d.info.tokens) <= plots.MAX_COLUMNS
    view = attention_tab.DocumentView(d, 32, text, None, tiny.max_length)
    _, cls, _ = attention_tab.document_charts(view, 1, attention_tab.MEAN, False, False)
    tv = token_views.token_view(d.info, False)
    before = plots.cls_rows_heatmap(token_views.view_scores(d.cls_row, tv), tv.labels, title=cls.layout.title.text)
    assert list(cls.data[0].x) == list(before.data[0].x) and len(cls.data[0].x) == len(d.info.tokens)
    np.testing.assert_array_equal(np.asarray(cls.data[0].z), np.asarray(before.data[0].z))
    assert cls.layout.xaxis.title.text is None and "a column" not in cls.layout.title.text


def test_column_bins_keep_specials_alone_and_use_the_smallest_span_that_fits():
    special = [True, *([False] * 999), True]
    spans = plots.column_bins(special, 100)
    assert len(spans) <= 100 and spans[0] == (0, 1) and spans[-1] == (1000, 1001)
    assert [a for a, _ in spans[1:]] == [b for _, b in spans[:-1]]  # consecutive, covering
    k = max(b - a for a, b in spans)
    assert k == 11  # 999 words in at most 98 spans: ceil(999 / 98) = 11; 10 would need 100 + 2 columns
    assert plots.column_bins([False] * 50, 100) == [(i, i + 1) for i in range(50)]  # fits: each alone
    np.testing.assert_allclose(plots.bin_columns(np.arange(6.0)[None], [(0, 1), (1, 4), (4, 6)]), [[0, 6, 9]])


def _mixing_record(tiny, tiny_model_dir, measure: str) -> analysis.Record:
    """A Record whose Attention tab draws ``measure`` (the overview reads only its ``mixing``)."""
    text = "the film was good , not a tedious slog"
    return analysis.Record(model=str(tiny_model_dir), labels=tiny.labels, device_label="cpu", prediction=None,
                         maps=None, lens=None, mixing=context_mixing(tiny, text, measure=measure))


@pytest.mark.parametrize("measure", ["alti", "value_zeroing"])
def test_a_measure_without_heads_gets_one_tile_per_layer_labelled_by_layer(tiny, tiny_model_dir, measure):
    rec = _mixing_record(tiny, tiny_model_dir, measure)
    assert rec.mixing.num_heads == 1
    fig, _ = attention_tab.render_overview(rec, False, False)
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks == [f"layer {i + 1}" for i in range(rec.mixing.num_layers)]
    cats = [str(c) for c in (*fig.data[0].x, *fig.data[0].y, *ticks, *(fig.layout.yaxis.ticktext or ()))]
    assert not any(re.search(r"\bH\d", c) for c in cats) and "head" not in fig.layout.title.text.replace(
        "no heads", "")
    # one square tile per layer: the tokens down, each layer's tokens across, with one gap between tiles
    t = len(rec.mixing.tokens)
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    assert z.shape == (t, rec.mixing.num_layers * (t + 1) - 1)
    for layer in range(rec.mixing.num_layers):  # each tile is its layer's matrix, on its own scale
        tile = z[:, layer * (t + 1): layer * (t + 1) + t]
        m = rec.mixing.weights[layer, 0]
        np.testing.assert_allclose(tile, m / m.max(), atol=1e-3)
    assert fig.layout.yaxis.scaleanchor == "x"  # square cells, not stretched strips


def test_a_measure_with_heads_keeps_its_layers_by_heads_grid(tiny, tiny_model_dir):
    """The positive control: attention-norm has heads, so its overview keeps the H1, H2 axis."""
    rec = _mixing_record(tiny, tiny_model_dir, "norm")
    assert rec.mixing.num_heads == 2
    fig, _ = attention_tab.render_overview(rec, False, False)
    assert list(fig.layout.xaxis.ticktext) == ["H1", "H2"]
    assert list(fig.layout.yaxis.ticktext) == ["L1", "L2"]
