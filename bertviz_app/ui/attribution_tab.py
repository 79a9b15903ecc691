"""Attributions tab: Integrated Gradients per token (coloured text + bar chart), the
convergence delta with a plain-language verdict, the explanation's faithfulness (ERASER), the
[CLS] path and the [CLS] lens; and, on request, every attribution method side by side on the same
text (``core.compare_methods``): cost, faithfulness, rank agreement and agreement with rollout."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import numpy as np
import pandas as pd

import bertviz_app as core

from . import analysis, figures, guards, model_loading, plots, streaming, token_views, visitor
from . import attribution_reader as reader
from .control_values import (
    BASELINE_CHOICES,
    DELTA_WARN,
    METHOD_LABELS,
    PREDICTED,
    stride_slider,
    target_arg,
    tolerance_arg,
    trust_md,
    window_stride,
)
from .markup import esc

BASELINE_INFO = "what the text is compared against"
TARGET_LABEL, TAGGER_TARGET_LABEL = "Target class", "Target (an entity, or a word's tag)"
EXPLAIN_LABEL, TAGGER_EXPLAIN_LABEL = "Explain again with these settings", "Explain this target"
TAGGER_NOTE = (
    "**A token classifier (a tagger)** labels every word-piece, so this tab explains one entity at a time (as a "
    "whole) or one word's tag: pick it in **Target** and press **Explain this target**. The score is Integrated "
    "Gradients on the word vectors of F = the sum, over the entity's word-pieces, of the log-probability of its label "
    "there (B- at the first piece, I- after): the log-probability that these pieces are that entity. Not offered for "
    "a tagger: comparing methods and their faithfulness, the whole-document explanation (both read one class of the "
    "whole text), the [CLS] path and lens (a tagger reads every token, not [CLS]), and the downloads.")


def build() -> SimpleNamespace:
    with gr.Row():
        # allow_custom_value: the page's events (page load, a link, a model change, Analyze) each set this box's
        # choices and value together, but one event can read it between another's two halves, and gradio would then
        # refuse that whole event (Analyze with it) on a value "not in the list of choices" (seen in a loaded CI run
        # with a tagger). The handlers check the value themselves: a class the model lacks is the predicted class,
        # a tagger's unknown target is refused naming what to choose (analysis.tag_target, tag_target_args).
        target = gr.Dropdown(choices=[PREDICTED], value=PREDICTED, label="Target class", allow_custom_value=True,
                             elem_id="bv-target")
        baseline = gr.Dropdown(choices=BASELINE_CHOICES, value="pad", label="Baseline", info=BASELINE_INFO,
                               elem_id="bv-baseline")
        n_steps = gr.Slider(2, 300, value=50, step=1, label="Integrated Gradients steps (n_steps)")
        auto = gr.Checkbox(value=True, label="Choose the steps automatically", elem_id="bv-auto-steps",
                           info=f"as few as it takes for a relative delta <= {DELTA_WARN:.0%}; "
                                "off: exactly n_steps")
        merge = gr.Checkbox(value=True, label="Merge word pieces into words", info="a word's pieces are summed")
    explain = gr.Button(EXPLAIN_LABEL, elem_id="bv-explain")
    # a tagger's line: what its target is and which of the tab's parts it has not (hidden for a classifier)
    tagger_note = gr.Markdown(TAGGER_NOTE, visible=False, elem_id="bv-attr-tagger")
    status = gr.Markdown(elem_id="bv-attr-status")  # why Explain again was refused, under its button
    delta = gr.Markdown(elem_id="bv-delta")
    tokens = gr.HTML(label="Tokens coloured by attribution", elem_id="bv-attr-tokens")
    with gr.Row():
        html_file = gr.DownloadButton("Download as HTML", interactive=False, size="sm", elem_id="bv-download-html")
        json_file = gr.DownloadButton("Download as JSON", interactive=False, size="sm", elem_id="bv-download-json")
        svg_file = gr.DownloadButton("Download as SVG", interactive=False, size="sm", elem_id="bv-download-svg")
        png_file = gr.DownloadButton("Download as PNG", interactive=False, size="sm", elem_id="bv-download-png")
    gr.Markdown("The HTML file is one standalone page (coloured words, every number; opens offline). The SVG "
                "(vector, text stays text) and PNG files are the coloured words as a figure for a paper; each chart "
                "has its own SVG and PNG buttons under it.", elem_classes=["bv-note"])
    bar = figures.plot(label="Attribution by token", elem_id="bv-attr-bar")
    with gr.Row() as cls_row:
        path = figures.plot(label="[CLS] path", elem_id="bv-cls-path")
        lens = figures.plot(label="[CLS] lens", elem_id="bv-cls-lens")
    cls_note = gr.Markdown(
        "**[CLS] path:** the same attribution taken at the output of the embeddings and of every layer: "
        "evidence starts on the word positions and ends up in [CLS], the only position the classifier reads. "
        f"({analysis.PATH_STEPS} steps per layer; the zero baseline is taken as [PAD] here.)  \n"
        "**[CLS] lens:** the class probabilities you would get by sending each layer's [CLS] state "
        "through the trained pooler and classifier; the last point is the model's prediction."
    )
    cmp = build_compare()
    doc = build_document()
    spans = reader.build_span_methods()
    return SimpleNamespace(target=target, baseline=baseline, n_steps=n_steps, auto=auto, merge=merge, explain=explain,
                           status=status, delta=delta, tokens=tokens, bar=bar, path=path, lens=lens,
                           html_file=html_file, json_file=json_file, svg_file=svg_file, png_file=png_file, cmp=cmp,
                           doc=doc, spans=spans, tagger_note=tagger_note, cls_row=cls_row, cls_note=cls_note)


# --------------------------------------------------------------------------- whole document (windows)
DOCUMENT_LABEL = "Explain the whole document (windows)"


def build_document() -> SimpleNamespace:
    """A text longer than the model reads, explained whole: predict's overlapping windows, each
    explained with the settings above, merged into one coloured view (``core.explain_windows``)."""
    with gr.Accordion("Whole document (windows)", open=False, elem_id="bv-doc-panel") as panel:
        gr.Markdown(
            "The view above explains the first tokens the model reads only. This explains **every token** of a longer "
            "text: it is read in the same overlapping windows as the prediction's *whole text* option, each window "
            "is explained alone (Integrated Gradients, the settings above) for the document's predicted class, and a "
            "token read by two windows gets the mean of their scores weighted by its distance from each window's "
            "edge. Each window's own prediction is listed.", elem_classes=["bv-note"])
        with gr.Row():
            stride = stride_slider("bv-doc-stride", scale=3)
            run = gr.Button(DOCUMENT_LABEL, elem_id="bv-doc-run", scale=1)
        status = gr.Markdown(elem_id="bv-doc-status")  # why explaining the document was refused, under its button
        reading = gr.Markdown(elem_id="bv-doc-reading")
        tokens = gr.HTML(elem_id="bv-doc-tokens")
        table = gr.Dataframe(value=pd.DataFrame(columns=DOCUMENT_COLUMNS), label="Each window's prediction",
                             interactive=False, wrap=True, elem_id="bv-doc-windows", elem_classes=["bv-table"])
        with gr.Row():
            html_file = gr.DownloadButton("Download as HTML", interactive=False, size="sm", elem_id="bv-doc-html")
            json_file = gr.DownloadButton("Download as JSON", interactive=False, size="sm", elem_id="bv-doc-json")
    return SimpleNamespace(stride=stride, run=run, status=status, reading=reading, tokens=tokens, table=table,
                           html_file=html_file, json_file=json_file, panel=panel)


DOCUMENT_COLUMNS = ["window", "document tokens", "prediction", "probabilities", "f(x) − f(baseline)",
                    "relative delta"]


def check_classifier(rec, what: str) -> None:
    """InputError unless ``rec`` is a classifier's analysed text: ``what`` reads one class of the whole text."""
    if rec is None:
        raise core.InputError("Press Analyze first: there is no text to explain yet.")
    if isinstance(rec, analysis.TagRecord):
        raise core.InputError(f"{what} reads a sequence classifier's class of the whole text; a tagger's entities "
                              "are explained one at a time by the Target and Explain controls above.")
    if isinstance(rec, analysis.AnswerRecord):
        raise core.InputError(f"{what} reads a sequence classifier's class of the whole text; a question answering "
                              "model's answer is explained by the Target and Explain controls above.")


def explain_document(rec: analysis.Record | None, target: str, baseline: str, n_steps: int, auto: bool, stride,
                     settings: core.Settings):
    """``core.explain_windows`` on the analysed text with the tab's settings."""
    check_classifier(rec, "The whole-document explanation")
    lm = model_loading.load(rec.model, rec.model, settings)
    info = rec.prediction
    return core.explain_windows(lm, info.text, target=target_arg(target), baseline=baseline, pair=info.pair,
                                stride=window_stride(lm, stride), n_steps=int(n_steps),
                                tolerance=tolerance_arg(bool(auto)))


def render_document(ui: SimpleNamespace, d, rec: analysis.Record, merge: bool) -> dict:
    """One coloured view of the whole text, the windows' predictions, the two download buttons."""
    doc = ui.doc
    a, p = d.attribution, d.prediction
    rows = [[w.index, f"{w.token_span[0]}–{w.token_span[1] - 1}", w.label,
             ", ".join(f"{k} {v:.3f}" for k, v in zip(w.labels, w.probs)),
             round(w.attribution.f_x - w.attribution.f_baseline, 4), f"{w.attribution.relative_delta:.1%}"]
            for w in d.windows]
    probs = ", ".join(f"{esc(k)} {v:.3f}" for k, v in p.scores.items())
    if rec.calibration is not None:  # the windows' probabilities are the model's own softmax, not the Predict tab's
        probs = "raw probabilities: " + probs
    reading = (f"**{len(d.windows)} window{'s' if len(d.windows) > 1 else ''}**, {len(a.tokens)} tokens; the document "
               f"reads as **{esc(p.label)}** ({probs}); explaining **{esc(a.target)}**. "
               "Each window's scores add up to its own change (up to its "
               f"delta; worst window {a.relative_delta:.1%}); the merged scores sum to {d.scores_sum:+.4f}, which is "
               "not the change of any one input.")
    page, data = core.export_files(export_folder(), a, p, rec.model, merge=bool(merge), keep_s=EXPORT_KEEP_S,
                                   min_change=rec.min_change, windows=d.window_dicts())
    return {
        doc.status: "",
        doc.reading: reading,
        doc.tokens: core.attribution_tokens_html(a, bool(merge), title=f"The whole document: attribution to "
                                                 f"“{a.target}”", min_change=rec.min_change),
        doc.table: pd.DataFrame(rows, columns=DOCUMENT_COLUMNS),
        doc.html_file: gr.update(value=visitor.own_file(page), interactive=True),
        doc.json_file: gr.update(value=visitor.own_file(data), interactive=True),
    }


# --------------------------------------------------------------------------- methods side by side
label = core.method_label


COMPARE_LABEL = "Compare methods"


def build_compare() -> SimpleNamespace:
    with gr.Accordion("Compare attribution methods on this text", open=True, elem_id="bv-compare-panel") as panel:
        gr.Markdown(
            "Every method explains the same class with the same baseline (the settings above). **Cost**: wall time "
            "and model passes. **Faithfulness** (ERASER, DeYoung et al. 2020), averaged over removing or keeping "
            "its top 10–50% of tokens: *comprehensiveness* = how much the probability drops when the top tokens "
            "are removed (higher = more faithful); *sufficiency* = how much it drops when only they are kept "
            "(lower = more faithful). **Agreement**: Spearman rank correlation and top-k overlap of the token "
            "rankings (by magnitude), and Spearman with attention rollout's [CLS] row at the last layer. Per-word "
            "methods cost one forward pass per word (occlusion) or per sample (KernelSHAP, LIME). The "
            "context-mixing measures (raw attention, attention-norm, value zeroing, ALTI; not ticked by default) "
            "rank tokens by how much the last layer's [CLS] takes from each: tick them to see which view of "
            "attention tracks what the model uses; they are shares, not parts of the output, so no completeness "
            "(delta) applies to them.",
            elem_classes=["bv-note"])
        with gr.Row():
            # every registered method can be ticked; the six attribution methods are, at first
            methods = gr.CheckboxGroup(choices=[(v, k) for k, v in METHOD_LABELS.items()], value=list(core.METHODS),
                                       label="Methods", elem_id="bv-compare-methods", scale=4)
            top_k = gr.Slider(1, 10, value=3, step=1, label="k for the top-k overlap", scale=1)
        run = gr.Button(COMPARE_LABEL, elem_id="bv-compare")
        # why a comparison was refused: outside the results' column, which stays hidden until results arrive
        status = gr.Markdown(elem_id="bv-compare-status")
        with gr.Column(visible=False) as shown:
            reading = gr.Markdown(elem_id="bv-compare-reading")
            # its real column headers from the start (an empty gradio table shows "1 2 3")
            table = gr.Dataframe(value=pd.DataFrame(columns=compare_columns(label(next(iter(METHOD_LABELS))), 3)),
                                 label="Cost, faithfulness and agreement", interactive=False, wrap=True,
                                 elem_id="bv-compare-table", elem_classes=["bv-table"])
            tokens = gr.HTML(label="Each method's tokens", elem_id="bv-compare-tokens")
            with gr.Row():
                heat = figures.plot(label="Methods side by side", elem_id="bv-compare-heatmap")
                agree = figures.plot(label="Rank agreement", elem_id="bv-compare-agreement")
    return SimpleNamespace(methods=methods, top_k=top_k, run=run, status=status, shown=shown, reading=reading,
                           table=table, panel=panel,
                           tokens=tokens, heat=heat, agree=agree, state=gr.State(None, time_to_live=3600))


def compare_columns(first: str, top_k: int) -> list[str]:
    """The comparison table's headers; ``first``: the first method's name, the one others are compared with."""
    return ["method", "seconds", "forward passes", "backward passes", "comprehensiveness ↑", "sufficiency ↓",
            f"Spearman vs {first}", f"top-{top_k} overlap vs {first}", "Spearman vs rollout"]


def compare_table(c: core.MethodComparison) -> pd.DataFrame:
    """One row per method: cost, AOPC comprehensiveness/sufficiency, agreement with the first
    method and with attention rollout."""
    first = label(c.methods[0])
    columns = compare_columns(first, c.top_k)
    best = c.most_faithful_methods
    star = {m: " ★" if len(best) == 1 else " ★ (tied)" for m in best}
    rows = []
    for i, (m, a, f) in enumerate(zip(c.methods, c.attributions, c.faithfulness)):
        rows.append([
            label(m) + star.get(m, ""),
            # a result the model's cache already held (e.g. the Integrated Gradients shown above) cost nothing now
            f"{a.seconds:.3f}" if a.seconds >= 5e-4 else "cached",
            a.n_forward,
            a.n_backward,
            round(f.comprehensiveness, 4),
            round(f.sufficiency, 4),
            round(float(c.spearman[0, i]), 3),
            round(float(c.top_k_overlap[0, i]), 3),
            round(float(c.rollout_spearman[i]), 3),
        ])
    return pd.DataFrame(rows, columns=columns)


def compare_md(c: core.MethodComparison, raw: bool = False) -> str:
    """``raw``: the Predict tab shows temperature-scaled probabilities, so p is named the raw one."""
    a = c.attributions[0]
    text = a.info.text if len(a.info.text) <= 120 else a.info.text[:119] + "…"
    p = "the model's raw p" if raw else "p"
    return (f"**Explaining “{esc(a.target)}”** ({p} = {c.faithfulness[0].p_x:.4f}) "
            f"for “{esc(text)}”, "
            f"baseline {esc(a.baseline)}.  \n**Reading:** {esc(c.reading)} (★ in the table).  \n"
            f"Agreement is over the {int(sum(s is not None for s in a.info.sequence_ids))} non-special tokens.")


def render_compare(ui: SimpleNamespace, c: core.MethodComparison | None, merge: bool,
                   min_change: float = core.Settings.min_change, raw: bool = False) -> dict:
    """``raw``: the analysed record's prediction is temperature-scaled (``compare_md``)."""
    cmp = ui.cmp
    if c is None:
        return {cmp.shown: gr.update(visible=False)}
    units = [core.attribution_units(a, bool(merge)) for a in c.attributions]
    labels_, _, special = units[0]
    keep = ~np.asarray(special, dtype=bool)
    if not keep.any():
        keep[:] = True
    words = [w for w, k in zip(labels_, keep) if k]
    scores = np.stack([np.asarray(u[1], dtype=np.float64)[keep] for u in units])  # (M, N)
    names = [label(m) for m in c.methods]
    agree = np.ones((len(names) + 1, len(names) + 1))  # the methods and attention rollout
    agree[:-1, :-1] = c.spearman
    agree[-1, :-1] = agree[:-1, -1] = c.rollout_spearman
    lines = []
    for m, a, f in zip(c.methods, c.attributions, c.faithfulness):
        title = f"{label(m)}: comprehensiveness {f.comprehensiveness:+.3f}, sufficiency {f.sufficiency:+.3f}"
        lines.append(core.attribution_tokens_html(a, bool(merge), title=title, min_change=min_change))
    return {
        cmp.shown: gr.update(visible=True),
        cmp.reading: compare_md(c, raw),
        cmp.table: compare_table(c),
        cmp.tokens: "".join(lines),
        cmp.heat: plots.methods_heatmap(scores, names, words, title=f"Attribution to “{c.attributions[0].target}”, "
                                        "each method scaled to its own largest |score|" + unsigned_note(c.methods)),
        cmp.agree: plots.agreement_heatmap(agree, [*names, "attention rollout"],
                                           title="Rank agreement between methods (Spearman, |scores|)"),
    }


def unsigned_note(methods) -> str:
    """The heatmap's caveat for methods whose scores are magnitudes (drawn on the signed scale)."""
    unsigned = [label(m) for m in methods if not core.is_signed(m)]
    return f" ({', '.join(unsigned)}: a magnitude, no direction)" if unsigned else ""


def compare(rec: analysis.Record | None, methods, target: str, baseline: str, n_steps: int, auto: bool,
            top_k: int, settings: core.Settings) -> core.MethodComparison:
    """``core.compare_methods`` on the analysed text with the tab's settings (the same target,
    baseline and step rule as the Integrated Gradients above)."""
    check_classifier(rec, "Comparing methods")
    methods = [m for m in (methods or []) if m]
    if not methods:
        raise core.InputError("Tick at least one method to compare.")
    # the record's model (server-side state) was allowed when it was analysed
    lm = model_loading.load(rec.model, rec.model, settings)
    info = rec.prediction
    return core.compare_methods(lm, info.text, methods=methods, target=target_arg(target), baseline=baseline,
                                pair=info.pair, top_k=int(top_k), n_steps=int(n_steps),
                                tolerance=tolerance_arg(bool(auto)))


def jump_md(attr: core.Attribution) -> str:
    return (f"  \n**Note on the baseline:** this model's first layer sees LayerNorm(word vector) alone and the "
            f"{esc(attr.baseline)} baseline's word vectors are zero, so the straight path from it jumps at its "
            "first point (LayerNorm ignores scale): the steps go into that jump rather than the words. Choose the "
            "[MASK] tokens baseline for a smooth path.")


def faith_md(f: core.Faithfulness | None) -> str:
    """The shown explanation's ERASER faithfulness, with its plain reading."""
    if f is None:
        return ""
    ks = ", ".join(str(k) for k in f.ks)
    return (f"  \n**Faithfulness** (ERASER AOPC over the top {ks}% of tokens): comprehensiveness "
            f"**{f.comprehensiveness:+.3f}** (probability lost when they are removed; higher is more faithful), "
            f"sufficiency **{f.sufficiency:+.3f}** (lost when only they are kept; lower is more faithful). "
            f"{esc(f.reading[:1].upper() + f.reading[1:])}.")


def delta_md(attr, min_change: float = core.Settings.min_change, raw: bool = False) -> str:
    """``raw``: the Predict tab shows temperature-scaled probabilities, so a probability here is named the
    model's raw one (the attributions explain the model's own softmax)."""
    rel = attr.relative_delta
    gap = attr.f_x - attr.f_baseline
    what = ("model's raw probability" if raw else "probability") if attr.output == "prob" else "logit"
    head = (f"**Target:** {esc(attr.target)} · **baseline:** {esc(attr.baseline)} · "
            f"**n_steps:** {attr.n_steps}  \n"
            f"The attributions add up to the change in the {what} of “{esc(attr.target)}” from the baseline "
            f"to the text ({attr.f_baseline:.4f} → {attr.f_x:.4f}, a change of {gap:+.4f}), up to the "
            f"**convergence delta {attr.delta:+.2e}**")
    if not np.isfinite(rel):
        return head + (".  \n**Warning:** the text and the baseline give the same output, so the attributions "
                       "cannot be checked.")
    head += f" ({rel:.1%} of the change)."
    scale = core.colour_scale(attr, min_change)
    if scale.too_small:  # the tokens below carry the full warning, which says what their colours show
        head += (f"  \n**Warning: the change is too small to read anything into** (below {scale.threshold:g}); "
                 "the warning over the coloured words below says what their colours show.")
    if rel > DELTA_WARN:
        return head + (f"  \n**Warning: take these attributions with caution.** The integral was approximated with too "
                       f"few steps ({rel:.0%} error, above {DELTA_WARN:.0%}). Raise n_steps and explain again.")
    return head + "  \n**Converged:** the approximation is good: the scores account for the whole change."


def calibration_md(rec: analysis.Record, attr: core.Attribution | None = None) -> str:
    """For a temperature-scaled prediction: this tab reads the model's raw probabilities, so its numbers
    and the Predict tab's differ; says both for the target. "" for an uncalibrated model."""
    c = rec.calibration
    if c is None:
        return ""
    line = (f"  \n**Raw probabilities on this tab:** the attributions, faithfulness and the [CLS] lens read the "
            f"model's own softmax; the Predict tab shows them temperature-scaled (T = {c.temperature:.3g}, "
            "calibration.json)")
    target = attr.target if attr is not None else None
    scores = dict(zip(rec.labels, c.raw_probs))
    if target in scores and target in rec.prediction.scores:
        line += (f": \u201c{esc(target)}\u201d has raw probability {scores[target]:.4f} here, "
                 f"{rec.prediction.scores[target]:.4f} temperature-scaled there")
    return line + "."


def controls(ui: SimpleNamespace, rec: analysis.Record, target: str) -> dict:
    choices = [PREDICTED, *rec.labels]
    return {ui.target: gr.update(choices=choices, value=target if target in choices else PREDICTED,
                                 label=TARGET_LABEL, info="")}


# --------------------------------------------------------------------------- a tagger (token classifier)
def is_tagger(lm: core.LoadedModel) -> bool:
    return lm.head.reads == "every"


NO_TEXT, CHOOSE_WORD = "(analyze a text to list its entities)", "(this text has no entities: choose a word)"


def tag_target_update(rec, target) -> dict:
    """The target control for a tagger: the entities and words of its analysed text (``analysis.tag_choices``),
    ``target`` kept where offered, else the first entity (``analysis.tag_target``); before a text is analysed, or for
    a text without entities, a placeholder ("") that explains nothing until a word is chosen."""
    if not isinstance(rec, analysis.TagRecord):
        return gr.update(choices=[(NO_TEXT, "")], value="", label=TAGGER_TARGET_LABEL,
                         info="Analyze a text to list its entities")
    t = rec.tagging
    if t.entities:
        return gr.update(choices=analysis.tag_choices(t), value=analysis.tag_target(t, target),
                         label=TAGGER_TARGET_LABEL, info="an entity is explained as a whole; a word's tag at its first "
                                                          "piece")
    # a value among the choices always (the page sends the value it shows, which must be one of them): a placeholder
    choices = [(CHOOSE_WORD, ""), *analysis.tag_choices(t)]
    return gr.update(choices=choices, value=target if target in {v for _, v in choices} else "",
                     label=TAGGER_TARGET_LABEL, info="this text has no entities: choose a word to see why it is "
                                                     "tagged as it is")


def mode_outputs(ui: SimpleNamespace) -> list:
    """What ``mode_for`` sets: the parts of the tab a tagger has not, and its own line."""
    return [ui.tagger_note, ui.explain, ui.cls_row, ui.cls_note, ui.cmp.panel, ui.doc.panel, ui.spans.panel]


def is_answerer(lm: core.LoadedModel) -> bool:
    return lm.head.reads == "span"  # question answering: start and end over the context


def mode_for(ui: SimpleNamespace, lm: core.LoadedModel) -> dict:
    """The tab's parts for ``lm``'s head: for a tagger (or a question answering model) its line shown
    (``TAGGER_NOTE``, ``ANSWER_NOTE``: what it explains and why the rest is not offered), and the classifier's parts
    hidden (the [CLS] path and lens, comparing methods, the whole document: each reads one class of the whole text);
    for a classifier everything as it was. A question answering model's own panel (other methods for its target)
    is shown for it alone."""
    answerer = is_answerer(lm)
    tagger = is_tagger(lm) or answerer
    return {ui.tagger_note: gr.update(visible=tagger, value=reader.ANSWER_NOTE if answerer else TAGGER_NOTE),
            ui.explain: gr.update(value=TAGGER_EXPLAIN_LABEL if tagger else EXPLAIN_LABEL),
            ui.cls_row: gr.update(visible=not tagger), ui.cls_note: gr.update(visible=not tagger),
            ui.cmp.panel: gr.update(visible=not tagger), ui.doc.panel: gr.update(visible=not tagger),
            ui.spans.panel: gr.update(visible=answerer)}


NO_ENTITIES = ("**This text has no entities** (every word is tagged O): there is no entity to explain. Choose a word "
               "in **Target** to see why it is tagged as it is, and press **Explain this target**.")
TAG_IG_FAILED = ("**Integrated Gradients did not finish** for this target (the message says why); the tags and the "
                 "attention are complete. Press **Explain this target** to try again.")


def tag_pending_md(rec: analysis.TagRecord, skipped: bool) -> str:
    """The tab's line while a tagger's text has no explanation yet."""
    if rec.ig_failed:
        return TAG_IG_FAILED
    if rec.target is None and not rec.tagging.entities:
        return NO_ENTITIES
    if skipped:
        return ("**Integrated Gradients skipped** (\u201cSkip Integrated Gradients\u201d is on). Choose a target and "
                "press **Explain this target**.")
    return "**Integrated Gradients are being computed\u2026** the tags and attention are ready."


def target_name(a) -> str:
    """What an entity explanation's scores push towards: "joy · PER", or "O at “film”" for a word's tag."""
    tg = a.target
    return f"{tg.text} · {tg.label}" if tg.kind == "entity" else f"{tg.label} at “{tg.text}”"


def entity_md(rec: analysis.TagRecord, min_change: float) -> str:
    """What a tagger's explanation explains, in words, and the numbers that say how far to trust it: F(x),
    F(baseline), their change, the convergence delta (absolute and as a share of the change) and the steps."""
    a = rec.explained
    tg = a.target
    t = rec.tagging
    if tg.kind == "entity":
        first, last = analysis.entity_words(t, tg.entity)
        labels = " then ".join(dict.fromkeys(tg.piece_labels))
        n = len(tg.piece_labels)
        f_is = (f"log p({esc(labels)}) at its one word-piece" if n == 1 else
                f"the sum over its {n} word-pieces of log p(label) ({esc(labels)})")
        what = (f"**Explaining the entity “{esc(tg.text)}” · {esc(tg.label)}** (words {first}-{last}) as a whole: "
                f"F = {f_is}, the log-probability that the model tags this span as this one entity.")
    else:
        kind, _, k = str(rec.target or "").partition(":")
        where = f" (word {int(k) + 1})" if kind == "word" and k.isdigit() else ""
        what = (f"**Explaining why “{esc(tg.text)}”{where} is tagged {esc(tg.label)}**: F = log p({esc(tg.label)}) "
                "at its first word-piece, the one the word is tagged by.")
    gap = a.f_x - a.f_baseline
    base = dict((v, k) for k, v in BASELINE_CHOICES).get(a.baseline, a.baseline)
    line = (f"{what} Each word's score is its share of the change F(x) \u2212 F(baseline); the scores add up to it "
            f"up to the convergence delta.  \n"
            f"**F(x)** = {a.f_x:.6g} (p = {np.exp(a.f_x):.4g}) · **F(baseline)** = {a.f_baseline:.6g} "
            f"({esc(base)}) · change **{gap:+.6g}** · **convergence delta** {a.delta:+.3e}")
    return line + trust_md(a, min_change)


def render_tagged(ui: SimpleNamespace, rec: analysis.TagRecord, merge: bool, skipped: bool = False) -> dict:
    """A tagger's explanation drawn with the classifier's views: its words (or word-pieces) coloured on the absolute
    scale of F(x) - F(baseline), the bar by word, and the line saying what it explains and how far to trust it.
    No [CLS] path or lens (their row is hidden for a tagger: ``mode_for``)."""
    no_cls = plots.empty_figure("A tagger has no [CLS] path or lens: it reads every token, not [CLS].")
    a = rec.explained
    if a is None:
        return {ui.delta: tag_pending_md(rec, skipped), ui.tokens: "", ui.bar: plots.empty_figure(), ui.path: no_cls,
                ui.lens: no_cls}
    if merge:
        labels, scores = [w.word for w in a.words], np.array([w.score for w in a.words], dtype=np.float64)
    else:
        labels, scores = list(a.tokens), np.asarray(a.scores, dtype=np.float64)
    special = np.zeros(len(labels), dtype=bool)  # the record leaves special tokens out
    name = target_name(a)
    scale = core.colour_scale(a, rec.min_change, output="log-probability")
    unit = "word" if merge else "word-piece"
    warning = core.change_warning(SimpleNamespace(target=name, scores=scores), scale, scores)
    return {
        ui.delta: entity_md(rec, rec.min_change),
        ui.tokens: core.tokens_html(labels, scores, special, name, scale, f"Each {unit}'s share of F for “{name}”",
                                    warning),
        ui.bar: plots.attribution_bar(labels, scores, title=f"Attribution to “{name}” by {unit}",
                                      full=scale.full if scale.absolute else None,
                                      note="The change is too small to read anything into." if scale.too_small else ""),
        ui.path: no_cls,
        ui.lens: no_cls,
    }


# --------------------------------------------------------------------------- what the model can be asked
def baseline_options(lm: core.LoadedModel) -> tuple[list[tuple[str, str]], str]:
    """(choices, note) of the Baseline control for ``lm``: the baselines its tokenizer can build
    (``core.usable_baselines``; Integrated Gradients refuse the others); the note names those left out."""
    usable = core.usable_baselines(lm)
    choices = [(name, value) for name, value in BASELINE_CHOICES if value in usable]
    if not choices:  # a tokenizer with none of [PAD], [MASK], [UNK]: nothing to offer, the explanation says why
        return list(BASELINE_CHOICES), BASELINE_INFO
    left = [name for name, value in BASELINE_CHOICES if value not in usable]
    if not left:
        return choices, BASELINE_INFO
    return choices, f"{BASELINE_INFO}; not offered: {', '.join(left)} (this model's tokenizer has no such token)"


def method_options(lm: core.LoadedModel) -> tuple[list[tuple[str, str]], str]:
    """(choices, note) of Compare methods' boxes for ``lm``: every method but the context-mixing measures its
    family cannot decompose (``core.supported_measures``; the comparison refuses them); the note names those."""
    works = set(core.supported_measures(lm))
    left = [k for k in METHOD_LABELS if k in core.MIXING_METHODS and k not in works]
    choices = [(v, k) for k, v in METHOD_LABELS.items() if k not in left]
    if not left:
        return choices, ""
    kind = getattr(getattr(lm.model, "config", None), "model_type", None) or "this"
    return choices, (f"Not offered: {', '.join(METHOD_LABELS[k] for k in left)} (they need the layers' value, output "
                     f"projection and LayerNorm, which this tool cannot locate in this {kind} model).")


def choices_for(ui: SimpleNamespace, lm: core.LoadedModel, target, baseline, methods, rec=None) -> dict:
    """The tab's choices for ``lm``, the model whose text the tab explains: its classes as targets, the
    baselines its tokenizer builds, the methods it can run; each value kept where it is still offered, else
    the predicted class, the model's recommended baseline, the offered ticks. A tagger's targets are the entities
    and words of its analysed text (``rec``, a ``TagRecord``; none before one: ``tag_target_update``)."""
    targets = [PREDICTED, *lm.labels]
    b_choices, b_note = baseline_options(lm)
    b_values = [v for _, v in b_choices]
    if baseline not in b_values:
        baseline = core.recommended_baseline(lm)
        baseline = baseline if baseline in b_values else b_values[0]
    m_choices, m_note = method_options(lm)
    offered = {v for _, v in m_choices}
    if is_tagger(lm):
        target_update = tag_target_update(rec, target)
    elif is_answerer(lm):
        target_update = reader.answer_target_update(rec, target)
    else:
        target_update = gr.update(choices=targets, value=target if target in targets else PREDICTED,
                                  label=TARGET_LABEL, info="")
    return {ui.target: target_update,
            ui.baseline: gr.update(choices=b_choices, value=baseline, info=b_note),
            ui.cmp.methods: gr.update(choices=m_choices, value=[m for m in (methods or []) if m in offered],
                                      info=m_note or None)}


IG_FAILED = ("**Integrated Gradients did not finish** for this text (the message says why); the prediction and "
             "attention above are complete. Press **Explain again with these settings** to try again.")


def pending_md(skipped: bool) -> str:
    if skipped:
        return ("**Integrated Gradients skipped** (\u201cSkip Integrated Gradients\u201d is on). Press "
                "**Explain again with these settings** to compute them for this text.")
    return "**Integrated Gradients are being computed\u2026** the prediction and attention are ready above."


def render(ui: SimpleNamespace, rec: analysis.Record, merge: bool, skipped: bool = False) -> dict:
    if rec is None:
        empty = plots.empty_figure()
        return {ui.delta: "", ui.tokens: "", ui.bar: empty, ui.path: empty, ui.lens: empty}
    if isinstance(rec, analysis.TagRecord):
        return render_tagged(ui, rec, merge, skipped)
    if isinstance(rec, analysis.AnswerRecord):
        return reader.render_answered(ui, rec, merge, skipped)
    lens = plots.cls_lens_chart(rec.lens.layer_names, rec.lens.labels, rec.lens.probs)
    attr = rec.attribution
    if attr is None:  # Analyze shows everything else first; IG follows (or was skipped, or failed)
        empty = plots.empty_figure()
        return {ui.delta: (IG_FAILED if rec.ig_failed else pending_md(skipped)) + calibration_md(rec), ui.tokens: "",
                ui.bar: empty,
                ui.path: empty, ui.lens: lens}
    view = token_views.token_view(attr.info, merge)
    scores = token_views.view_scores(attr.scores, view)  # (N,)
    path_scores = token_views.view_scores(rec.path.scores, view)  # (L + 1, N)
    scale = core.colour_scale(attr, rec.min_change)  # one absolute scale for the tokens and the bars...
    # ...and its layer-wise twin (each row sums to the same change)
    path_scale = core.colour_scale(rec.path, rec.min_change)
    return {
        ui.delta: (delta_md(attr, rec.min_change, raw=rec.calibration is not None) + faith_md(rec.faith)
                   + (jump_md(attr) if rec.baseline_jumps else "") + calibration_md(rec, attr)),
        ui.tokens: token_views.tokens_html(view.labels, scores, view.special, attr, min_change=rec.min_change),
        ui.bar: plots.attribution_bar(view.labels, scores, title=f"Attribution to “{attr.target}” by token",
                                      full=scale.full if scale.absolute else None,
                                      note="The change is too small to read anything into." if scale.too_small else ""),
        ui.path: plots.cls_path_heatmap(path_scores, rec.path.layer_names, view.labels,
                                        title=f"[CLS] path: attribution to “{rec.path.target}” by depth",
                                        bound=path_scale.full if path_scale.absolute else None),
        ui.lens: lens,
    }


# --------------------------------------------------------------------------- downloads
EXPORT_KEEP_S = 3600  # exported files older than an hour are deleted at the next export


def export_folder() -> Path:
    return Path(tempfile.gettempdir()) / "bertviz-exports"  # gradio serves files from the temp folder


def export_files(rec: analysis.Record | None, merge: bool):
    """The four download buttons: the explanation's HTML and JSON files (``core.export_files``) and
    the coloured words as SVG and PNG (``core.figure_files``), or disabled buttons while there is no
    attribution."""
    if not isinstance(rec, analysis.Record) or rec.attribution is None:  # no file for a tagger's or an answer's yet
        off = gr.update(value=None, interactive=False)
        return off, off, off, off
    page, data = core.export_files(export_folder(), rec.attribution, rec.prediction, rec.model, merge=bool(merge),
                                   keep_s=EXPORT_KEEP_S, faith=rec.faith, min_change=rec.min_change)
    svg, png = core.figure_files(export_folder(), rec.attribution, merge=bool(merge), min_change=rec.min_change)
    # public mode: the visitor's texts, served to this visitor's browser only (visitor.own_file)
    return tuple(gr.update(value=visitor.own_file(f), interactive=True) for f in (page, data, svg, png))


def wire(ui: SimpleNamespace, state: gr.State, heavy: dict, settings: core.Settings) -> None:
    """Refresh the download buttons whenever the analysis (``state``) or the word/token view changes;
    compare the methods on request (``heavy``: the app's one-at-a-time model group; ``settings``: the app's).
    A refused whole-document explanation or comparison is said in its own status line, under its button, and
    stays there (no toast that vanishes, no "Error" badge on the results)."""
    gr.on([state.change, ui.merge.input], guards.guard(export_files), inputs=[state, ui.merge],
          outputs=[ui.html_file, ui.json_file, ui.svg_file, ui.png_file], api_visibility="private",
          show_progress="hidden", trigger_mode="always_last")
    cmp = ui.cmp
    views = {cmp.shown, cmp.reading, cmp.table, cmp.tokens, cmp.heat, cmp.agree}
    doc = ui.doc

    def run_document(rec, target, baseline, n_steps, auto, stride, merge):
        return render_document(ui, explain_document(rec, target, baseline, n_steps, auto, stride, settings), rec, merge)

    doc.run.click(guards.to_status(run_document, doc.status),
                  inputs=[state, ui.target, ui.baseline, ui.n_steps, ui.auto, doc.stride, ui.merge],
                  outputs=[doc.status, doc.reading, doc.tokens, doc.table, doc.html_file, doc.json_file],
                  api_visibility="private", **heavy)

    # The results sit in a column hidden until they arrive, so gradio's progress on them cannot be
    # seen: the button itself says that the comparison runs, and for how long so far.
    def comparing(seconds: float | None = None) -> dict:
        so_far = "" if seconds is None else f" {round(seconds):d} s so far"
        return {cmp.run: gr.update(value=f"Comparing methods\u2026{so_far}", interactive=False)}

    def compare_idle() -> dict:
        return {cmp.run: gr.update(value=COMPARE_LABEL, interactive=True)}

    def run_compare(rec, methods, target, baseline, n_steps, auto, top_k, merge):
        t0 = time.monotonic()
        c = yield from streaming.stream_work(
            lambda: compare(rec, methods, target, baseline, n_steps, auto, top_k, settings),
            lambda: comparing(time.monotonic() - t0))
        yield {cmp.state: c, cmp.status: "",
               **render_compare(ui, c, merge, rec.min_change, rec.calibration is not None), **compare_idle()}

    sp = ui.spans

    def run_span_method(rec, target, method, n_samples, seed, side, baseline, n_steps, auto, merge):
        a, f = reader.explain_span_method(rec, target, method, n_samples, seed, side, baseline, n_steps, auto, settings)
        return reader.render_span_method(ui, a, f, side, merge, rec.min_change)

    sp.run.click(guards.to_status(run_span_method, sp.status),
                 inputs=[state, ui.target, sp.method, sp.n_samples, sp.seed, sp.side, ui.baseline, ui.n_steps, ui.auto,
                         ui.merge],
                 outputs=[sp.status, sp.reading, sp.tokens, sp.bar], api_visibility="private", **heavy)

    quick = dict(queue=False, api_visibility="private", show_progress="hidden")
    cmp.run.click(comparing, outputs=[cmp.run], **quick).then(
        guards.to_status_stream(run_compare, cmp.status, also=compare_idle),
        inputs=[state, cmp.methods, ui.target, ui.baseline, ui.n_steps, ui.auto, cmp.top_k, ui.merge],
        outputs=views | {cmp.state, cmp.run, cmp.status}, api_visibility="private", show_progress="hidden", **heavy)
    ui.merge.input(guards.guard(lambda c, merge, rec: render_compare(
                       ui, c, merge, rec.min_change if rec else core.Settings.min_change,
                       rec is not None and rec.calibration is not None)),
                   inputs=[cmp.state, ui.merge, state],
                   outputs=views, api_visibility="private", show_progress="hidden", trigger_mode="always_last")
