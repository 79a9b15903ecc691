"""Predict tab: text (and optional second text), the Analyze button, class probabilities."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

import bertviz_app as core

from . import common, figures, plots

EXAMPLES = [
    ["A gorgeous, moving film: a joy from start to finish.", ""],
    ["The movie was a tedious slog, and the acting was awful.", ""],
    ["It's not a bad film, but it is not a great one either.", ""],
]


def build() -> SimpleNamespace:
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(label="Text", lines=4, placeholder="Type or paste a sentence to classify and explain…",
                              elem_id="bv-text")
            pair = gr.Textbox(label="Second text (optional, for sentence-pair models)", lines=2, elem_id="bv-pair")
            with gr.Row():
                analyze = gr.Button(IDLE_LABEL, variant="primary", elem_id="bv-analyze")
                skip_ig = gr.Checkbox(value=False, label="Skip Integrated Gradients", elem_id="bv-skip-ig",
                                      info="prediction and attention only (IG on a long text takes up to a minute)")
                window = gr.Checkbox(value=False, label="Classify a long text whole", elem_id="bv-window",
                                     info="past the model's length: overlapping windows, their logits averaged")
            # what a running Analyze is doing, right under the button that shows its progress and time left
            status = gr.Markdown(elem_id="bv-status")
            gr.Examples(EXAMPLES, inputs=[text, pair], label="Examples")
        with gr.Column(scale=2):
            model_info = gr.Markdown(elem_id="bv-model-info")
            warnings = gr.Markdown(elem_id="bv-warnings")
            notice = gr.Markdown(elem_id="bv-notice")
            label = gr.Label(label="Class probabilities", elem_id="bv-label")
    bar = figures.plot(label="Probabilities", elem_id="bv-prob-bar")
    tokens = gr.HTML(label="Which tokens drove the prediction (Integrated Gradients)", elem_id="bv-predict-tokens")
    return SimpleNamespace(text=text, pair=pair, analyze=analyze, status=status, skip_ig=skip_ig, window=window,
                           model_info=model_info, warnings=warnings, notice=notice, label=label, bar=bar, tokens=tokens)


IDLE_LABEL = "Analyze"


def busy(ui: SimpleNamespace, label: str, status: str) -> dict:
    """The Analyze button while an analysis runs: its progress as the label, not clickable."""
    return {ui.analyze: gr.update(value=label, interactive=False), ui.status: status}


def idle(ui: SimpleNamespace) -> dict:
    """The Analyze button back as it was, the status line empty."""
    return {ui.analyze: gr.update(value=IDLE_LABEL, interactive=True), ui.status: ""}


def cleared(ui: SimpleNamespace) -> dict:
    """Every Predict output that belongs to an analysed text, empty (the model's lines stay)."""
    return {ui.notice: "", ui.label: None, ui.bar: plots.empty_figure(), ui.tokens: ""}


def truncation_notice(rec: common.Record, max_length: int | None = None) -> str:
    p = rec.prediction
    charts = rec.maps.info  # attention and attributions read one window: the first max_length tokens
    if p.windows > 1:
        return (f"**Long text, classified whole:** the prediction pools {p.windows} overlapping windows of "
                f"{max_length or len(charts.tokens)} tokens (their logits averaged). The attention and attribution "
                f"charts show the first {len(charts.tokens)} tokens only.")
    if not p.truncated:
        return f"{p.n_tokens} tokens."
    limit = max_length or p.n_tokens
    return (f"**Warning: the text was truncated.** It is longer than this model reads ({limit} tokens), so only "
            f"the first {p.n_tokens} tokens were used for the prediction and every chart. Tick **Classify a long "
            f"text whole** to classify all of it (the /predict API: window=true).")


def render(ui: SimpleNamespace, rec: common.Record, lm=None) -> dict:
    p = rec.prediction
    out = {
        ui.model_info: common.model_line(lm) if lm is not None else "",
        ui.warnings: common.warnings_md(lm) if lm is not None else "",
        ui.notice: truncation_notice(rec, lm.max_length if lm is not None else None),
        ui.label: {lab: float(v) for lab, v in zip(p.labels, p.probs)},
        ui.bar: plots.prob_bar(p.labels, p.probs),
        ui.tokens: tokens_html(rec),
    }
    return out


def tokens_html(rec: common.Record) -> str:
    """The words coloured by their attribution, or "" while Integrated Gradients are pending/skipped."""
    if rec.attribution is None:
        return ""
    return core.attribution_tokens_html(
        rec.attribution, merge=True, min_change=rec.min_change,
        title=f"Words coloured by their attribution to \u201c{rec.attribution.target}\u201d")
