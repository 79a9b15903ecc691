"""Attributions tab: Integrated Gradients per token (coloured text + bar chart), the
convergence delta with a plain-language verdict, the [CLS] path and the [CLS] lens."""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import numpy as np

import bertviz_app as core

from .. import plots
from . import common


def build() -> SimpleNamespace:
    with gr.Row():
        target = gr.Dropdown(choices=[common.PREDICTED], value=common.PREDICTED, label="Target class",
                             elem_id="bv-target")
        baseline = gr.Dropdown(choices=common.BASELINE_CHOICES, value="pad", label="Baseline",
                               info="what the text is compared against")
        n_steps = gr.Slider(2, 300, value=50, step=1, label="Integrated Gradients steps (n_steps)")
        auto = gr.Checkbox(value=True, label="Choose the steps automatically", elem_id="bv-auto-steps",
                           info=f"as few as it takes for a relative delta <= {common.DELTA_WARN:.0%}; off: exactly n_steps")
        merge = gr.Checkbox(value=True, label="Merge word pieces into words", info="a word's pieces are summed")
    explain = gr.Button("Explain again with these settings", elem_id="bv-explain")
    delta = gr.Markdown(elem_id="bv-delta")
    tokens = gr.HTML(label="Tokens coloured by attribution", elem_id="bv-attr-tokens")
    with gr.Row():
        html_file = gr.DownloadButton("Download as HTML", interactive=False, size="sm", elem_id="bv-download-html")
        json_file = gr.DownloadButton("Download as JSON", interactive=False, size="sm", elem_id="bv-download-json")
    gr.Markdown("The HTML file is one standalone page (coloured words, every number; opens offline). Each chart "
                "downloads as a PNG from the camera icon at its top right (shown when the pointer is over it).",
                elem_classes=["bv-note"])
    bar = gr.Plot(label="Attribution by token", elem_id="bv-attr-bar")
    with gr.Row():
        path = gr.Plot(label="[CLS] path", elem_id="bv-cls-path")
        lens = gr.Plot(label="[CLS] lens", elem_id="bv-cls-lens")
    gr.Markdown(
        "**[CLS] path:** the same attribution taken at the output of the embeddings and of every layer: "
        "evidence starts on the word positions and ends up in [CLS], the only position the classifier reads. "
        f"({common.PATH_STEPS} steps per layer; the zero baseline is taken as [PAD] here.)  \n"
        "**[CLS] lens:** the class probabilities you would get by sending each layer's [CLS] state "
        "through the trained pooler and classifier; the last point is the model's prediction."
    )
    return SimpleNamespace(target=target, baseline=baseline, n_steps=n_steps, auto=auto, merge=merge, explain=explain,
                           delta=delta, tokens=tokens, bar=bar, path=path, lens=lens, html_file=html_file,
                           json_file=json_file)


def delta_md(attr) -> str:
    rel = attr.relative_delta
    gap = attr.f_x - attr.f_baseline
    what = "probability" if attr.output == "prob" else "logit"
    head = (f"**Target:** {common.esc(attr.target)} · **baseline:** {common.esc(attr.baseline)} · "
            f"**n_steps:** {attr.n_steps}  \n"
            f"The attributions add up to the change in the {what} of “{common.esc(attr.target)}” from the baseline "
            f"to the text ({attr.f_baseline:.4f} → {attr.f_x:.4f}, a change of {gap:+.4f}), up to the "
            f"**convergence delta {attr.delta:+.2e}**")
    if not np.isfinite(rel):
        return head + ".  \n**Warning:** the text and the baseline give the same output, so the attributions cannot be checked."
    head += f" ({rel:.1%} of the change)."
    scale = core.colour_scale(attr)
    if scale.too_small:  # the tokens below carry the full warning
        head += (f"  \n**Warning: the change is too small to read anything into** (below {scale.threshold:g}); "
                 "the colours stay pale on purpose.")
    if rel > common.DELTA_WARN:
        return head + (f"  \n**Warning: take these attributions with caution.** The integral was approximated with too "
                       f"few steps ({rel:.0%} error, above {common.DELTA_WARN:.0%}). Raise n_steps and explain again.")
    return head + "  \n**Converged:** the approximation is good: the scores account for the whole change."


def controls(ui: SimpleNamespace, rec: common.Record, target: str) -> dict:
    choices = [common.PREDICTED, *rec.labels]
    return {ui.target: gr.update(choices=choices, value=target if target in choices else common.PREDICTED)}


def pending_md(skipped: bool) -> str:
    if skipped:
        return ("**Integrated Gradients skipped** (\u201cSkip Integrated Gradients\u201d is on). Press "
                "**Explain again with these settings** to compute them for this text.")
    return "**Integrated Gradients are being computed\u2026** the prediction and attention are ready above."


def render(ui: SimpleNamespace, rec: common.Record, merge: bool, skipped: bool = False) -> dict:
    if rec is None:
        empty = plots.empty_figure()
        return {ui.delta: "", ui.tokens: "", ui.bar: empty, ui.path: empty, ui.lens: empty}
    lens = plots.cls_lens_chart(rec.lens.layer_names, rec.lens.labels, rec.lens.probs)
    attr = rec.attribution
    if attr is None:  # Analyze shows everything else first; IG follows (or was skipped)
        empty = plots.empty_figure()
        return {ui.delta: pending_md(skipped), ui.tokens: "", ui.bar: empty, ui.path: empty, ui.lens: lens}
    view = common.token_view(attr.info, merge)
    scores = common.view_scores(attr.scores, view)  # (N,)
    path_scores = common.view_scores(rec.path.scores, view)  # (L + 1, N)
    scale = core.colour_scale(attr)  # one absolute scale for the tokens and the bars...
    path_scale = core.colour_scale(rec.path)  # ...and its layer-wise twin (each row sums to the same change)
    return {
        ui.delta: delta_md(attr),
        ui.tokens: common.tokens_html(view.labels, scores, view.special, attr),
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


def export_files(rec: common.Record | None, merge: bool):
    """The two download buttons: the explanation's HTML and JSON files (``core.export_files``),
    or disabled buttons while there is no attribution."""
    if rec is None or rec.attribution is None:
        off = gr.update(value=None, interactive=False)
        return off, off
    page, data = core.export_files(export_folder(), rec.attribution, rec.prediction, rec.model, merge=bool(merge),
                                   keep_s=EXPORT_KEEP_S)
    return gr.update(value=str(page), interactive=True), gr.update(value=str(data), interactive=True)


def wire(ui: SimpleNamespace, state: gr.State) -> None:
    """Refresh the download buttons whenever the analysis (``state``) or the word/token view changes."""
    gr.on([state.change, ui.merge.input], common.guard(export_files), inputs=[state, ui.merge],
          outputs=[ui.html_file, ui.json_file], api_visibility="private", show_progress="hidden",
          trigger_mode="always_last")
