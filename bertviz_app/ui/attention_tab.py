"""Attention tab: one layer/head (or the mean of heads) zoomed in, the overview of every
layer x head, where [CLS] looks in each layer, and attention rollout. Every control re-renders
from the stored record; nothing is recomputed."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import numpy as np

import bertviz_app as core

from . import common, figures, plots

MEAN = "mean of heads"


def build() -> SimpleNamespace:
    gr.Markdown("Rows are the tokens doing the attending (queries), columns the tokens attended to (keys). "
                "Pick a layer and a head (or the mean of heads) to zoom; the overview below shows them all.")
    with gr.Row():
        layer = gr.Slider(1, 12, value=1, step=1, label="Layer", elem_id="bv-layer")
        head = gr.Dropdown(choices=[MEAN], value=MEAN, label="Head", elem_id="bv-head")
        hide = gr.Checkbox(value=False, label="Hide [CLS]/[SEP]", info="rows then no longer sum to 1")
        merge = gr.Checkbox(value=False, label="Merge word pieces into words",
                            info="attention to a word is summed, from a word averaged")
    heatmap = figures.plot(label="Attention (token × token)", elem_id="bv-heatmap")
    with gr.Row():
        cls_rows = figures.plot(label="[CLS] row across layers", elem_id="bv-cls-rows")
        rollout = figures.plot(label="Attention rollout", elem_id="bv-rollout")
    overview_notice = gr.Markdown()
    overview = figures.plot(label="Overview: every layer × head", elem_id="bv-overview")
    return SimpleNamespace(layer=layer, head=head, hide=hide, merge=merge, heatmap=heatmap, cls_rows=cls_rows,
                           rollout=rollout, overview=overview, overview_notice=overview_notice)


def head_index(head: str | None) -> int | None:
    if not head or head == MEAN:
        return None
    return int(str(head).split()[-1]) - 1


def controls(ui: SimpleNamespace, rec: common.Record, layer: int, head: str) -> dict:
    n_layers, n_heads = rec.maps.num_layers, rec.maps.num_heads
    choices = [MEAN, *(f"head {h + 1}" for h in range(n_heads))]
    return {
        ui.layer: gr.update(maximum=n_layers, value=min(max(int(layer or 1), 1), n_layers)),
        ui.head: gr.update(choices=choices, value=head if head in choices else MEAN),
    }


def render_focus(rec: common.Record, layer: int, head: str, hide: bool, merge: bool):
    """-> (token heatmap, [CLS] rows, rollout) for the chosen layer/head."""
    if rec is None:
        empty = plots.empty_figure()
        return empty, empty, empty
    n_layers = rec.maps.num_layers
    li = min(max(int(layer or 1), 1), n_layers) - 1
    hi = head_index(head)
    if hi is not None and hi >= rec.maps.num_heads:
        hi = None
    view = common.token_view(rec.maps.info, merge)
    keep = view.keep(hide)
    labels = [view.labels[i] for i in keep]
    w = rec.maps.weights  # (L, H, T, T) float16
    mat = w[li].astype(np.float32).mean(axis=0) if hi is None else w[li, hi].astype(np.float32)  # (T, T)
    which = "mean of heads" if hi is None else f"head {hi + 1}"
    fig = plots.attention_heatmap(common.view_matrix(mat, view, keep), labels, title=f"Layer {li + 1}, {which}")
    rows = core.cls_rows(w.astype(np.float32), head=hi)  # (L, T)
    rows = common.view_scores(rows, view, keep)  # (L, N)
    cls_fig = plots.cls_rows_heatmap(rows, labels, title=f"Where [CLS] looks, by layer ({which})")
    roll = core.rollout(w.astype(np.float32))[li]  # (T, T)
    roll_fig = plots.rollout_heatmap(common.view_matrix(roll, view, keep), labels, layer=li + 1)
    return fig, cls_fig, roll_fig


def render_overview(rec: common.Record, hide: bool, merge: bool):
    """-> (overview figure, notice markdown)."""
    if rec is None:
        return plots.empty_figure(), ""
    view = common.token_view(rec.maps.info, merge)
    keep = view.keep(hide)
    w = common.view_matrix(rec.maps.weights.astype(np.float32), view, keep)  # (L, H, N, N)
    fig, notice = plots.attention_overview(w, [view.labels[i] for i in keep])
    return fig, (f"**Note:** {notice}" if notice else "")


def render(ui: SimpleNamespace, rec: common.Record, layer: int, head: str, hide: bool, merge: bool) -> dict:
    fig, cls_fig, roll_fig = render_focus(rec, layer, head, hide, merge)
    over, notice = render_overview(rec, hide, merge)
    return {ui.heatmap: fig, ui.cls_rows: cls_fig, ui.rollout: roll_fig, ui.overview: over, ui.overview_notice: notice}
