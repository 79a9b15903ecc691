"""Attention tab: one layer/head (or the mean of heads) zoomed in, the overview of every
layer x head, where [CLS] looks in each layer, and attention rollout. Every control re-renders
from the stored record; nothing is recomputed, except that choosing another measure (raw attention,
attention-norm, value zeroing, ALTI: ``bertviz_app.context_mixing``) computes that measure for the
record's text once (``Page.change_measure``) and keeps it on the record (``Record.mixing``)."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import numpy as np

import bertviz_app as core
from bertviz_app.context_mixing import MEASURE_NOTES, MEASURES, supported_measures

from . import common, figures, plots

MEAN = "mean of heads"
LAYER = "whole layer"  # a context-mixing measure's per-layer matrix (heads combined, or none to pick from)
# What the page calls each measure (MEASURES' names, the CLI's --measure)
MEASURE_LABELS = {"raw": "raw attention", "norm": "attention-norm", "value_zeroing": "value zeroing", "alti": "ALTI"}


def measure_choices(names=None) -> list[tuple[str, str]]:
    """(label, name) for the measures ``names`` (default: all), in MEASURES' order."""
    names = MEASURES if names is None else names
    return [(MEASURE_LABELS.get(n, n), n) for n in MEASURES if n in names]


def measure_note(measure: str | None, refused: str | None = None) -> str:
    """The line under the measure choice: what it is and why it differs from raw attention; or why
    the model cannot have it (``refused``)."""
    if refused:
        return f"**Not available:** {common.esc(refused)}"
    note = MEASURE_NOTES.get(measure or "raw", "")
    return common.esc(note)


def build() -> SimpleNamespace:
    gr.Markdown("Rows are the tokens doing the attending (queries), columns the tokens attended to (keys). "
                "Pick a layer and a head (or the mean of heads) to zoom; the overview below shows them all.")
    measure = gr.Dropdown(choices=measure_choices(), value="raw", label="Measure", elem_id="bv-measure",
                          info="what a cell shows: where a token looks, or what it takes from another token")
    measure_note_md = gr.Markdown(measure_note("raw"), elem_id="bv-measure-note")
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
                           rollout=rollout, overview=overview, overview_notice=overview_notice, measure=measure,
                           measure_note=measure_note_md)


def measure_control(ui: SimpleNamespace, lm: core.LoadedModel) -> dict:
    """The measure choice for a newly opened model: the measures its family supports; back to raw
    attention (and its line) when the family lacks one, so the choice never names a refused measure."""
    names = supported_measures(lm)
    if set(names) >= set(MEASURES):
        return {ui.measure: gr.update(choices=measure_choices(names))}
    return {ui.measure: gr.update(choices=measure_choices(names), value="raw"), ui.measure_note: measure_note("raw")}


def head_index(head: str | None) -> int | None:
    """"head k" -> k - 1; the mean of heads or a measure's whole layer -> None."""
    if not head or not str(head).startswith("head "):
        return None
    return int(str(head).split()[-1]) - 1


def head_control(mixing) -> tuple[list[str], str]:
    """The head choices for what is drawn (``mixing``: a record's MixingMaps, None for raw attention),
    and the control's line saying whether the measure has heads."""
    if mixing is None:
        return [], ""
    label = MEASURE_LABELS.get(mixing.measure, mixing.measure)
    if mixing.num_heads > 1:
        return ([LAYER, *(f"head {h + 1}" for h in range(mixing.num_heads))],
                f"{label}: per head, or the whole layer (heads combined)")
    return [LAYER], f"{label} is measured per layer, not per head: the layer's matrix is shown"


def controls(ui: SimpleNamespace, rec: common.Record, layer: int, head: str) -> dict:
    n_layers, n_heads = rec.maps.num_layers, rec.maps.num_heads
    choices, info = head_control(rec.mixing)
    if not choices:
        choices = [MEAN, *(f"head {h + 1}" for h in range(n_heads))]
    return {
        ui.layer: gr.update(maximum=n_layers, value=min(max(int(layer or 1), 1), n_layers)),
        ui.head: gr.update(choices=choices, value=head if head in choices else choices[0], info=info),
    }


def render_focus(rec: common.Record, layer: int, head: str, hide: bool, merge: bool):
    """-> (token heatmap, [CLS] rows, rollout) for the chosen layer/head."""
    if rec is None:
        empty = plots.empty_figure()
        return empty, empty, empty
    if rec.mixing is not None:
        return render_mixing_focus(rec, layer, head, hide, merge)
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


def render_mixing_focus(rec: common.Record, layer: int, head: str, hide: bool, merge: bool):
    """``render_focus`` for a context-mixing measure (``rec.mixing``): its per-head or per-layer
    matrix, its [CLS] row by layer, and its aggregation across layers in place of the rollout."""
    mm = rec.mixing
    name = MEASURE_LABELS.get(mm.measure, mm.measure)
    label = name[:1].upper() + name[1:]  # "Value zeroing, layer 2" as a chart title
    li = min(max(int(layer or 1), 1), mm.num_layers) - 1
    hi = head_index(head)
    if hi is not None and (mm.num_heads == 1 or hi >= mm.num_heads):
        hi = None
    view = common.token_view(mm.info, merge)
    keep = view.keep(hide)
    labels = [view.labels[i] for i in keep]
    which = "whole layer" if hi is None else f"head {hi + 1}"
    mat = (mm.combined[li] if hi is None else mm.weights[li, hi]).astype(np.float32)  # (T, T)
    fig = plots.attention_heatmap(common.view_matrix(mat, view, keep), labels,
                                  title=f"{label}, layer {li + 1}, {which}")
    rows = (mm.combined[:, 0, :] if hi is None else mm.weights[:, hi, 0, :]).astype(np.float32)  # (L, T)
    rows = common.view_scores(rows, view, keep)  # (L, N)
    cls_fig = plots.cls_rows_heatmap(rows, labels, title=f"What [CLS] takes from each token, by layer ({name}, "
                                                          f"{which})")
    agg = mm.aggregated[li].astype(np.float32)  # (T, T)
    roll_fig = plots.attention_heatmap(common.view_matrix(agg, view, keep), labels,
                                       title=f"{label} aggregated over layers 1 to {li + 1} (flow from input tokens)")
    return fig, cls_fig, roll_fig


def render_overview(rec: common.Record, hide: bool, merge: bool):
    """-> (overview figure, notice markdown)."""
    if rec is None:
        return plots.empty_figure(), ""
    mm = rec.mixing
    info, weights = (rec.maps.info, rec.maps.weights) if mm is None else (mm.info, mm.weights)
    view = common.token_view(info, merge)
    keep = view.keep(hide)
    w = common.view_matrix(weights.astype(np.float32), view, keep)  # (L, H, N, N)
    fig, notice = plots.attention_overview(w, [view.labels[i] for i in keep])
    if mm is not None:
        label = MEASURE_LABELS.get(mm.measure, mm.measure)
        label = label[:1].upper() + label[1:]
        per = "layers × heads" if mm.num_heads > 1 else "layers (the measure has no heads)"
        fig.update_layout(title_text=f"{label}: all {per}, each tile on its own colour scale")
    return fig, (f"**Note:** {notice}" if notice else "")


def render(ui: SimpleNamespace, rec: common.Record, layer: int, head: str, hide: bool, merge: bool) -> dict:
    fig, cls_fig, roll_fig = render_focus(rec, layer, head, hide, merge)
    over, notice = render_overview(rec, hide, merge)
    return {ui.heatmap: fig, ui.cls_rows: cls_fig, ui.rollout: roll_fig, ui.overview: over, ui.overview_notice: notice}
