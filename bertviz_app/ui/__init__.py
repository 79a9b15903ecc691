"""The Gradio web UI: the only package that imports gradio.

``build_app(settings, model)`` assembles the Blocks app from one module per tab and ``Page``'s
small named handlers; ``mount(app, demo, settings)`` queues it and mounts it on the FastAPI app of
``bertviz_app.serve.server`` (which serves it). One Analyze click computes every analysis once and keeps
the records in ``gr.State``;
layer/head/toggle changes re-render from that state without touching the model. The Fine-tune
tab streams a training run (its own concurrency id, so analyses are not blocked behind it) and
selects the new model in the Model tab when it is saved.

HTTP API (stable names, see docs/api.md): ``/predict``, ``/attention``, ``/explain``, ``/summary``,
as gradio endpoints (``api.py``) and as typed JSON routes (``POST /v1/predict`` ..., ``bertviz_app.serve.server``).
The UI's own events are hidden from the API docs (``/analyze`` stays callable, undocumented).
"""

from __future__ import annotations

import dataclasses
import logging

import gradio as gr

import bertviz_app as core
from bertviz_app.config import Settings
from bertviz_app.interpret.mixing_measures import check_measure
from bertviz_app.models.heads import QUESTION_ANSWERING, TOKEN_CLASSIFICATION

from . import (
    analysis,
    api,
    attention_tab,
    attribution_reader,
    attribution_tab,
    batch_tab,
    build_panel,
    evaluate_tab,
    figures,
    finetune_tab,
    gradio_sessions,
    guards,
    links,
    markup,
    model_loading,
    model_tab,
    predict_tab,
    streaming,
    uploads,
    visitor,
)
from .control_values import PREDICTED
from .markup import esc

__all__ = ["build_app", "mount", "Page", "CSS"]

log = logging.getLogger("bertviz_app.ui")
CSS = markup.CSS + finetune_tab.CSS + figures.CSS
HEAVY = dict(concurrency_limit=1, concurrency_id="heavy")  # model work, one at a time (2-core friendly)
PRIVATE = dict(api_visibility="private", show_progress="minimal")  # page-only events, out of the API


def build_app(settings: Settings, model: str | None = None) -> gr.Blocks:
    """The app, not served (``mount`` does that). ``model``: what it opens with (default:
    settings.default_model). The Blocks keep ``settings`` (``bertviz_settings``): the handlers of an
    event find them there (``visitor.app_settings``)."""
    default = (model or settings.default_model).strip()
    # Uploaded files live in gradio's cache; delete_cache removes them hourly (older than an hour).
    with gr.Blocks(title="BERT classifier explorer", delete_cache=(3600, 3600)) as demo:
        gr.Markdown("# BERT classifier explorer\nClass probabilities, attention in every layer and head, and "
                    "Integrated Gradients attributions along the [CLS] path. Type a text and press **Analyze**.")
        demo.bertviz_settings = settings
        visitor.register(demo, settings)  # public mode: the browser's owner token, known on page load
        page = Page(settings, default)
        page.wire(demo)
    return demo


class Page:
    """The page's components and its event handlers, one small named method each. Built inside a
    Blocks context (the constructor lays the tabs out); ``wire(demo)`` connects the events."""

    def __init__(self, settings: Settings, default: str):
        self.settings, self.default = settings, default
        self.state = gr.State(None, time_to_live=3600)  # the last Analyze's Record
        self.build = build_panel.build(default, settings)  # the default model's background build, while it runs
        # Which tab is open, and which record each chart tab last drew: a tab's charts are drawn when
        # it is open (on Analyze) or when it is opened, never for a hidden tab (bench/load_results.md:
        # drawing every tab on each Analyze cost more than the model's own forward passes).
        self.open_tab = gr.State({"tab": "predict"})  # changed in place (on_tab): a running Analyze reads it
        self.drawn = gr.State({}, time_to_live=3600)  # {"attention": record id, "attributions": record id}
        # The Attention tab's measure as Analyze reads it: a State, not the dropdown itself, so /analyze keeps
        # its inputs (a gradio_client caller gets raw attention); set by change_measure and load_model
        self.chosen_measure = gr.State({"measure": "raw"})
        self.links = links.build()  # the view as a link (issue 21), over the tabs
        with gr.Tabs() as self.tabs:
            with gr.Tab("Predict", id="predict"):
                self.p = predict_tab.build()
            with gr.Tab("Attention", id="attention") as self.attention_item:
                self.a = attention_tab.build()
            with gr.Tab("Attributions", id="attributions") as self.attributions_item:
                self.t = attribution_tab.build()
            with gr.Tab("Model", id="model"):
                self.m = model_tab.build(default, settings)
            with gr.Tab("Fine-tune", id="finetune"):
                self.f = finetune_tab.build(default, settings=settings)
            with gr.Tab("Explain a file", id="batch"):
                self.b = batch_tab.build(settings=settings)
            with gr.Tab("Evaluate", id="evaluate"):
                self.e = evaluate_tab.build(default, settings=settings)
        p, a, t, m = self.p, self.a, self.t, self.m
        self.analyze_outputs = {self.state, p.model_info, p.warnings, p.notice, p.label, p.bar, p.tokens,
                                p.calibration, p.raw, p.entities, p.tag_words, p.answer, p.n_best,
                                a.layer, a.head, a.heatmap, a.cls_rows, a.rollout, a.overview, a.overview_notice,
                                a.note, a.status, t.target, t.status, t.delta, t.tokens, t.bar, t.path, t.lens,
                                t.cmp.shown, t.cmp.state, t.cmp.status}
        # the Attention tab's whole-document part: shown for a long text, emptied for each new one (read on its
        # own button, never here)
        self.document_outputs = {a.doc.panel, a.doc.state, a.doc.status, a.doc.reading, a.doc.window, a.doc.heatmap,
                                 a.doc.cls, a.doc.agg}
        self.analyze_outputs |= self.document_outputs
        self.chart_inputs = [self.open_tab, self.drawn, a.layer, a.head, a.hide, a.merge, t.merge, p.skip_ig]
        self.attention_charts = {a.heatmap, a.cls_rows, a.rollout, a.overview, a.overview_notice, a.note}
        self.attribution_charts = {t.delta, t.tokens, t.bar, t.path, t.lens}
        self.ig_outputs = {self.state, self.drawn, p.tokens} | self.attention_charts | self.attribution_charts
        self.model_outputs = {m.status, m.loaded, m.info, m.table, m.config, t.target, t.baseline, p.model_info,
                              p.warnings, a.measure, a.measure_note, self.chosen_measure,
                              p.text, p.pair, p.threshold, p.window, p.label, p.bar,  # the boxes follow the head
                              p.examples, p.tagger_examples, p.reader_examples}

    def load(self, name: str | None) -> core.LoadedModel:
        return model_loading.load(name, self.default, self.settings)

    # ------------------------------------------------------------- charts of the open tab
    def draw_open_tab(self, rec, tab, shown, layer, head, hide, merge, attr_merge, skip_ig) -> dict:
        """The charts of ``tab`` for ``rec`` if it is a chart tab not drawn for ``rec`` yet, else {}.
        A handler's dict without a component leaves that component as it is (but gradio reads an
        empty dict as one value, so a handler returning this alone sends {drawn: gr.skip()})."""
        shown = dict(shown or {})
        if rec is None or tab not in ("attention", "attributions") or shown.get(tab) == id(rec):
            return {}
        if tab == "attention":
            out = attention_tab.render(self.a, rec, layer, head, hide, merge)
        else:
            out = attribution_tab.render(self.t, rec, attr_merge, skipped=bool(skip_ig))
        shown[tab] = id(rec)
        out[self.drawn] = shown
        return out

    def starting(self) -> dict:
        """The button as soon as Analyze is clicked, before the queued event starts."""
        return predict_tab.busy(self.p, "Analyzing\u2026", f"**Starting\u2026** {streaming.AnalyzeProgress.SKIP_HINT}")

    def busy(self, track: streaming.AnalyzeProgress) -> dict:
        return predict_tab.busy(self.p, track.label(), track.status())

    # ------------------------------------------------------------- Analyze: everything once
    def analyze(self, model_name, text, pair, target, baseline, n_steps, auto, layer, head, hide, merge, attr_merge,
                skip_ig=False, window=False, open_tab=None, measure=None, threshold=0.0):
        """Analyze, as one queued streaming event (one place in the heavy queue per click, issue 19):
        the quick part (one forward pass each: prediction, attention, [CLS] lens) is shown at once,
        then Integrated Gradients and the [CLS] path follow in the same event, then the button is
        back. The work runs in a thread while the Analyze button shows its progress and time left
        (from the first yield, at once). A failure of the quick part clears every output of the
        previous text (``analysis_failed``); a failure of Integrated Gradients keeps the quick part
        (``ig_failed``); either way the button is back and the error is raised for gradio to show.
        ``open_tab``: the page's ``{"tab": ...}`` (``on_tab`` changes it in place), read when
        drawing, so a chart tab opened while the analysis runs is drawn for this text. ``measure``: the
        Attention tab's measure (``{"measure": name}``, the page's ``chosen_measure``, or a name), computed
        in the quick part when it is not raw attention. A question answering model reads ``text`` as the question
        and ``pair`` as the context, "no answer" against ``threshold`` (``{"threshold": value}``, the Predict tab's
        ``chosen_threshold``, or a number)."""
        track = streaming.AnalyzeProgress(skip_ig=bool(skip_ig), n_steps=int(n_steps or 50), auto=bool(auto))
        live = open_tab if isinstance(open_tab, dict) else {"tab": open_tab or "predict"}
        measure = (measure or {}).get("measure", "raw") if isinstance(measure, dict) else (measure or "raw")

        def work():
            lm = self.load(model_name)
            track.n_layers = lm.num_layers
            if lm.head is TOKEN_CLASSIFICATION:  # a tagger: its tags and the text's attention
                return lm, analysis.analyze_tagged(lm, text, progress=track.step, measure=measure)
            if lm.head is QUESTION_ANSWERING:  # a question and a context: its answer and their attention
                return lm, analysis.analyze_answer(lm, text, pair, threshold, progress=track.step, measure=measure)
            return lm, analysis.analyze_fast(lm, text, pair, progress=track.step, window=bool(window), measure=measure)

        try:
            lm, rec = yield from streaming.stream_work(work, lambda: self.busy(track))
        except Exception as exc:  # its message stays in the status line under the button (the toast vanishes)
            yield {**self.analysis_failed(), self.p.status: guards.refusal_md(exc, logged=False)}
            raise
        p, a, t = self.p, self.a, self.t
        if baseline not in core.usable_baselines(lm):  # chosen for the last text's model (follow_choices)
            baseline = core.recommended_baseline(lm)
        out = {self.state: rec, self.drawn: {}}  # both chart tabs stale until drawn
        if isinstance(rec, analysis.TagRecord):  # a tagger explains an entity (the first, or the one still chosen)
            target = analysis.tag_target(rec.tagging, target)
            out.update(self.tagged(lm, rec, pair, target, skip_ig))
            skip_ig = skip_ig or target is None  # a text without entities: nothing explained until a word is chosen
        elif isinstance(rec, analysis.AnswerRecord):  # an answer explains its span (or the target still chosen)
            target = analysis.answer_target(rec.answer, target)
            out.update(self.answered(lm, rec, target, skip_ig))
        else:
            target = target if target in lm.labels else PREDICTED
            out.update(predict_tab.render(p, rec, lm))
            out.update(predict_tab.hide_tagging(p))
            out.update(attribution_tab.controls(t, rec, target))
            out[t.delta] = attribution_tab.pending_md(bool(skip_ig))
        out.update(attention_tab.controls(a, rec, layer, head))
        out.update(attention_tab.document_reset(a, rec))
        out.update({t.cmp.shown: gr.update(visible=False), t.cmp.state: None})  # a comparison of the last text
        out.update({a.status: "", t.status: "", t.cmp.status: ""})  # refusals about the last text are answered
        drawn = self.draw_open_tab(rec, live["tab"], {}, layer, head, hide, merge, attr_merge, skip_ig)
        out.update(drawn)
        if skip_ig:
            yield {**out, **predict_tab.idle(p)}
            return
        yield {**out, **self.busy(track)}
        shown = drawn.get(self.drawn, {})
        try:
            out = yield from streaming.stream_work(
                lambda: self.with_ig(rec, target, baseline, n_steps, auto, live["tab"], shown, layer, head, hide,
                                     merge, attr_merge, track.step, on_attribution=track.ig_done),
                lambda: self.busy(track))
        except Exception as exc:
            yield {**self.ig_failed(rec), self.p.status: guards.refusal_md(exc, logged=False)}
            raise
        yield {**out, **predict_tab.idle(p)}

    def with_ig(self, rec, target, baseline, n_steps, auto, tab, shown, layer, head, hide, merge, attr_merge,
                step, on_attribution=None) -> dict:
        """Integrated Gradients and the [CLS] path added to ``rec``; the open chart tab drawn.
        ``step(fraction, desc)`` reports progress."""
        if rec is None:
            raise core.InputError("Press Analyze first: there is no text to explain yet.")
        step(0.2, streaming.AnalyzeProgress.IG_PHASES[0])
        if isinstance(rec, analysis.TagRecord):  # a tagger: the chosen entity (or word's tag), explain_entities
            new = analysis.explain_target(self.load(rec.model), rec, target, baseline, n_steps, auto=bool(auto))
            tokens = ""
        elif isinstance(rec, analysis.AnswerRecord):  # an answer: the chosen span target, explain_answer
            new = analysis.explain_answer_target(self.load(rec.model), rec, target, baseline, n_steps,
                                                 auto=bool(auto))
            tokens = ""
        else:
            new = analysis.analyze_ig(self.load(rec.model), rec, target, baseline, n_steps, progress=step,
                                      auto=bool(auto), on_attribution=on_attribution)
            tokens = predict_tab.tokens_html(new)
        # same analysis, same attention maps: an attention tab drawn for ``rec`` stays drawn
        kept = {"attention": id(new)} if (shown or {}).get("attention") == id(rec) else {}
        out = {self.state: new, self.drawn: kept, self.p.tokens: tokens}
        out.update(self.draw_open_tab(new, tab, kept, layer, head, hide, merge, attr_merge, False))
        return out

    def tagged(self, lm, rec, pair, target, skip_ig) -> dict:
        """A tagger's Analyze (``rec``: an ``analysis.TagRecord``): its entities and words on the Predict tab, its
        entities and words as the Attributions tab's targets (``target`` chosen), that tab's line while the chosen
        target is explained (or why nothing is); the Attention tab draws its maps as a classifier's."""
        t = self.t
        out = predict_tab.render_tagging(self.p, rec.tagging, lm, pair if pair and pair.strip() else None)
        out[t.target] = attribution_tab.tag_target_update(rec, target)
        out[t.delta] = attribution_tab.tag_pending_md(dataclasses.replace(rec, target=target), bool(skip_ig))
        return out

    def answered(self, lm, rec, target, skip_ig) -> dict:
        """A question answering model's Analyze (``rec``: an ``analysis.AnswerRecord``): its answer, the context
        highlighted and the n-best spans on the Predict tab, its span targets on the Attributions tab (``target``
        chosen) and that tab's line while it is explained; the Attention tab draws its maps as a classifier's."""
        t = self.t
        out = predict_tab.render_answer(self.p, rec, lm)
        out[t.target] = attribution_reader.answer_target_update(rec, target)
        out[t.delta] = attribution_reader.answer_pending_md(dataclasses.replace(rec, target=target), bool(skip_ig))
        return out

    def analysis_failed(self):
        """The quick part failed (an empty text, say): its message shows, and every output of the
        previous text is cleared, so nothing left on the page belongs to another text."""
        t = self.t
        out = {self.state: None, self.drawn: {}, t.cmp.state: None,
               t.cmp.shown: gr.update(visible=False)}
        out.update(predict_tab.idle(self.p))
        out.update(predict_tab.cleared(self.p))
        out.update(attention_tab.render(self.a, None, 1, attention_tab.MEAN, False, False))
        out.update(attention_tab.document_reset(self.a, None))
        out.update(attribution_tab.render(t, None, True))
        return out

    def ig_failed(self, rec):
        """Integrated Gradients failed: the button is back, and the Attributions tab says so
        (now, and when it is opened later) instead of "being computed"."""
        tagger = isinstance(rec, analysis.HEAD_RECORDS)  # a tagger's or an answer's: its chosen target
        failed = attribution_reader.ANSWER_IG_FAILED if isinstance(rec, analysis.AnswerRecord) else \
            attribution_tab.TAG_IG_FAILED if tagger else attribution_tab.IG_FAILED
        out = {self.t.delta: failed,
               **predict_tab.idle(self.p)}
        if rec is not None and (rec.explained if tagger else rec.attribution) is None:
            out[self.state] = dataclasses.replace(rec, ig_failed=True)
        return out

    def after_failure(self):
        """After a failed Analyze: the button as ``analyze`` left it, every other output untouched (the status
        line keeps the refusal ``analyze`` wrote there)."""
        return {self.drawn: gr.skip(), **predict_tab.idle(self.p), self.p.status: gr.skip()}

    # ------------------------------------------------------------- chart tabs and re-rendering from state
    def show_raw(self, rec, raw):
        """The Predict tab's "show raw probabilities" switch: its label and bar redrawn from the record."""
        return predict_tab.switch_raw(self.p, rec, raw)

    def change_threshold(self, rec, threshold) -> dict:
        """The no-answer threshold changed: kept for the next Analyze, and an analysed question answered again with
        it (its answer and n-best redrawn; the chart tabs drawn again when opened)."""
        p = self.p
        out = {p.chosen_threshold: {"threshold": analysis.threshold_arg(threshold)}, p.status: ""}
        if isinstance(rec, analysis.AnswerRecord):
            lm = self.load(rec.model)
            new = analysis.with_threshold(lm, rec, threshold)
            answer = predict_tab.render_answer(p, new, lm)
            out.update({self.state: new, self.drawn: {}, p.answer: answer[p.answer], p.n_best: answer[p.n_best]})
        return out

    def on_tab(self, open_tab: dict, evt: gr.SelectData):
        """The open tab, kept in place in ``open_tab`` (the State's own dict): an Analyze event
        running now reads it when it draws, as a value passed at its start could not."""
        open_tab["tab"] = TAB_IDS.get(evt.value, evt.value if evt.value in TAB_IDS.values() else "other")
        return open_tab

    def opener(self, tab: str):
        """The handler drawing ``tab``'s charts when it is opened."""

        def open_tab_charts(rec, shown, layer, head, hide, merge, attr_merge, skip_ig):
            return (self.draw_open_tab(rec, tab, shown, layer, head, hide, merge, attr_merge, skip_ig)
                    or {self.drawn: gr.skip()})

        return guards.guard(open_tab_charts)

    def rerender_attention(self, rec, layer, head, hide, merge):
        return attention_tab.render(self.a, rec, layer, head, hide, merge)

    def change_measure(self, model_name, rec, measure, shown, layer, head, hide, merge, chosen=None) -> dict:
        """The Attention tab's measure changed: that measure computed for the analysed text (nothing
        else), the tab's charts and head control redrawn, and the line saying what the measure is. A
        measure the model's family cannot have: that line says why, and the choice goes back to raw
        attention. Before any Analyze: the line alone. A model that cannot be opened: the tab's status line says
        why and the choice (and so the page's link) goes back to the measure shown (``chosen``, the page's
        ``chosen_measure``); any other refusal is said there too (``wire``: ``guards.to_status``)."""
        a = self.a
        try:
            lm = self.load(rec.model if rec is not None else model_name)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge (refusal_md logs the unexpected)
            back = chosen.get("measure", "raw") if isinstance(chosen, dict) else (
                attention_tab.record_measure(rec) if rec is not None else "raw")
            return {a.status: guards.refusal_md(exc), a.measure: gr.update(value=back)}
        try:
            measure = check_measure(lm, measure)
        except core.InputError as exc:
            out = {a.measure: gr.update(value="raw"), a.measure_note: attention_tab.measure_note("raw", str(exc)),
                   self.chosen_measure: {"measure": "raw"}, a.status: ""}
            if rec is not None and rec.mixing is not None:
                out.update(self.measure_drawn(analysis.with_measure(lm, rec, "raw"), rec, shown, layer, head, hide,
                                              merge))
            return out
        out = {a.measure_note: attention_tab.measure_note(measure), self.chosen_measure: {"measure": measure},
               a.status: ""}
        if rec is not None:
            out.update(self.measure_drawn(analysis.with_measure(lm, rec, measure), rec, shown, layer, head, hide,
                                          merge))
        return out

    def measure_drawn(self, new, rec, shown, layer, head, hide, merge) -> dict:
        """``new`` (``rec`` with another measure) as the page's record, the Attention tab drawn for it; a
        tab drawn for ``rec`` stays drawn (the same analysis)."""
        kept = {tab: id(new) for tab, rid in (shown or {}).items() if rid == id(rec)}
        kept["attention"] = id(new)
        out = {self.state: new, self.drawn: kept}
        ctl = attention_tab.controls(self.a, new, layer, head)
        out.update(ctl)
        head = ctl[self.a.head]["value"]
        out.update(attention_tab.render(self.a, new, layer, head, hide, merge))
        out.update(attention_tab.document_reset(self.a, new))  # a document read with the old measure is stale
        return out

    def rerender_attribution(self, rec, merge):
        return attribution_tab.render(self.t, rec, merge, skipped=True)

    def explain_again(self, rec, target, baseline, n_steps, auto, shown, layer, head, hide, merge, attr_merge,
                      progress=gr.Progress()):
        """Explain (Attributions tab): Integrated Gradients again, that tab drawn at once; its status line emptied
        (a refusal is said there: ``wire``, ``guards.to_status``)."""
        return {**self.with_ig(rec, target, baseline, n_steps, auto, "attributions", shown, layer, head, hide, merge,
                               attr_merge, lambda f, d: progress(f, desc=d)), self.t.status: ""}

    # ------------------------------------------------------------- model chooser
    def load_model(self, model_name, target, baseline=None):
        """The chosen model shown. The Attributions tab's choices (target, baseline, methods) are not set here:
        they act on the analysed text, so they follow its model (``follow_choices``, run when this one's name
        lands in ``m.loaded``)."""
        lm = self.load(model_name)
        p, t = self.p, self.t
        out = model_tab.render(self.m, lm)
        out[self.m.loaded] = (model_name or "").strip() or self.default
        if core.baseline_jumps(lm, baseline or "pad"):  # e.g. DeBERTa-v3 from [PAD]: start from [MASK]
            out[t.baseline] = gr.update(value=core.recommended_baseline(lm))
        out[p.model_info] = model_loading.model_line(lm)
        out[p.warnings] = model_loading.warnings_md(lm)
        out.update(predict_tab.head_view(p, lm))  # Question and Context for a question answering model
        out.update(attention_tab.measure_control(self.a, lm))
        if self.a.measure_note in out:  # the choice went back to raw attention
            out[self.chosen_measure] = {"measure": "raw"}
        return out

    def follow_choices(self, rec, loaded, target, baseline, methods) -> dict:
        """The Attributions tab's choices for the model they act on: the analysed text's (Explain again, Compare
        methods and the whole document explain it), else the model shown (``loaded``), so no class, baseline or
        method is offered that its model would refuse (another model's classes after a model change, say).
        A model that cannot be opened changes nothing (the Model tab says why)."""
        t = self.t
        name = rec.model if rec is not None else loaded
        skip = {c: gr.skip() for c in [t.target, t.baseline, t.cmp.methods, *attribution_tab.mode_outputs(t)]}
        if not name:
            return skip
        try:
            lm = model_loading.load(name, name, self.settings) if rec is not None else self.load(name)
        except core.BertvizError:
            return skip
        # a tagger's targets are its text's entities and words; its tab has not the classifier's parts (mode_for)
        return {**attribution_tab.choices_for(t, lm, target, baseline, methods, rec), **attribution_tab.mode_for(t, lm)}

    def choose_model(self, model_name, target, baseline, loaded):
        """**Load model**: the model shown, or a refusal said in the Model tab's status line (no toast, no
        "Error" badge), the dropdown and so the page's link back on the model still shown (``loaded``)."""
        try:
            return self.load_model(model_name, target, baseline)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge (refusal_md logs the unexpected)
            return model_tab.refused(self.m, model_name, loaded, exc)

    def on_start(self, model_name, target, baseline):
        """First page load: show the model, or say plainly why it cannot be loaded (no error toast).
        While the default model builds, the page opens the bare encoder."""
        m = self.m
        opened = build_panel.start_model(model_name, self.default, self.settings)
        try:
            out = guards.guard(self.load_model)(opened, target, baseline)
        except gr.Error as exc:
            msg = f"**Warning:** {esc(exc.message)}"
            out = {m.info: msg, self.p.model_info: msg}
        if opened != model_name:
            out[m.model] = gr.update(value=opened)
        return out

    # ------------------------------------------------------------- events
    def wire(self, demo: gr.Blocks) -> None:
        """Every event of the page, in this order (gradio numbers the events as they are wired)."""
        self.wire_predict()
        self.wire_attention()
        self.wire_attributions()
        after_load = self.wire_model(demo)
        self.wire_other_tabs(demo, after_load)

    def wire_predict(self) -> None:
        """Analyze (one queued event per click, the button's touch before it, the cleanup after a failure) and the
        Predict tab's raw-probabilities switch."""
        p, a, t, m = self.p, self.a, self.t, self.m
        button = {p.analyze, p.status}
        # One queued event per click (issue 19): the handler streams the quick part, Integrated
        # Gradients and the button's return itself. Before it, an unqueued touch of the button says at
        # once that the click was taken, also while the event waits behind other visitors' work.
        analyze_all = self.analyze_outputs | {self.drawn} | button
        taken = gr.on([p.analyze.click, p.text.submit], self.starting, outputs=button, queue=False,
                      api_visibility="private", show_progress="hidden")
        self.analyze_inputs = [m.model, p.text, p.pair, t.target, t.baseline, t.n_steps, t.auto, a.layer, a.head,
                               a.hide, a.merge, t.merge, p.skip_ig, p.window, self.open_tab, self.chosen_measure,
                               p.chosen_threshold]
        analyze = taken.then(guards.guard_stream(self.analyze), inputs=self.analyze_inputs, outputs=analyze_all,
                             api_name="analyze", api_visibility="undocumented",
                             show_progress="hidden", **HEAVY)
        # The handler has restored the page before raising; gradio then marks the event's outputs
        # "Error" (the status line showed it). This unqueued touch of the same outputs clears that (the record's
        # State left out: it is not drawn, and an unqueued event may not write a State others listen to).
        analyze.failure(self.after_failure, outputs=analyze_all - {self.state}, queue=False, api_visibility="private",
                        show_progress="hidden")

        # a question answering model's no-answer threshold: the analysed question answered again with it (one forward
        # pass), and kept for the next Analyze; a refusal stays in the status line
        p.threshold.input(guards.to_status(self.change_threshold, p.status),
                          inputs=[self.state, p.threshold],
                          outputs=[self.state, self.drawn, p.chosen_threshold, p.status, p.answer, p.n_best],
                          trigger_mode="always_last", api_visibility="private", show_progress="hidden", **HEAVY)

        # raw or temperature-scaled probabilities: redrawn from the record, no model work (unqueued, not in the API)
        p.raw.input(guards.guard(self.show_raw), inputs=[self.state, p.raw], outputs=[p.label, p.bar], queue=False,
                    api_visibility="private", show_progress="hidden", trigger_mode="always_last")

    def wire_attention(self) -> None:
        """The chart tabs drawn when opened; the Attention tab redrawn from the record, or for another measure."""
        a, m = self.a, self.m
        # a chart tab is drawn when opened
        self.tabs.select(self.on_tab, self.open_tab, self.open_tab, api_visibility="private", queue=False,
                         show_progress="hidden")
        for item, name, charts in ((self.attention_item, "attention", self.attention_charts),
                                   (self.attributions_item, "attributions", self.attribution_charts)):
            item.select(self.opener(name), inputs=[self.state, *self.chart_inputs[1:]], outputs=charts | {self.drawn},
                        **PRIVATE)

        # re-render from state
        gr.on([a.layer.input, a.head.input], guards.guard(attention_tab.render_focus),
              inputs=[self.state, a.layer, a.head, a.hide, a.merge], outputs=[a.heatmap, a.cls_rows, a.rollout],
              trigger_mode="always_last", **PRIVATE)
        gr.on([a.hide.input, a.merge.input], guards.guard(self.rerender_attention),
              inputs=[self.state, a.layer, a.head, a.hide, a.merge], outputs=self.attention_charts,
              trigger_mode="always_last", **PRIVATE)
        # another measure: computed for the analysed text (model work: in the heavy queue), the tab redrawn.
        # preprocess=False: the dropdown fires twice on a pick, and the second event carries the head chosen
        # before the first swapped the head choices ("mean of heads" among "whole layer", "head 1"...), which
        # gradio's check refused with a traceback in the log; controls() falls back to the first choice itself
        # A refusal (the model cannot be opened...) stays in the tab's status line: no toast, no "Error" badges
        a.measure.input(guards.to_status(self.change_measure, a.status),
                        inputs=[m.model, self.state, a.measure, self.drawn, a.layer, a.head, a.hide, a.merge,
                                self.chosen_measure],
                        outputs=self.attention_charts | self.document_outputs
                        | {self.state, self.drawn, a.layer, a.head, a.measure, a.measure_note, self.chosen_measure,
                           a.status},
                        trigger_mode="always_last", api_visibility="private", show_progress="minimal",
                        preprocess=False, **HEAVY)
        # the whole-document part: read on its own button, one window on the picker; redrawn with the controls
        attention_tab.wire_document(a, self.state, HEAVY, self.settings)

    def wire_attributions(self) -> None:
        """The Attributions tab: its view, Explain again, the downloads and comparison, choices that follow."""
        t, m = self.t, self.m
        t.merge.input(guards.guard(self.rerender_attribution), inputs=[self.state, t.merge],
                      outputs=self.attribution_charts, trigger_mode="always_last", **PRIVATE)

        # explain again (attribution only); a refusal (no analysis yet...) stays in the tab's status line
        t.explain.click(guards.to_status(self.explain_again, t.status),
                        inputs=[self.state, t.target, t.baseline, t.n_steps, t.auto, *self.chart_inputs[1:-1]],
                        outputs=self.ig_outputs | {t.status}, api_visibility="private", **HEAVY)
        # the download buttons follow the analysis; methods compared
        attribution_tab.wire(t, self.state, HEAVY, self.settings)

        # the Attributions tab's choices follow the model they act on: after each analysis and each model shown.
        # preprocess=False: the two triggers fire together, and the second carries the target shown before the
        # first swapped its choices (a tagger's entities for a classifier's classes), which gradio's check refused
        # with a traceback in the log; the handler keeps a value only where it is still offered
        gr.on([self.state.change, m.loaded.change], guards.guard(self.follow_choices),
              inputs=[self.state, m.loaded, t.target, t.baseline, t.cmp.methods],
              outputs=[t.target, t.baseline, t.cmp.methods, *attribution_tab.mode_outputs(t)],
              trigger_mode="always_last", queue=False, preprocess=False,
              api_visibility="private", show_progress="hidden")  # the model is open already: no queue

    def wire_model(self, demo: gr.Blocks) -> tuple:
        """The model chooser, the first page load (with the link's view) and the default model's build. Returns
        what shows a model once it is there (``on_built``; the Fine-tune tab's ``after_run``)."""
        m, t = self.m, self.t
        # model chooser, first page load, the default model's build
        load_model = guards.guard(self.load_model)
        m.load.click(self.choose_model, inputs=[m.model, t.target, t.baseline, m.loaded],
                     outputs=self.model_outputs | {m.model}, api_visibility="private", **HEAVY)
        started = demo.load(self.on_start, inputs=[m.model, t.target, t.baseline],
                            outputs=self.model_outputs | {m.model}, api_visibility="private", **HEAVY)
        links.wire(self, started, HEAVY)  # the view in the URL; a link opened restores it
        after_load = (load_model, [m.model, t.target], self.model_outputs)
        build_panel.wire(self.build, demo=demo, default=self.default, model_dd=m.model, on_built=after_load,
                         settings=self.settings)
        return after_load

    def wire_other_tabs(self, demo: gr.Blocks, after_load: tuple) -> None:
        """The other tabs, and the public API (stable names)."""
        p, m = self.p, self.m
        batch_tab.wire(self.b, model_dd=m.model, default=self.default, settings=self.settings, demo=demo)
        finetune_tab.wire(self.f, demo=demo, default=self.default, model_dd=m.model, predict_text=p.text,
                          predict_pair=p.pair, tabs=self.tabs, heavy=HEAVY, after_run=after_load,
                          settings=self.settings)
        evaluate_tab.wire(self.e, demo=demo, model_dd=m.model, default=self.default, predict_text=p.text,
                          predict_pair=p.pair, tabs=self.tabs, settings=self.settings, open_tab=self.open_tab,
                          link_tab=self.links.tab, link_run=self.links.run)
        api.register(self.default, self.settings, HEAVY)


TAB_IDS = {"Predict": "predict", "Attention": "attention", "Attributions": "attributions"}


def mount(app, demo: gr.Blocks, settings: Settings):
    """Queue ``demo`` and mount it at ``/`` of the FastAPI ``app`` (``gr.mount_gradio_app``); in public
    mode a visitor's files are served to that visitor only (``visitor.ZipGuard``) and uploads are capped.
    Returns the mounted gradio app (the serving layer adds its own answers to it)."""
    demo.queue(default_concurrency_limit=2, max_size=settings.queue_size)
    if settings.public:  # a visitor's zip downloads are served to that visitor only
        app.add_middleware(visitor.ZipGuard, demo=demo)
    app.add_middleware(uploads.PathGuard)  # gradio's API reads only files uploaded to it
    # show_error=False: never a traceback; handlers raise gr.Error with a clear message
    mounted = gr.mount_gradio_app(app, demo, path="/", server_name=settings.host, server_port=settings.port,
                                  footer_links=["api", "gradio"], show_error=False, ssr_mode=False,
                                  # gradio's upload route itself refuses bigger files, before anything is written
                                  max_file_size=int(settings.max_upload_mb * 10**6) if settings.public else None,
                                  allowed_paths=[], blocked_paths=uploads.blocked_paths(settings),
                                  theme=gr.themes.Soft(), css=CSS, head=figures.HEAD + links.HEAD)
    uploads.enforce_gradio_checks(demo)
    api.refuse_malformed_calls(demo)  # one clear answer for a call whose inputs do not fit
    gradio_sessions.install()  # a queued API call no longer builds every component's config
    return next(r.app for r in mounted.routes if hasattr(getattr(r, "app", None), "get_blocks"))
