"""Shareable links (issue 21): the page's view in its URL, a "Copy link" button, and a link opened.

The view (model, text and pair, open tab, target class, compared methods, the Attention tab's
measure, layer and head) is written by ``bertviz_app.service.links.build_query`` from the components'
values on the Python side, after every change that moves it (``wire``); a small script then shows
it as a full link in the read-only box ``#bv-link`` and puts it in the address bar
(``history.replaceState``). **Copy link** does the same and copies it; a browser that refuses the
clipboard (headless, no permission) gets a line saying to copy it from the box.

A page opened with a query restores its view after the page's first load (``Page.on_start``):
``read_link`` checks every value (``HEAD`` keeps the query the page was opened with, before anything
rewrites the address bar); the model is opened as the Model tab's **Load model** opens it
(``Page.load_model``, public-mode checks included), the text and pair go into the Predict boxes, the
measure, layer, head, target and methods are set, the tab is selected, and the Analyze handler itself
(``Page.analyze``) analyses the text. What was ignored is said in one line (``#bv-link-notice``).

Hook for the Evaluate tab: ``Links.run`` is a ``gr.State`` set to a link's checked ``run`` (an
evaluation's name, with ``tab=evaluate``); that tab restores it on ``links.run.change``. Whether the
visitor may see that evaluation is that tab's check.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import gradio as gr

from bertviz_app.errors import BertvizError
from bertviz_app.interpret.mixing_measures import supported_measures
from bertviz_app.service.links import PER_LAYER_MEASURES, ModelShape, View, read_link, share_query

from . import analysis, attention_tab, attribution_reader, attribution_tab, guards, visitor
from .control_values import PREDICTED, target_arg
from .markup import esc

__all__ = ["HEAD", "build", "wire", "restore_view", "current_view", "head_choices", "tab_ids", "sent_to_predict"]

# The query the page was opened with, kept before the page's scripts rewrite the address bar.
HEAD = "<script>window.bvStartQuery = window.location.search;</script>"

# query -> the full link (gradio's own ?__theme=... kept), put in the address bar; returns the link
_SHOW = """
(q) => {
  const keep = new URLSearchParams(window.location.search);
  const own = [...keep.keys()].filter((k) => k.startsWith('__')).map((k) => k + '=' + encodeURIComponent(keep.get(k)));
  const query = [q || '', ...own].filter((s) => s).join('&');
  const url = window.location.origin + window.location.pathname + (query ? '?' + query : '');
  try { window.history.replaceState(window.history.state, '', url); } catch (e) { /* a sandboxed frame */ }
  return url;
}
"""
# the same, and the link copied; the line under the box says whether the browser let it
_COPY = """
async (q) => {
  const url = (""" + _SHOW + """)(q);
  let copied = false;
  try {
    await Promise.race([navigator.clipboard.writeText(url),
                        new Promise((_, no) => setTimeout(() => no(new Error('timeout')), 1500))]);
    copied = true;
  } catch (e) { copied = false; }
  return [url, copied ? 'Link copied.'
                      : 'This browser did not let the page copy: select the link in the box and copy it.'];
}
"""


def build() -> SimpleNamespace:
    """The link box, its Copy button and its two lines (the copy's outcome; what a link opened ignored)."""
    with gr.Row(equal_height=True, elem_id="bv-link-row"):
        link = gr.Textbox(label="Link to this view", interactive=False, max_lines=1, scale=6, elem_id="bv-link",
                          info="the model, text, tab, layer, head, measure and target shown now; opening it shows "
                               "them again")
        copy = gr.Button("Copy link", scale=1, min_width=120, elem_id="bv-copy-link")
    note = gr.Markdown(elem_id="bv-link-note")
    notice = gr.Markdown(elem_id="bv-link-notice")
    query = gr.Textbox(visible=False)  # the view's query as Python wrote it (the script makes it a link)
    return SimpleNamespace(link=link, copy=copy, note=note, notice=notice, query=query,
                           tab=gr.State("predict"),  # the open tab's id
                           pending=gr.State(False),  # a link opened: its text is to be analysed
                           run=gr.State(None))  # a link's evaluation (tab=evaluate): the Evaluate tab's hook


def head_choices(measure: str, num_heads: int) -> list[str]:
    """The Attention tab's head choices before an analysis, as ``attention_tab.controls`` will give them."""
    if measure in PER_LAYER_MEASURES:
        return [attention_tab.LAYER]
    first = attention_tab.MEAN if measure == "raw" else attention_tab.LAYER
    return [first, *(f"head {h + 1}" for h in range(num_heads))]


def current_view(rec, model, text, pair, tab, target, methods, measure, layer, head, shown=None) -> View:
    """The view the page shows: the analysed text and its model (the boxes' text before any analysis),
    the controls' values, and on the Evaluate tab the stored evaluation it shows (``shown``: its view,
    anything with a ``name``)."""
    if rec is not None:
        model, text, pair = rec.model, rec.text, rec.pair
        if not isinstance(rec, analysis.Record):  # a tagger's or an answer's target is no class
            target = None
    k = attention_tab.head_index(head)
    try:
        layer = int(float(layer or 1))  # the slider's raw value may come as 2.0
    except (TypeError, ValueError, OverflowError):
        layer = 1
    return View(model=(model or "").strip() or None, text=text or "", pair=pair or "", tab=tab or "predict",
                target=target_arg(target), methods=tuple(methods) if methods else None,
                measure=measure or "raw", layer=layer, head=None if k is None else k + 1,
                run=getattr(shown, "name", None) if tab == "evaluate" else None)


def sent_to_predict(row):
    """The open tab after the Fine-tune tab's "Send to explorer": Predict when a row was selected (it is
    sent there), else unchanged (the handler refused)."""
    return "predict" if row else gr.skip()


def tab_ids(tabs: gr.Tabs) -> dict[str, str]:
    """label -> id of the page's tabs."""
    return {str(c.label): str(c.id) for c in tabs.children if isinstance(c, gr.Tab) and c.id is not None}


def wire(page, started, heavy: dict) -> None:
    """The link's events on ``page`` (``ui.Page``): kept current, copied, and restored after ``started``
    (the page's first-load event); ``heavy``: the page's one-at-a-time model group (the restore opens a model
    and analyses)."""
    ln, p, a, t, m = page.links, page.p, page.a, page.t, page.m
    quick = dict(queue=False, api_visibility="private", show_progress="hidden")
    ids = tab_ids(page.tabs)

    def on_tab(evt: gr.SelectData):
        return ids.get(str(evt.value), "predict")

    view_inputs = [page.state, m.model, p.text, p.pair, ln.tab, t.target, t.cmp.methods, a.measure, a.layer, a.head,
                   page.e.view]
    # raw values, not checked against the dropdowns' choices: a change that fires while another event swaps those
    # choices (a new measure's heads) sends the old value, which gradio would refuse with a traceback in the log
    raw = dict(quick, preprocess=False)

    @guards.guard
    def link_query(*values):
        query, too_long = share_query(current_view(*values))
        return {ln.query: query, ln.note: esc(too_long)}

    def show(event):
        return event.then(None, inputs=[ln.query], outputs=[ln.link], js=_SHOW, **quick)

    # Queued, not quick: gradio's page fires a State's change (ln.tab's, which redraws the link) only after a queued
    # event; after an unqueued one it drops the State's change, and the link stayed on the tab shown before. Even
    # queued, a tab opened while a restored link's analysis ran could miss it (1 run in 3 of test_browser_links):
    # the link is also redrawn right after, from the tab just set.
    queued = dict(queue=True, api_visibility="private", show_progress="hidden")

    def redraw_after(event):
        show(event.then(link_query, inputs=view_inputs, outputs=[ln.query, ln.note], **raw))

    redraw_after(page.tabs.select(on_tab, outputs=[ln.tab], **queued))
    # the Fine-tune tab's "Send to explorer" opens the Predict tab from its handler (no select event)
    redraw_after(page.f.send.click(sent_to_predict, inputs=[page.f.selected], outputs=[ln.tab], **queued))
    show(gr.on([page.state.change, m.model.change, ln.tab.change, a.layer.change, a.head.change, a.measure.change,
                t.target.change, t.cmp.methods.change, page.e.view.change], link_query, inputs=view_inputs,
               outputs=[ln.query, ln.note],
               trigger_mode="always_last", **raw))
    ln.copy.click(link_query, inputs=view_inputs, outputs=[ln.query, ln.note], **raw).then(
        None, inputs=[ln.query], outputs=[ln.link, ln.note], js=_COPY, **quick)

    # a link opened: after the page's first load, the view restored, then its text analysed by Analyze itself
    restore_outputs = (page.model_outputs | {m.model, p.text, p.pair, page.tabs, page.open_tab, ln.tab, a.layer,
                                             a.head, a.measure, a.measure_note, page.chosen_measure, t.target,
                                             t.cmp.methods, ln.notice, ln.pending, ln.run})

    @guards.guard
    def restore(query, model, target, baseline):
        return restore_view(page, query, model, target, baseline)

    @guards.guard_stream
    def analyse(pending, *args):
        if not pending:
            yield {page.drawn: gr.skip()}
            return
        yield from page.analyze(*args)

    analyse_all = page.analyze_outputs | {page.drawn, p.analyze, p.status}
    # preprocess=False: the target may still show a value the page has just replaced (a tagger's placeholder for a
    # classifier's class), which gradio's check would refuse with a traceback in the log; restore_view reads it raw
    restored = started.then(restore, inputs=[ln.query, m.model, t.target, t.baseline], outputs=restore_outputs,
                            js="(q, m, t, b) => [window.bvStartQuery || '', m, t, b]", api_visibility="private",
                            show_progress="hidden", preprocess=False, **heavy)
    analysed = restored.success(analyse, inputs=[ln.pending, *page.analyze_inputs], outputs=analyse_all,
                                api_visibility="private", show_progress="hidden", **heavy)
    analysed.failure(page.after_failure, outputs=analyse_all - {page.state}, **quick)
    show(analysed.then(link_query, inputs=view_inputs, outputs=[ln.query, ln.note], **raw))


def restore_view(page, query: str | None, model: str | None, target, baseline) -> dict:
    """The page's components set to the view a link asks for (``read_link``), and the line saying what
    it ignored; ``pending`` True when there is a text to analyse. No query: nothing changes."""
    ln, p, a, t, m = page.links, page.p, page.a, page.t, page.m
    if not (query or "").lstrip("?").strip():
        return {ln.pending: False}
    settings = page.settings
    # public mode: the owner is told by an unqueued load event that has always finished by now (this one waits
    # for Page.on_start); should it not have, a moment's wait, else the visitor owns nothing (their runs ignored)
    for _ in range(20):
        if not settings.public or visitor.ready():
            break
        time.sleep(0.1)
    link = read_link(query, settings, page.default, lambda name: ModelShape.of(page.load(name)),
                     current=model or page.default, owner=visitor.owner(), tabs=tab_ids(page.tabs).values())
    out: dict = {ln.notice: f"**{esc(link.notice())}**" if link.ignored else "", ln.pending: False}
    if not link.given:
        return out
    view = link.view
    try:
        lm = page.load(view.model or model or page.default)
    except BertvizError as exc:  # the page's own model cannot be opened (the Model tab says why): nothing to show
        out[ln.notice] = f"**From the link: nothing restored: {esc(exc)}**"
        return out
    if view.model and view.model != model:
        out.update(page.load_model(view.model, view.target or target, baseline))
        out[m.model] = gr.update(value=view.model)
    if view.text:  # set with the labels load_model gave the boxes (Question and Context for a reader), if any
        for box, value in ((p.text, view.text), (p.pair, view.pair)):
            out[box] = {**out[box], "value": value} if isinstance(out.get(box), dict) else value
    chart_tab = view.tab if view.tab in ("predict", "attention", "attributions") else "other"
    out.update({page.tabs: gr.Tabs(selected=view.tab), page.open_tab: {"tab": chart_tab}, ln.tab: view.tab})
    note = attention_tab.measure_note(view.measure)
    choices = head_choices(view.measure, ModelShape.of(lm).num_heads)
    out.update({a.measure: gr.update(choices=attention_tab.measure_choices(supported_measures(lm)),
                                     value=view.measure),
                a.measure_note: note,
                page.chosen_measure: {"measure": view.measure},
                a.layer: gr.update(maximum=lm.num_layers, value=view.layer),
                a.head: gr.update(choices=choices, value=choices[0] if view.head is None else f"head {view.head}"),
                t.target: (attribution_tab.tag_target_update(None, None) if attribution_tab.is_tagger(lm) else
                           attribution_reader.answer_target_update(None, None) if attribution_tab.is_answerer(lm) else
                           gr.update(choices=[PREDICTED, *lm.labels], value=view.target or PREDICTED))})
    if view.methods:
        out[t.cmp.methods] = list(view.methods)
    out.update({ln.pending: bool(view.text.strip()), ln.run: view.run})
    return out
