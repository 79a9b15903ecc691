"""Attention tab: one layer/head (or the mean of heads) zoomed in, the overview of every
layer x head, where [CLS] looks in each layer, and attention rollout. Every control re-renders
from the stored record; nothing is recomputed, except that choosing another measure (raw attention,
attention-norm, value zeroing, ALTI: ``bertviz_app.interpret.mixing_measures``) computes that measure for the
record's text once (``Page.change_measure``) and keeps it on the record (``Record.mixing``).

A text longer than the model reads gets a closed "Whole document (windows)" part: on its own button
(never on Analyze) the text is read in predict's overlapping windows with the tab's measure
(``long_documents.attention_windows``): the picked window's heatmap, and the [CLS] row and the
aggregated [CLS] row merged over every token of the document. Picking another window reads that window
alone (``long_documents.window_maps``)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import gradio as gr
import numpy as np

import bertviz_app as core
from bertviz_app.interpret.long_documents import attention_windows, window_maps
from bertviz_app.interpret.mixing_measures import MEASURE_NOTES, MEASURES, supported_measures

from . import analysis, figures, guards, model_loading, plots, token_views
from .control_values import stride_slider, window_stride
from .markup import esc

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
        return f"**Not available:** {esc(refused)}"
    note = MEASURE_NOTES.get(measure or "raw", "")
    return esc(note)


def build() -> SimpleNamespace:
    gr.Markdown("Rows are the tokens doing the attending (queries), columns the tokens attended to (keys). "
                "Pick a layer and a head (or the mean of heads) to zoom; the overview below shows them all.")
    measure = gr.Dropdown(choices=measure_choices(), value="raw", label="Measure", elem_id="bv-measure",
                          info="what a cell shows: where a token looks, or what it takes from another token")
    measure_note_md = gr.Markdown(measure_note("raw"), elem_id="bv-measure-note")
    # why a measure change was refused (the model cannot be opened...): said here, where it stays
    status = gr.Markdown(elem_id="bv-attn-status")
    with gr.Row():
        layer = gr.Slider(1, 12, value=1, step=1, label="Layer", elem_id="bv-layer")
        head = gr.Dropdown(choices=[MEAN], value=MEAN, label="Head", elem_id="bv-head")
        hide = gr.Checkbox(value=False, label="Hide [CLS]/[SEP]", info="rows then no longer sum to 1")
        merge = gr.Checkbox(value=False, label="Merge word pieces into words",
                            info="attention to a word is summed, from a word averaged")
    # a tagger's line: every row is read by its head, and which rows are its entities' (empty for a classifier)
    note = gr.Markdown(elem_id="bv-attn-note")
    heatmap = figures.plot(label="Attention (token × token)", elem_id="bv-heatmap")
    with gr.Row():
        cls_rows = figures.plot(label="[CLS] row across layers", elem_id="bv-cls-rows")
        rollout = figures.plot(label="Attention rollout", elem_id="bv-rollout")
    overview_notice = gr.Markdown()
    overview = figures.plot(label="Overview: every layer (× head, for a measure with heads)", elem_id="bv-overview")
    doc = build_document()
    return SimpleNamespace(layer=layer, head=head, hide=hide, merge=merge, heatmap=heatmap, cls_rows=cls_rows,
                           rollout=rollout, overview=overview, overview_notice=overview_notice, measure=measure,
                           measure_note=measure_note_md, status=status, doc=doc, note=note)


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


def controls(ui: SimpleNamespace, rec: analysis.Record, layer: int, head: str) -> dict:
    n_layers, n_heads = rec.maps.num_layers, rec.maps.num_heads
    choices, info = head_control(rec.mixing)
    if not choices:
        choices = [MEAN, *(f"head {h + 1}" for h in range(n_heads))]
    return {
        ui.layer: gr.update(maximum=n_layers, value=min(max(int(layer or 1), 1), n_layers)),
        ui.head: gr.update(choices=choices, value=head if head in choices else choices[0], info=info),
    }


# What a tagger's Attention tab shows where a classifier's has the [CLS] row by layer
NO_CLS_ROW = ("No [CLS] row for a tagger: its head reads every token's own last state, not [CLS]'s. The entities' "
              "rows are outlined in the map above.")
ENTITY_LINE = "#d62728"  # the outline of an entity's rows


def entity_rows(rec: analysis.TagRecord, view: token_views.TokenView, keep) -> list[tuple[int, int, str]]:
    """(first row, last row, "text · LABEL") of each of the tagging's entities among the heatmap's rows (``view``'s
    units restricted to ``keep``): the rows of the tokens whose characters overlap the entity's. An entity past the
    tokens drawn (a long text's) has none."""
    info = rec.maps.info
    out = []
    for e in rec.tagging.entities:
        toks = {p for p, ((a, b), sid) in enumerate(zip(info.offsets, info.sequence_ids))
                if sid is not None and a < e.end and b > e.start}
        rows = rows_of_tokens(info, view, keep, toks)
        if rows:
            out.append((min(rows), max(rows), f"{e.text} · {e.label}"))
    return out


def rows_of_tokens(info: core.TokenInfo, view: token_views.TokenView, keep, toks: set[int]) -> list[int]:
    """The heatmap's rows (``view``'s units restricted to ``keep``) holding any of the token positions ``toks``."""
    groups = view.groups.groups if view.groups is not None else [(i,) for i in range(len(info.tokens))]
    row_of = {int(u): r for r, u in enumerate(keep)}
    return [row_of[u] for u, g in enumerate(groups) if u in row_of and toks.intersection(g)]


def mark_rows(fig, rows: list[tuple[int, int, str]], colour: str = ENTITY_LINE):
    """``fig`` (a token heatmap) with each (first, last, name) run of rows outlined, its name in the hover."""
    for a, b, name in rows:
        fig.add_shape(type="rect", xref="x domain", x0=0, x1=1, yref="y", y0=a - 0.5, y1=b + 0.5,
                      line=dict(color=colour, width=2), fillcolor="rgba(0,0,0,0)", name=name)
    return fig


# A question answering model's blocks: the question's rows, the context's, and the answer's among them
QUESTION_LINE, CONTEXT_LINE = "#1f77b4", "#2ca02c"


def side_rows(rec: analysis.AnswerRecord, view: token_views.TokenView, keep) -> dict[str, list[tuple[int, int, str]]]:
    """{"question": [(first, last, "question")], "context": [...], "answer": [...]}: the heatmap's rows of the
    question's tokens, the context's, and the answer's (its characters in the context); a block with no row drawn
    (the answer past the tokens drawn, "no answer") is an empty list."""
    info, a = rec.maps.info, rec.answer
    sides = {"question": {p for p, sid in enumerate(info.sequence_ids) if sid == 0},
             "context": {p for p, sid in enumerate(info.sequence_ids) if sid == 1},
             "answer": set() if a.no_answer else {
                 p for p, ((x, y), sid) in enumerate(zip(info.offsets, info.sequence_ids))
                 if sid == 1 and x < a.end and y > a.start}}
    out = {}
    for name, toks in sides.items():
        rows = rows_of_tokens(info, view, keep, toks)
        label = f"answer · {a.text}" if name == "answer" else name
        out[name] = [(min(rows), max(rows), label)] if rows else []
    return out


def mark_sides(fig, rec: analysis.AnswerRecord, view: token_views.TokenView, keep):
    """``fig`` with the question's rows outlined in blue, the context's in green, the answer's in red."""
    rows = side_rows(rec, view, keep)
    mark_rows(fig, rows["question"], QUESTION_LINE)
    mark_rows(fig, rows["context"], CONTEXT_LINE)
    return mark_rows(fig, rows["answer"], ENTITY_LINE)


def answer_note(rec) -> str:
    """The Attention tab's line for a question answering model's record: where the question, the context and the
    answer are; "" for another record."""
    if not isinstance(rec, analysis.AnswerRecord):
        return ""
    info, a = rec.maps.info, rec.answer
    q = [p for p, sid in enumerate(info.sequence_ids) if sid == 0]
    c = [p for p, sid in enumerate(info.sequence_ids) if sid == 1]
    line = ("**A question answering model:** the question and the context are read together. Rows outlined: the "
            f"question in blue (tokens {q[0]}-{q[-1]}), the context in green (tokens {c[0]}-{c[-1]})")
    line += "." if a.no_answer else f", the answer “{esc(a.text)}” in red ({token_span(info, a.start, a.end, side=1)})."
    if a.windows > 1 or info.truncated:
        line += (f"  \n**Long context:** the charts read its first {len(info.tokens)} tokens; the answer was read in "
                 f"{a.windows} overlapping window{'s' if a.windows > 1 else ''}.")
    return line


def token_span(info: core.TokenInfo, start: int, end: int, side: int | None = None) -> str:
    """"token 4" / "tokens 4-5": the positions ([CLS] is 0) whose characters overlap [start, end); ``side``: of the
    first (0) or second (1) text only (offsets are into each text's own characters)."""
    hit = [p for p, ((a, b), sid) in enumerate(zip(info.offsets, info.sequence_ids))
           if sid is not None and (side is None or sid == side) and a < end and b > start]
    if not hit:
        return "past the tokens drawn"
    return f"token {hit[0]}" if len(hit) == 1 else f"tokens {hit[0]}-{hit[-1]}"


def tagger_note(rec) -> str:
    """The Attention tab's line for a tagger's record: what its rows mean and where its entities are; "" for a
    classifier's."""
    if not isinstance(rec, analysis.TagRecord):
        return ""
    t, info = rec.tagging, rec.maps.info
    head = ("**A token classifier (a tagger):** its head labels every token from that token's own last state, so "
            "each row of the map is one label's reading, not [CLS]'s alone. ")
    if not t.entities:
        line = head + "This text has no entities: every word is tagged O."
    else:
        shown = [f"“{esc(e.text)}” · {esc(e.label)} ({token_span(info, e.start, e.end)})" for e in t.entities[:20]]
        more = f", and {len(t.entities) - 20} more" if len(t.entities) > 20 else ""
        line = head + f"The entities' rows are outlined in red: {', '.join(shown)}{more}."
    if t.windows > 1 or t.truncated or info.truncated:
        line += (f"  \n**Long text:** the charts read its first {len(info.tokens)} tokens; the tags were read in "
                 f"{t.windows} overlapping window{'s' if t.windows > 1 else ''}.")
    return line


def render_focus(rec: analysis.Record, layer: int, head: str, hide: bool, merge: bool):
    """-> (token heatmap, [CLS] rows, rollout) for the chosen layer/head. A tagger's record (``TagRecord``): its
    entities' rows outlined in the heatmap, and no [CLS] row (its head does not read [CLS]; ``NO_CLS_ROW``)."""
    if rec is None:
        empty = plots.empty_figure()
        return empty, empty, empty
    if rec.mixing is not None:
        fig, cls_fig, roll_fig = render_mixing_focus(rec, layer, head, hide, merge)
    else:
        fig, cls_fig, roll_fig = render_raw_focus(rec, layer, head, hide, merge)
    if isinstance(rec, analysis.TagRecord):
        view = token_views.token_view(rec.maps.info, merge)
        mark_rows(fig, entity_rows(rec, view, view.keep(hide)))
        cls_fig = plots.empty_figure(NO_CLS_ROW)
    elif isinstance(rec, analysis.AnswerRecord):  # the question's, the context's and the answer's rows outlined
        view = token_views.token_view(rec.maps.info, merge)
        mark_sides(fig, rec, view, view.keep(hide))
    return fig, cls_fig, roll_fig


def render_raw_focus(rec: analysis.Record, layer: int, head: str, hide: bool, merge: bool):
    """``render_focus`` for raw attention."""
    n_layers = rec.maps.num_layers
    li = min(max(int(layer or 1), 1), n_layers) - 1
    hi = head_index(head)
    if hi is not None and hi >= rec.maps.num_heads:
        hi = None
    view = token_views.token_view(rec.maps.info, merge)
    keep = view.keep(hide)
    labels = [view.labels[i] for i in keep]
    w = rec.maps.weights  # (L, H, T, T) float16
    mat = w[li].astype(np.float32).mean(axis=0) if hi is None else w[li, hi].astype(np.float32)  # (T, T)
    which = "mean of heads" if hi is None else f"head {hi + 1}"
    fig = plots.attention_heatmap(token_views.view_matrix(mat, view, keep), labels, title=f"Layer {li + 1}, {which}")
    rows = core.cls_rows(w.astype(np.float32), head=hi)  # (L, T)
    rows = token_views.view_scores(rows, view, keep)  # (L, N)
    cls_fig = plots.cls_rows_heatmap(rows, labels, title=f"Where [CLS] looks, by layer ({which})")
    roll = core.rollout(w.astype(np.float32))[li]  # (T, T)
    roll_fig = plots.rollout_heatmap(token_views.view_matrix(roll, view, keep), labels, layer=li + 1)
    return fig, cls_fig, roll_fig


def render_mixing_focus(rec: analysis.Record, layer: int, head: str, hide: bool, merge: bool):
    """``render_focus`` for a context-mixing measure (``rec.mixing``): its per-head or per-layer
    matrix, its [CLS] row by layer, and its aggregation across layers in place of the rollout."""
    mm = rec.mixing
    name = MEASURE_LABELS.get(mm.measure, mm.measure)
    label = name[:1].upper() + name[1:]  # "Value zeroing, layer 2" as a chart title
    li = min(max(int(layer or 1), 1), mm.num_layers) - 1
    hi = head_index(head)
    if hi is not None and (mm.num_heads == 1 or hi >= mm.num_heads):
        hi = None
    view = token_views.token_view(mm.info, merge)
    keep = view.keep(hide)
    labels = [view.labels[i] for i in keep]
    which = "whole layer" if hi is None else f"head {hi + 1}"
    mat = (mm.combined[li] if hi is None else mm.weights[li, hi]).astype(np.float32)  # (T, T)
    fig = plots.attention_heatmap(token_views.view_matrix(mat, view, keep), labels,
                                  title=f"{label}, layer {li + 1}, {which}")
    rows = (mm.combined[:, 0, :] if hi is None else mm.weights[:, hi, 0, :]).astype(np.float32)  # (L, T)
    rows = token_views.view_scores(rows, view, keep)  # (L, N)
    cls_fig = plots.cls_rows_heatmap(rows, labels, title=f"What [CLS] takes from each token, by layer ({name}, "
                                                          f"{which})")
    agg = mm.aggregated[li].astype(np.float32)  # (T, T)
    roll_fig = plots.attention_heatmap(token_views.view_matrix(agg, view, keep), labels,
                                       title=f"{label} aggregated over layers 1 to {li + 1} (flow from input tokens)")
    return fig, cls_fig, roll_fig


def render_overview(rec: analysis.Record, hide: bool, merge: bool):
    """-> (overview figure, notice markdown)."""
    if rec is None:
        return plots.empty_figure(), ""
    mm = rec.mixing
    info, weights = (rec.maps.info, rec.maps.weights) if mm is None else (mm.info, mm.weights)
    view = token_views.token_view(info, merge)
    keep = view.keep(hide)
    w = token_views.view_matrix(weights.astype(np.float32), view, keep)  # (L, H, N, N)
    labels = [view.labels[i] for i in keep]
    if mm is None or mm.num_heads > 1:
        fig, notice = plots.attention_overview(w, labels)
    if mm is not None:
        label = MEASURE_LABELS.get(mm.measure, mm.measure)
        label = label[:1].upper() + label[1:]
        if mm.num_heads > 1:
            fig.update_layout(title_text=f"{label}: all layers × heads, each tile on its own colour scale")
        else:  # a measure without heads (value zeroing, ALTI): one tile per layer, no head axis
            fig, notice = plots.layer_overview(w[:, 0], labels, title=f"{label}: every layer (the measure has no "
                                               "heads; rows: attending, columns: attended to; each tile on its own "
                                               "colour scale)", download=f"{mm.measure}_overview")
    return fig, (f"**Note:** {notice}" if notice else "")


def render(ui: SimpleNamespace, rec: analysis.Record, layer: int, head: str, hide: bool, merge: bool) -> dict:
    fig, cls_fig, roll_fig = render_focus(rec, layer, head, hide, merge)
    over, notice = render_overview(rec, hide, merge)
    return {ui.heatmap: fig, ui.cls_rows: cls_fig, ui.rollout: roll_fig, ui.overview: over, ui.overview_notice: notice,
            ui.note: tagger_note(rec) or answer_note(rec)}


# --------------------------------------------------------------------------- whole document (windows)
DOCUMENT_LABEL = "Read the whole document (windows)"
DOCUMENT_INTRO = ("The charts above read the first tokens only. Press **Read the whole document (windows)** to read "
                  "every token, in the overlapping windows the prediction's *whole text* option reads.")


@dataclasses.dataclass(frozen=True, eq=False)
class DocumentView:
    """What the whole-document part shows: the windows' attention (``DocumentAttention``) of one text, with the
    stride it was read with and the window count's labels."""

    doc: object  # long_documents.DocumentAttention; its maps' weights float16 (per-user memory)
    stride: int
    text: str
    pair: str | None
    max_length: int = 0  # the model's; the stride is at most half of it


def build_document() -> SimpleNamespace:
    """The closed part for a text longer than the model reads, hidden until Analyze reads one."""
    with gr.Accordion("Whole document (windows)", open=False, visible=False, elem_id="bv-attn-doc-panel") as panel:
        gr.Markdown(
            "A text longer than the model reads is read here in the same overlapping windows as the prediction's "
            "*whole text* option, each window with the measure chosen above. Pick a window to see its token × token "
            "map (the layer and head chosen above); the two charts under it are the [CLS] row of every layer and "
            "its aggregation across layers (rollout for raw attention) over **every token of the document**: each "
            "window's own rows, a token read by two windows getting their mean weighted by its distance from each "
            "window's edge. An entry is a token's share of its window's [CLS], so a row sums to about the number "
            "of windows, not to 1.", elem_classes=["bv-note"])
        with gr.Row():
            stride = stride_slider("bv-attn-doc-stride", scale=2)
            window = gr.Dropdown(choices=[("window 0", 0)], value=0, label="Window", elem_id="bv-attn-doc-window",
                                 info="which of the document's windows the map shows", scale=2)
            run = gr.Button(DOCUMENT_LABEL, elem_id="bv-attn-doc-run", scale=1)
        status = gr.Markdown(elem_id="bv-attn-doc-status")  # why a reading was refused, under its button
        reading = gr.Markdown(DOCUMENT_INTRO, elem_id="bv-attn-doc-reading")
        heatmap = figures.plot(label="The picked window (token × token)", elem_id="bv-attn-doc-heatmap")
        cls = figures.plot(label="[CLS] row over the whole document", elem_id="bv-attn-doc-cls")
        agg = figures.plot(label="Aggregated [CLS] row over the whole document", elem_id="bv-attn-doc-agg")
    return SimpleNamespace(panel=panel, stride=stride, window=window, run=run, status=status, reading=reading,
                           heatmap=heatmap, cls=cls, agg=agg, state=gr.State(None, time_to_live=3600))


def is_long(rec: analysis.Record | None) -> bool:
    """Whether the analysed text is longer than the model reads (cut, or classified in several windows)."""
    if not isinstance(rec, analysis.Record):  # a tagger's text (an answer's context) is read whole, in windows
        return False
    p = rec.prediction
    return bool(p.truncated or (p.windows or 1) > 1)


def document_reset(ui: SimpleNamespace, rec: analysis.Record | None) -> dict:
    """The whole-document part for a newly analysed text: shown (closed) when the text is longer than the
    model reads, else hidden; nothing read yet (reading it is the part's own button, never Analyze)."""
    doc = ui.doc
    empty = plots.empty_figure(f"Press “{DOCUMENT_LABEL}” to see this chart.")
    return {doc.panel: gr.update(visible=is_long(rec), open=False), doc.state: None, doc.status: "",
            doc.reading: DOCUMENT_INTRO,
            doc.window: gr.update(choices=[("window 0", 0)], value=0), doc.heatmap: empty, doc.cls: empty,
            doc.agg: empty}


def record_measure(rec: analysis.Record) -> str:
    """The measure the tab draws for ``rec`` (its ``mixing``'s, else raw attention)."""
    return rec.mixing.measure if rec.mixing is not None else "raw"


def window_arg(window) -> int:
    """The window picker's value as an index (None: the first window); anything else a clear message."""
    if window is None or window == "":
        return 0
    try:
        if isinstance(window, bool) or float(window) != int(float(window)):
            raise ValueError
        return int(float(window))
    except (TypeError, ValueError):
        raise core.InputError(f"window must be a whole number (0 is the first window), got {window!r}.") from None


def _small(mm):
    """``mm`` with float16 arrays: half the per-user memory (as the Record's own maps)."""
    return dataclasses.replace(mm, weights=mm.weights.astype(np.float16), combined=mm.combined.astype(np.float16),
                               aggregated=mm.aggregated.astype(np.float16))


def check_document(rec) -> None:
    """InputError unless ``rec`` is a classifier's analysed text (the part reads [CLS] rows over a document)."""
    if rec is None:
        raise core.InputError("Press Analyze first: there is no text to read yet.")
    if isinstance(rec, analysis.TagRecord):
        raise core.InputError("The whole-document part reads a classifier's [CLS] rows; a tagger's text is read "
                              "whole by its tags (the Predict tab), and its attention is drawn above.")
    if isinstance(rec, analysis.AnswerRecord):
        raise core.InputError("The whole-document part reads a classifier's [CLS] rows; an answer reads its whole "
                              "context in windows by itself (the Predict tab), and its attention is drawn above.")


def read_document(rec: analysis.Record | None, window, stride, settings: core.Settings) -> DocumentView:
    """The analysed text read whole in windows (``attention_windows``) with the tab's measure: window
    ``window``'s maps and the [CLS] rows merged over the document."""
    check_document(rec)
    index = window_arg(window)
    lm = model_loading.load(rec.model, rec.model, settings)
    stride = window_stride(lm, stride)
    p = rec.prediction
    d = attention_windows(lm, p.text, pair=p.pair, window=index, stride=stride, measure=record_measure(rec))
    return DocumentView(dataclasses.replace(d, maps=_small(d.maps)), stride, p.text, p.pair, lm.max_length)


def pick_window(rec: analysis.Record | None, view: DocumentView | None, window, stride,
                settings: core.Settings) -> DocumentView:
    """Another window picked: that window alone read (``window_maps``) when the document was read for this
    text, measure and stride; else the whole document read again (``read_document``)."""
    check_document(rec)
    lm = model_loading.load(rec.model, rec.model, settings)
    stride = window_stride(lm, stride)
    p, measure = rec.prediction, record_measure(rec)
    if view is None or (view.text, view.pair, view.stride, view.doc.measure) != (p.text, p.pair, stride, measure):
        return read_document(rec, window, stride, settings)
    index = window_arg(window)
    if index == view.doc.window:
        return view
    mm = window_maps(lm, p.text, pair=p.pair, window=index, stride=stride, measure=measure)
    return dataclasses.replace(view, doc=dataclasses.replace(view.doc, maps=_small(mm), window=index))


def window_label(d, k: int) -> str:
    """"window 1: tokens 32–95" (document tokens, [CLS] is token 0)."""
    a, b = d.spans[k]
    return f"window {k}: tokens {a}–{b - 1}"


def document_reading(view: DocumentView) -> str:
    d = view.doc
    n = d.windows
    name = MEASURE_LABELS.get(d.measure, d.measure)
    if n == 1:
        head = (f"**1 window:** this text fits the model ({len(d.info)} tokens), so the whole document is what the "
                "charts above show.")
    else:
        most = (f", at most half the model's {view.max_length}" if view.max_length and
                view.stride == view.max_length // 2 else "")
        head = (f"**{n} windows** of up to {view.max_length or len(d.maps.info)} tokens over the document's "
                f"{len(d.info)} tokens ({view.stride} shared by neighbours{most}), "
                "read with " + esc(name) + ": " + "; ".join(window_label(d, k) for k in range(n)) + ".")
    a, b = d.char_spans[d.window]
    text = d.info.text[a:b]
    text = text if len(text) <= 80 else text[:38] + " … " + text[-38:]
    return head + f"  \n**Shown: window {d.window}** (characters {a}–{b}: “{esc(text)}”)."


@dataclasses.dataclass(frozen=True, eq=False)
class DocumentColumns:
    """The columns a whole document's [CLS] charts draw: one per token (or word) when they fit in
    ``plots.MAX_COLUMNS``; else the tokens merged into words and, when those are still too many, runs of
    ``per`` words (``plots.column_bins``). ``spans``: each column's [a, b) in ``view``'s units; ``tokens``: its
    first and last document token; ``names``: its hover (its words and tokens); ``how``: the axis's line
    saying how the columns were made ("" when one column is one unit)."""

    view: token_views.TokenView
    spans: list[tuple[int, int]]
    labels: list[str]
    names: list[str] | None
    tokens: list[tuple[int, int]]
    per: int
    how: str

    def values(self, scores: np.ndarray) -> np.ndarray:
        """(L, T) over the document's tokens -> (L, B): each column's tokens summed (a [CLS] row's entries are
        shares of its window's [CLS]: a column's value is the share its tokens get together)."""
        return plots.bin_columns(token_views.view_scores(scores, self.view), self.spans)  # (L, B)


def document_columns(info: core.TokenInfo, merge: bool, hide: bool,
                     max_columns: int = plots.MAX_COLUMNS) -> DocumentColumns:
    """The columns of a whole document's [CLS] charts (``DocumentColumns``); [CLS]/[SEP] dropped with ``hide``."""
    n_tokens = len(info.tokens)
    view = token_views.token_view(info, merge or n_tokens > max_columns)
    spans = plots.column_bins(view.special, max_columns)
    if hide and (~view.special).any():
        spans = [(a, b) for a, b in spans if not (b - a == 1 and view.special[a])]
    groups = view.groups.groups if view.groups is not None else [(i,) for i in range(n_tokens)]
    tokens = [(groups[a][0], groups[b - 1][-1]) for a, b in spans]
    per = max((b - a for a, b in spans), default=1)
    unit = "word" if view.groups is not None else "token"
    if per == 1 and (merge or view.groups is None):  # one column per unit, as the user chose: as before
        return DocumentColumns(view, spans, [view.labels[a] for a, _ in spans], None, tokens, 1, "")
    labels, names = [], []
    for (a, b), (t0, t1) in zip(spans, tokens):
        labels.append(view.labels[a] if b - a == 1 else f"{view.labels[a]}…{view.labels[b - 1]}")
        words = " ".join(view.labels[a:b])
        words = words if len(words) <= 70 else words[:69] + "…"
        where = f"token {t0}" if t0 == t1 else f"tokens {t0}–{t1}"
        names.append(f"{words} ({where})" if b - a == 1 else f"{unit}s {a}–{b - 1}: {words} ({where})")
    if per == 1:
        how = f"{n_tokens:,} tokens drawn as {len(spans):,} words (a word: its pieces' weights summed)"
    else:
        how = (f"{n_tokens:,} tokens in {len(spans):,} columns of up to {per} {unit}s each (a column: its tokens' "
               "weights summed; its hover names them)")
    return DocumentColumns(view, spans, labels, names, tokens, per, how)


def document_charts(view: DocumentView | None, layer: int, head: str, hide: bool, merge: bool):
    """-> (the picked window's heatmap, the merged [CLS] rows, the merged aggregated [CLS] rows)."""
    if view is None:
        empty = plots.empty_figure(f"Press “{DOCUMENT_LABEL}” to see this chart.")
        return empty, empty, empty
    d = view.doc
    mm = d.maps
    raw = d.measure == "raw"
    name = MEASURE_LABELS.get(d.measure, d.measure)
    li = min(max(int(layer or 1), 1), mm.num_layers) - 1
    hi = head_index(head)
    if hi is not None and (hi >= mm.num_heads or mm.num_heads == 1):
        hi = None
    which = ("mean of heads" if raw else "whole layer") if hi is None else f"head {hi + 1}"
    view_w = token_views.token_view(mm.info, merge)
    keep = view_w.keep(hide)
    mat = (mm.combined[li] if hi is None else mm.weights[li, hi]).astype(np.float32)  # (T_w, T_w)
    a, b = d.spans[d.window]
    what = f"layer {li + 1}, {which}" if raw else f"{name[:1].upper() + name[1:]}, layer {li + 1}, {which}"
    fig = plots.attention_heatmap(token_views.view_matrix(mat, view_w, keep), [view_w.labels[i] for i in keep],
                                  title=f"Window {d.window} (document tokens {a}–{b - 1}): {what}",
                                  download=f"window{d.window}_{d.measure}_layer{li + 1}_{which.replace(' ', '_')}")
    cols = document_columns(d.info, merge, hide)
    rows, aggs = cols.values(d.cls_row), cols.values(d.rollout_cls)  # (L, B) each
    per = "" if not cols.how else ("; words" if cols.per == 1 else f"; {cols.per} words a column")
    cls_title = (f"Where [CLS] looks over the whole document, by layer (mean of heads, windows merged{per})" if raw
                 else f"What [CLS] takes from each token of the whole document, by layer ({name}, windows merged{per})")
    agg_title = (f"Attention rollout's [CLS] row over the whole document, up to each layer (windows merged{per})"
                 if raw else f"{name[:1].upper() + name[1:]} aggregated over layers: the [CLS] row over the whole "
                             f"document (windows merged{per})")
    draw = dict(columns=cols.names, axis_title=cols.how or None)
    return (fig, plots.cls_rows_heatmap(rows, cols.labels, title=cls_title, **draw),
            plots.cls_rows_heatmap(aggs, cols.labels, title=agg_title, **draw))


def render_document(ui: SimpleNamespace, view: DocumentView, layer: int, head: str, hide: bool, merge: bool) -> dict:
    """The part after reading: the reading, the window picker (every window and its tokens), the charts; its status
    line emptied (a refusal before is answered)."""
    doc, d = ui.doc, view.doc
    fig, cls, agg = document_charts(view, layer, head, hide, merge)
    return {doc.state: view, doc.status: "", doc.reading: document_reading(view),
            doc.window: gr.update(choices=[(window_label(d, k), k) for k in range(d.windows)], value=d.window),
            doc.heatmap: fig, doc.cls: cls, doc.agg: agg}


def rerender_document(ui: SimpleNamespace, view: DocumentView | None, layer: int, head: str, hide: bool,
                      merge: bool) -> dict:
    """Another layer, head or token view: the part's charts redrawn from what was read (nothing before)."""
    doc = ui.doc
    if view is None:
        return {doc.heatmap: gr.skip(), doc.cls: gr.skip(), doc.agg: gr.skip()}
    fig, cls, agg = document_charts(view, layer, head, hide, merge)
    return {doc.heatmap: fig, doc.cls: cls, doc.agg: agg}


def wire_document(ui: SimpleNamespace, state: gr.State, heavy: dict, settings: core.Settings) -> None:
    """The part's events: its button reads the document (model work, in the heavy queue), the window picker
    reads one window, the tab's layer/head/token-view controls redraw its charts. A refusal of either (the
    analysed model can no longer be opened...) is said in the part's status line, under its button, and stays
    there (no toast that vanishes, no "Error" badge on the charts)."""
    doc = ui.doc
    outputs = [doc.state, doc.status, doc.reading, doc.window, doc.heatmap, doc.cls, doc.agg]
    view_inputs = [ui.layer, ui.head, ui.hide, ui.merge]

    def run_document(rec, window, stride, layer, head, hide, merge):
        return render_document(ui, read_document(rec, window, stride, settings), layer, head, hide, merge)

    def picked(rec, view, window, stride, layer, head, hide, merge):
        return render_document(ui, pick_window(rec, view, window, stride, settings), layer, head, hide, merge)

    run_document, picked = guards.to_status(run_document, doc.status), guards.to_status(picked, doc.status)

    doc.run.click(run_document, inputs=[state, doc.window, doc.stride, *view_inputs], outputs=outputs,
                  api_visibility="private", show_progress="minimal", **heavy)
    doc.window.input(picked, inputs=[state, doc.state, doc.window, doc.stride, *view_inputs], outputs=outputs,
                     api_visibility="private", show_progress="minimal", trigger_mode="always_last", **heavy)
    gr.on([ui.layer.input, ui.head.input, ui.hide.input, ui.merge.input],
          guards.guard(lambda view, layer, head, hide, merge: rerender_document(ui, view, layer, head, hide, merge)),
          inputs=[doc.state, *view_inputs], outputs=[doc.heatmap, doc.cls, doc.agg], api_visibility="private",
          show_progress="hidden", trigger_mode="always_last")
