"""The Attributions tab for a question answering model (a reader): the target control (the answer span, its start
or end, no answer, an n-best span), Integrated Gradients' view of the chosen span, and the panel that explains the
same target by another method (occlusion, LIME, KernelSHAP) with its faithfulness on the span's probability. Pure
helpers and the panel's build; the events are ``attribution_tab.wire``'s."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import numpy as np

import bertviz_app as core

from . import analysis, figures, model_loading, plots
from .control_values import BASELINE_CHOICES, tolerance_arg, trust_md
from .markup import esc

ANSWER_TARGET_LABEL = "Target (the answer span, its start or end, no answer, an n-best span)"
ANSWER_NOTE = (
    "**A question answering model** answers with a span of the context, so this tab explains the span: pick the "
    "answer span as a whole, its start or its end alone, \"no answer\", or one of the n-best spans in **Target** and "
    "press **Explain this target**. The score is Integrated Gradients on the word vectors of the question and the "
    "context of F = log p(start) + log p(end) (the span's score p(start) \u00d7 p(end), as a log; the start or the end "
    "alone: its own log-probability; \"no answer\": both at the first token). **Other methods for this target** "
    "(below) explains the same target by occlusion, LIME or KernelSHAP and measures each explanation's faithfulness "
    "on the span's probability. Not offered for a question answering model: the classifier's comparison of every "
    "method side by side, the whole-document explanation, the [CLS] path and lens (its head reads every context "
    "token, not [CLS]), and the downloads.")


# --------------------------------------------------------------------------- a question answering model
NO_ANSWER_TEXT = "(analyze a question to list its targets)"
ANSWER_IG_FAILED = ("**Integrated Gradients did not finish** for this target (the message says why); the answer and "
                    "the attention are complete. Press **Explain this target** to try again.")


def answer_target_update(rec, target) -> dict:
    """The target control for a question answering model: the answer span, its start, its end, no answer and the
    n-best spans of its analysed question (``analysis.answer_choices``), ``target`` kept where offered (else
    ``analysis.answer_target``); before a question is analysed, a placeholder ("") that explains nothing."""
    if not isinstance(rec, analysis.AnswerRecord):
        return gr.update(choices=[(NO_ANSWER_TEXT, "")], value="", label=ANSWER_TARGET_LABEL,
                         info="Analyze a question and its context to list what can be explained")
    return gr.update(choices=analysis.answer_choices(rec.answer), value=analysis.answer_target(rec.answer, target),
                     label=ANSWER_TARGET_LABEL, info="the span as a whole, its start or end alone, or no answer")


def answer_pending_md(rec: analysis.AnswerRecord, skipped: bool) -> str:
    """The tab's line while an answer has no explanation yet."""
    if rec.ig_failed:
        return ANSWER_IG_FAILED
    if skipped:
        return ("**Integrated Gradients skipped** (\u201cSkip Integrated Gradients\u201d is on). Choose a target and "
                "press **Explain this target**.")
    return "**Integrated Gradients are being computed\u2026** the answer and attention are ready."


def span_units(a, merge: bool) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A span explanation's (labels, scores, special) by word ("Q: word" / "C: word", each side's words) or by
    word-piece (special tokens marked), for the coloured text and the bar."""
    if merge:
        labels = [f"{'Q' if w.side == 'question' else 'C'}: {w.word}" for w in a.words]
        return labels, np.array([w.score for w in a.words], dtype=np.float64), np.zeros(len(labels), dtype=bool)
    return list(a.tokens), np.asarray(a.scores, dtype=np.float64), np.array([s is None for s in a.sides])


def span_name(a) -> str:
    """What a span explanation's scores push towards: "the span “joy”", "the start of “joy”", "no answer"."""
    tg = a.target
    if tg.kind == "no-answer":
        return "no answer"
    what = {"span": "the span", "start": "the start of", "end": "the end of"}[tg.part]
    return f"{what} “{tg.text}”"


def span_md(rec: analysis.AnswerRecord, min_change: float) -> str:
    """What an answer's explanation explains, in words, and the numbers that say how far to trust it: F(x),
    F(baseline), their change, completeness (the scores' sum), the convergence delta and the steps."""
    a = rec.explained
    tg = a.target
    f_is = {"span": "log p(start) + log p(end)", "start": "log p(start)", "end": "log p(end)"}[tg.part]
    where = ("at the first token (SQuAD 2.0's \"no answer\")" if tg.kind == "no-answer" else
             f"of “{esc(tg.text)}” (characters {tg.start}-{tg.end}, tokens {tg.first}-{tg.last})")
    windows = f", read in window {a.window + 1} of {a.windows}" if a.windows > 1 else ""
    what = (f"**Explaining {esc(span_name(a))}**: F = {f_is} {where}{windows}; p(start) = {tg.p_start:.4g}, "
            f"p(end) = {tg.p_end:.4g}.")
    gap = a.f_x - a.f_baseline
    base = dict((v, k) for k, v in BASELINE_CHOICES).get(a.baseline, a.baseline)
    line = (f"{what} Each word's score is its share of the change F(x) \u2212 F(baseline); the scores add up to it "
            f"up to the convergence delta (question {a.side_total('question'):+.4g}, context "
            f"{a.side_total('context'):+.4g}).  \n"
            f"**F(x)** = {a.f_x:.6g} · **F(baseline)** = {a.f_baseline:.6g} ({esc(base)}) · change **{gap:+.6g}** · "
            f"**sum of scores** {float(np.sum(a.scores)):+.6g} · **convergence delta** {a.delta:+.3e}")
    return line + trust_md(a, min_change)


def render_answered(ui: SimpleNamespace, rec: analysis.AnswerRecord, merge: bool, skipped: bool = False) -> dict:
    """An answer's explanation drawn with the classifier's views: the question's and the context's words (or
    word-pieces) coloured on the absolute scale of F(x) - F(baseline), the bar by word, and the line saying what it
    explains and how far to trust it. No [CLS] path or lens (hidden for this head: ``mode_for``)."""
    no_cls = plots.empty_figure("A question answering model has no [CLS] path or lens: it reads every context token.")
    a = rec.explained
    if a is None:
        return {ui.delta: answer_pending_md(rec, skipped), ui.tokens: "", ui.bar: plots.empty_figure(),
                ui.path: no_cls, ui.lens: no_cls}
    labels, scores, special = span_units(a, merge)
    name = span_name(a)
    scale = core.colour_scale(a, rec.min_change, output="log-probability")
    unit = "word" if merge else "word-piece"
    warning = core.change_warning(SimpleNamespace(target=name, scores=scores), scale, scores)
    return {
        ui.delta: span_md(rec, rec.min_change),
        ui.tokens: core.tokens_html(labels, scores, special, name, scale, f"Each {unit}'s share of F for {name} "
                                    "(Q: the question, C: the context)", warning),
        ui.bar: plots.attribution_bar(labels, scores, title=f"Attribution to {name} by {unit}",
                                      full=scale.full if scale.absolute else None,
                                      note="The change is too small to read anything into." if scale.too_small else ""),
        ui.path: no_cls,
        ui.lens: no_cls,
    }


# --------------------------------------------------------------------------- a reader's span by another method
SPAN_METHOD_LABEL = "Explain this target with this method"
SPAN_METHODS = [("Integrated Gradients", "integrated_gradients"), ("Occlusion", "occlusion"), ("LIME", "lime"),
                ("KernelSHAP", "kernel_shap")]
SPAN_METHODS_NOTE = (
    "The target chosen above (the answer span, its start or end, no answer, an n-best span) explained by another "
    "method, with the baseline above. **Integrated Gradients**: as above (the steps above). **Occlusion**: each "
    "word's score is how much F drops when its tokens get the baseline's word vectors. **LIME** and **KernelSHAP**: "
    "a linear model of F fitted on random subsets of the words, each left-out word given the baseline's vectors "
    "(KernelSHAP's weights estimate Shapley values and add up to F(x) − F(all replaced); LIME's are a local fit "
    "weighted by closeness to the input); by default the context's words are sampled and the question is kept as it "
    "is. **Faithfulness** (ERASER, DeYoung et al. 2020), on the span's probability p(start) × p(end) (its start's "
    "or end's probability alone), averaged over the top 10–50% of the words: *comprehensiveness* = how much the "
    "probability drops when the top-ranked words are replaced by the baseline (higher = more faithful); "
    "*sufficiency* = how much it drops when only they are kept (near 0 or below = more faithful). Words are masked, "
    "not removed, so the span stays at its positions.")


def build_span_methods() -> SimpleNamespace:
    """A question answering model's target explained by the method chosen, with its faithfulness (hidden for the
    other heads: ``mode_for``)."""
    with gr.Accordion("Other methods for this target (and their faithfulness)", open=True, visible=False,
                      elem_id="bv-span-methods") as panel:
        gr.Markdown(SPAN_METHODS_NOTE, elem_classes=["bv-note"])
        with gr.Row():
            method = gr.Radio(SPAN_METHODS, value="kernel_shap", label="Method", elem_id="bv-span-method", scale=3)
            n_samples = gr.Number(value=200, precision=0, label="Samples (LIME, KernelSHAP)",
                                  elem_id="bv-span-samples", scale=1)
            seed = gr.Number(value=0, precision=0, label="Seed", elem_id="bv-span-seed", scale=1)
            side = gr.Radio([("the context's words", "context"), ("the question's and the context's", "both")],
                            value="context", label="Words sampled and ranked", elem_id="bv-span-side", scale=2)
        run = gr.Button(SPAN_METHOD_LABEL, elem_id="bv-span-run")
        status = gr.Markdown(elem_id="bv-span-status")  # why it was refused, under its button
        reading = gr.Markdown(elem_id="bv-span-reading")
        tokens = gr.HTML(elem_id="bv-span-tokens")
        bar = figures.plot(label="Attribution by word", elem_id="bv-span-bar")
    return SimpleNamespace(panel=panel, method=method, n_samples=n_samples, seed=seed, side=side, run=run,
                           status=status, reading=reading, tokens=tokens, bar=bar)


def samples_arg(value) -> int | None:
    """The Samples box as ``sample_span``'s ``n_samples``: empty is the default count; anything else is checked by
    the core (a whole number of at least 2, its message says so)."""
    if value is None or value == "":
        return None
    return int(value) if isinstance(value, float) and value.is_integer() else value


def explain_span_method(rec, target, method: str, n_samples, seed, side: str, baseline: str, n_steps: int,
                        auto: bool, settings: core.Settings):
    """(record, faithfulness) of the analysed answer's ``target`` by ``method`` (``core.explain_span_by``) and
    ``core.span_faithfulness`` on the span's probability."""
    if rec is None:
        raise core.InputError("Press Analyze first: there is no question to explain yet.")
    if not isinstance(rec, analysis.AnswerRecord):
        raise core.InputError("Other methods for a target explain a question answering model's span: this model is "
                              "not one (its explanation is above).")
    if method not in dict((v, k) for k, v in SPAN_METHODS):
        raise core.InputError(f"Choose a method: {', '.join(k for k, _ in SPAN_METHODS)}.")
    args = analysis.answer_target_args(rec.answer, target)
    lm = model_loading.load(rec.model, rec.model, settings)  # the record's model was allowed when it was analysed
    q, c, span, part = rec.text, rec.pair, args["span"], args["part"]
    tolerance = tolerance_arg(bool(auto))
    [a] = core.explain_span_by(lm, q, c, span, method=method, part=part, baseline=baseline, tolerance=tolerance,
                               n_steps=None if tolerance is not None else int(n_steps),
                               n_samples=samples_arg(n_samples), seed=samples_arg(seed) or 0, side=side)
    [f] = core.span_faithfulness(lm, [a], baseline=baseline, side=side)
    return a, f


def span_faith_md(f, side: str) -> str:
    """An answer's faithfulness in words: the two AOPC numbers, what they mean, and the plain reading."""
    ks = ", ".join(str(k) for k in f.ks)
    words = "the context's words" if side == "context" else "the question's and the context's words"
    return (f"**Faithfulness** (ERASER AOPC over the top {ks}% of {words}, on the probability of {esc(f.target)}, "
            f"p = {f.p_x:.4g}): comprehensiveness **{f.comprehensiveness:+.3f}** (probability lost when they are "
            f"replaced by the baseline; higher is more faithful), sufficiency **{f.sufficiency:+.3f}** (lost when only "
            f"they are kept; near 0 or below is more faithful). {esc(f.reading[:1].upper() + f.reading[1:])}.")


def span_method_md(a, f, side: str) -> str:
    """What a span explanation by any method explains and its numbers: F(x), F(baseline), the scores' sum (and for
    Integrated Gradients the delta), then its faithfulness."""
    tg = a.target
    name = dict((v, k) for k, v in SPAN_METHODS).get(a.method, a.method)
    f_is = {"span": "log p(start) + log p(end)", "start": "log p(start)", "end": "log p(end)"}[tg.part]
    total = float(np.sum(a.scores))
    line = (f"**{esc(name)} of {esc(span_name(a))}**: F = {f_is}. **F(x)** = {a.f_x:.6g} · **F(baseline)** = "
            f"{a.f_baseline:.6g} · change **{a.f_x - a.f_baseline:+.6g}** · **sum of scores** {total:+.6g}")
    if a.delta is not None:
        line += f" · **convergence delta** {a.delta:+.3e} · **steps** {a.n_steps}"
    if a.method in ("lime", "kernel_shap"):
        line += (f" · sampled: {'the context' if side == 'context' else 'the question and the context'}"
                 f"{' (the question kept)' if side == 'context' else ''}")
    return line + ".  \n" + span_faith_md(f, side)


def render_span_method(ui: SimpleNamespace, a, f, side: str, merge: bool, min_change: float) -> dict:
    """The panel's line, coloured words (or word-pieces) and bar for one span explanation."""
    sp = ui.spans
    labels, scores, special = span_units(a, merge)
    name = span_name(a)
    scale = core.colour_scale(a, min_change, output="log-probability")
    unit = "word" if merge else "word-piece"
    warning = core.change_warning(SimpleNamespace(target=name, scores=scores), scale, scores)
    method = dict((v, k) for k, v in SPAN_METHODS).get(a.method, a.method)
    return {sp.status: "", sp.reading: span_method_md(a, f, side),
            sp.tokens: core.tokens_html(labels, scores, special, name, scale,
                                        f"{method}: each {unit}'s score for {name} (Q: the question, C: the context)",
                                        warning),
            sp.bar: plots.attribution_bar(labels, scores, title=f"{method}: attribution to {name} by {unit}",
                                          full=scale.full if scale.absolute else None)}
