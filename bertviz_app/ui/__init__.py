"""The Gradio web UI: the only package that imports gradio.

``build_app(settings, model)`` assembles the Blocks app from one module per tab; ``mount(app, demo,
settings)`` queues it and mounts it on the FastAPI app of ``bertviz_app.server`` (which serves it). One Analyze click computes every analysis once and keeps the records in ``gr.State``;
layer/head/toggle changes re-render from that state without touching the model. The Fine-tune
tab streams a training run (its own concurrency id, so analyses are not blocked behind it) and
selects the new model in the Model tab when it is saved.

HTTP API (stable names, see docs/api.md): ``/predict``, ``/attention``, ``/explain``, ``/summary``,
as gradio endpoints (``api.py``) and as typed JSON routes (``POST /v1/predict`` ..., ``bertviz_app.server``).
The UI's own events are hidden from the API docs (``/analyze`` stays callable, undocumented).
"""

from __future__ import annotations

import dataclasses
import logging

import gradio as gr

import bertviz_app as core
from bertviz_app.config import Settings

from . import (
    api,
    attention_tab,
    attribution_tab,
    batch_tab,
    build_panel,
    common,
    finetune_tab,
    model_tab,
    predict_tab,
    visitor,
)

__all__ = ["build_app", "mount", "CSS"]

log = logging.getLogger("bertviz_app.ui")
CSS = common.CSS + finetune_tab.CSS
HEAVY = dict(concurrency_limit=1, concurrency_id="heavy")  # model work, one at a time (2-core friendly)


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
        state = gr.State(None, time_to_live=3600)
        visitor.register(demo, settings)  # public mode: the browser's owner token, known on page load
        build = build_panel.build(default, settings)  # the default model's background build, while it runs
        # Which tab is open, and which record each chart tab last drew: a tab's charts are drawn when
        # it is open (on Analyze) or when it is opened, never for a hidden tab (bench/load_results.md:
        # drawing every tab on each Analyze cost more than the model's own forward passes).
        open_tab = gr.State("predict")
        drawn = gr.State({}, time_to_live=3600)  # {"attention": record id, "attributions": record id}
        with gr.Tabs() as tabs:
            with gr.Tab("Predict", id="predict"):
                p = predict_tab.build()
            with gr.Tab("Attention", id="attention") as attention_item:
                a = attention_tab.build()
            with gr.Tab("Attributions", id="attributions") as attributions_item:
                t = attribution_tab.build()
            with gr.Tab("Model", id="model"):
                m = model_tab.build(default, settings)
            with gr.Tab("Fine-tune", id="finetune"):
                f = finetune_tab.build(default, settings=settings)
            with gr.Tab("Explain a file", id="batch"):
                b = batch_tab.build(settings=settings)

        # ------------------------------------------------------------- Analyze: everything once
        analyze_outputs = {state, p.model_info, p.warnings, p.notice, p.label, p.bar, p.tokens,
                           a.layer, a.head, a.heatmap, a.cls_rows, a.rollout, a.overview, a.overview_notice,
                           t.target, t.delta, t.tokens, t.bar, t.path, t.lens, t.cmp.shown, t.cmp.state}

        chart_inputs = [open_tab, drawn, a.layer, a.head, a.hide, a.merge, t.merge, p.skip_ig]
        attention_charts = {a.heatmap, a.cls_rows, a.rollout, a.overview, a.overview_notice}
        attribution_charts = {t.delta, t.tokens, t.bar, t.path, t.lens}

        def draw_open_tab(rec, tab, shown, layer, head, hide, merge, attr_merge, skip_ig) -> dict:
            """The charts of ``tab`` for ``rec`` if it is a chart tab not drawn for ``rec`` yet, else {}.
            A handler's dict without a component leaves that component as it is (but gradio reads an
            empty dict as one value, so a handler returning this alone sends {drawn: gr.skip()})."""
            shown = dict(shown or {})
            if rec is None or tab not in ("attention", "attributions") or shown.get(tab) == id(rec):
                return {}
            if tab == "attention":
                out = attention_tab.render(a, rec, layer, head, hide, merge)
            else:
                out = attribution_tab.render(t, rec, attr_merge, skipped=bool(skip_ig))
            shown[tab] = id(rec)
            out[drawn] = shown
            return out

        timing = gr.State(None)  # AnalyzeProgress.snapshot(): the button's progress carries on into the IG event

        @common.guard_stream
        def analyze(model_name, text, pair, target, layer, head, hide, merge, attr_merge, skip_ig=False,
                    window=False, tab="predict", shown=None):
            # The quick part (one forward pass each: prediction, attention, [CLS] lens) is shown at
            # once; Integrated Gradients and the [CLS] path follow as a second event (analyze_ig).
            # The work runs in a thread while the Analyze button shows its progress and time left.
            track = common.AnalyzeProgress(skip_ig=bool(skip_ig))

            def work():
                lm = common.load(model_name, default, settings)
                track.n_layers = lm.num_layers
                return lm, common.analyze_fast(lm, text, pair, progress=track.step, window=bool(window))

            lm, rec = yield from common.stream_work(work, lambda: predict_tab.busy(p, track.label(), track.status()))
            if target not in lm.labels:
                target = common.PREDICTED
            out = {state: rec, drawn: {}, timing: track.snapshot()}  # both chart tabs are stale until drawn
            out.update(predict_tab.render(p, rec, lm))
            out.update(attention_tab.controls(a, rec, layer, head))
            out.update(attribution_tab.controls(t, rec, target))
            out[t.delta] = attribution_tab.pending_md(bool(skip_ig))
            out.update({t.cmp.shown: gr.update(visible=False), t.cmp.state: None})  # a comparison of the last text
            out.update(draw_open_tab(rec, tab, {}, layer, head, hide, merge, attr_merge, skip_ig))
            out.update(predict_tab.busy(p, track.label(), track.status()))  # the IG event follows
            yield out

        def with_ig(rec, target, baseline, n_steps, auto, tab, shown, layer, head, hide, merge, attr_merge,
                    step, on_attribution=None) -> dict:
            """Integrated Gradients and the [CLS] path added to ``rec``; the open chart tab drawn.
            ``step(fraction, desc)`` reports progress."""
            if rec is None:
                raise core.InputError("Press Analyze first: there is no text to explain yet.")
            step(0.2, common.AnalyzeProgress.IG_PHASES[0])
            lm = common.load(rec.model, default, settings)
            new = common.analyze_ig(lm, rec, target, baseline, n_steps, progress=step, auto=bool(auto),
                                    on_attribution=on_attribution)
            # same analysis, same attention maps: an attention tab drawn for ``rec`` stays drawn
            kept = {"attention": id(new)} if (shown or {}).get("attention") == id(rec) else {}
            out = {state: new, drawn: kept, p.tokens: predict_tab.tokens_html(new)}
            out.update(draw_open_tab(new, tab, kept, layer, head, hide, merge, attr_merge, False))
            return out

        @common.guard_stream
        def analyze_ig(rec, target, baseline, n_steps, auto, tab="predict", shown=None, layer=1, head=None,
                       hide=False, merge=False, attr_merge=True, skip_ig=False, snap=None):
            if skip_ig:  # no IG; a chart tab opened while the quick part ran is drawn now
                yield draw_open_tab(rec, tab, shown, layer, head, hide, merge, attr_merge, True) or {drawn: gr.skip()}
                return
            track = common.AnalyzeProgress.resume(snap, n_steps=n_steps, auto=bool(auto))
            out = yield from common.stream_work(
                lambda: with_ig(rec, target, baseline, n_steps, auto, tab, shown, layer, head, hide, merge, attr_merge,
                                track.step, on_attribution=track.ig_done),
                lambda: predict_tab.busy(p, track.label(), track.status()))
            yield out

        def analysis_failed():
            """The quick part failed (an empty text, say): its message shows, and every output of the
            previous text is cleared, so nothing left on the page belongs to another text."""
            out = {state: None, drawn: {}, timing: None, t.cmp.state: None, t.cmp.shown: gr.update(visible=False)}
            out.update(predict_tab.idle(p))
            out.update(predict_tab.cleared(p))
            out.update(attention_tab.render(a, None, 1, attention_tab.MEAN, False, False))
            out.update(attribution_tab.render(t, None, True))
            return out

        def ig_failed(rec):
            """Integrated Gradients failed: the button is back, and the Attributions tab says so
            (now, and when it is opened later) instead of "being computed"."""
            out = {t.delta: attribution_tab.IG_FAILED, **predict_tab.idle(p)}
            if rec is not None and rec.attribution is None:
                out[state] = dataclasses.replace(rec, ig_failed=True)
            return out

        quick = dict(queue=False, api_visibility="private", show_progress="hidden")
        ig_outputs = {state, drawn, p.tokens} | attention_charts | attribution_charts
        fast = gr.on([p.analyze.click, p.text.submit], lambda: predict_tab.busy(p, "Analyzing\u2026", common.STARTING),
                     outputs={p.analyze, p.status}, **quick).then(
            analyze, inputs=[m.model, p.text, p.pair, t.target, a.layer, a.head, a.hide, a.merge, t.merge, p.skip_ig,
                             p.window, open_tab, drawn],
            outputs=analyze_outputs | {drawn, timing, p.analyze, p.status}, api_name="analyze",
            api_visibility="undocumented", show_progress="hidden", **HEAVY)
        fast.failure(analysis_failed, outputs=analyze_outputs | {drawn, timing, p.analyze, p.status}, **quick)
        slow = fast.success(analyze_ig, inputs=[state, t.target, t.baseline, t.n_steps, t.auto, *chart_inputs, timing],
                            outputs=ig_outputs | {p.analyze, p.status}, api_name="analyze_ig",
                            api_visibility="undocumented", show_progress="hidden", **HEAVY)
        # success and failure each restore the button: a .then() after this event left it "Analyzing…" when the
        # event failed (gradio 6.31, seen in tests/test_browser_page.py)
        slow.failure(ig_failed, inputs=[state], outputs={state, t.delta, p.analyze, p.status}, **quick)
        slow.success(lambda: predict_tab.idle(p), outputs={p.analyze, p.status}, **quick)

        # ------------------------------------------------------------- a chart tab is drawn when opened
        tab_ids = {"Predict": "predict", "Attention": "attention", "Attributions": "attributions"}

        def on_tab(evt: gr.SelectData):
            return tab_ids.get(evt.value, evt.value if evt.value in tab_ids.values() else "other")

        tabs.select(on_tab, None, open_tab, api_visibility="private", queue=False, show_progress="hidden")

        def opener(tab: str):
            @common.guard
            def open_tab_charts(rec, shown, layer, head, hide, merge, attr_merge, skip_ig):
                return draw_open_tab(rec, tab, shown, layer, head, hide, merge, attr_merge, skip_ig) or {drawn: gr.skip()}

            return open_tab_charts

        for item, name, charts in ((attention_item, "attention", attention_charts),
                                   (attributions_item, "attributions", attribution_charts)):
            item.select(opener(name), inputs=[state, *chart_inputs[1:]], outputs=charts | {drawn},
                        api_visibility="private", show_progress="minimal")

        # ------------------------------------------------------------- re-render from state
        gr.on([a.layer.input, a.head.input], common.guard(attention_tab.render_focus),
              inputs=[state, a.layer, a.head, a.hide, a.merge], outputs=[a.heatmap, a.cls_rows, a.rollout],
              api_visibility="private", trigger_mode="always_last", show_progress="minimal")

        @common.guard
        def rerender_attention(rec, layer, head, hide, merge):
            return attention_tab.render(a, rec, layer, head, hide, merge)

        gr.on([a.hide.input, a.merge.input], rerender_attention, inputs=[state, a.layer, a.head, a.hide, a.merge],
              outputs={a.heatmap, a.cls_rows, a.rollout, a.overview, a.overview_notice},
              api_visibility="private", trigger_mode="always_last", show_progress="minimal")

        @common.guard
        def rerender_attribution(rec, merge):
            return attribution_tab.render(t, rec, merge, skipped=True)

        t.merge.input(rerender_attribution, inputs=[state, t.merge], outputs={t.delta, t.tokens, t.bar, t.path, t.lens},
                      api_visibility="private", trigger_mode="always_last", show_progress="minimal")

        # ------------------------------------------------------------- explain again (attribution only)
        @common.guard
        def explain_again(rec, target, baseline, n_steps, auto, shown, layer, head, hide, merge, attr_merge,
                          progress=gr.Progress()):
            # pressed on the Attributions tab, so that tab is drawn at once
            return with_ig(rec, target, baseline, n_steps, auto, "attributions", shown, layer, head, hide, merge,
                           attr_merge, lambda f, d: progress(f, desc=d))

        t.explain.click(explain_again, inputs=[state, t.target, t.baseline, t.n_steps, t.auto, *chart_inputs[1:-1]],
                        outputs=ig_outputs, api_visibility="private", **HEAVY)

        attribution_tab.wire(t, state, HEAVY)  # the download buttons follow the analysis; methods compared

        # ------------------------------------------------------------- model chooser
        @common.guard
        def load_model(model_name, target, baseline=None):
            lm = common.load(model_name, default, settings)
            out = model_tab.render(m, lm)
            choices = [common.PREDICTED, *lm.labels]
            out[t.target] = gr.update(choices=choices, value=target if target in choices else common.PREDICTED)
            if core.baseline_jumps(lm, baseline or "pad"):  # e.g. DeBERTa-v3 from [PAD]: start from [MASK]
                out[t.baseline] = gr.update(value=core.recommended_baseline(lm))
            out[p.model_info] = common.model_line(lm)
            out[p.warnings] = common.warnings_md(lm)
            return out

        model_outputs = {m.info, m.table, m.config, t.target, t.baseline, p.model_info, p.warnings}
        m.load.click(load_model, inputs=[m.model, t.target, t.baseline], outputs=model_outputs, api_visibility="private",
                     **HEAVY)

        def on_start(model_name, target, baseline):
            """First page load: show the model, or say plainly why it cannot be loaded (no error toast).
            While the default model builds, the page opens the bare encoder."""
            opened = build_panel.start_model(model_name, default, settings)
            try:
                out = load_model(opened, target, baseline)
            except gr.Error as exc:
                msg = f"**Warning:** {common.esc(exc.message)}"
                out = {m.info: msg, p.model_info: msg}
            if opened != model_name:
                out[m.model] = gr.update(value=opened)
            return out

        demo.load(on_start, inputs=[m.model, t.target, t.baseline], outputs=model_outputs | {m.model}, api_visibility="private",
                  **HEAVY)
        build_panel.wire(build, demo=demo, default=default, model_dd=m.model,
                         on_built=(load_model, [m.model, t.target], model_outputs), settings=settings)

        # ------------------------------------------------------------- explain a file
        batch_tab.wire(b, model_dd=m.model, default=default, settings=settings)

        # ------------------------------------------------------------- fine-tune tab
        finetune_tab.wire(f, demo=demo, default=default, model_dd=m.model, predict_text=p.text, predict_pair=p.pair, tabs=tabs,
                          heavy=HEAVY, after_run=(load_model, [m.model, t.target], model_outputs), settings=settings)

        # ------------------------------------------------------------- public API (stable names)
        api.register(default, settings, HEAVY)
    return demo


def mount(app, demo: gr.Blocks, settings: Settings):
    """Queue ``demo`` and mount it at ``/`` of the FastAPI ``app`` (``gr.mount_gradio_app``); in public
    mode a visitor's files are served to that visitor only (``visitor.ZipGuard``) and uploads are capped."""
    demo.queue(default_concurrency_limit=2, max_size=settings.queue_size)
    if settings.public:  # a visitor's zip downloads are served to that visitor only
        app.add_middleware(visitor.ZipGuard, demo=demo)
    # show_error=False: never a traceback; handlers raise gr.Error with a clear message
    return gr.mount_gradio_app(app, demo, path="/", server_name=settings.host, server_port=settings.port,
                               footer_links=["api", "gradio"], show_error=False, ssr_mode=False,
                               # gradio's upload route itself refuses bigger files, before anything is written
                               max_file_size=int(settings.max_upload_mb * 10**6) if settings.public else None,
                               theme=gr.themes.Soft(), css=CSS)
