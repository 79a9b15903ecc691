"""Predict tab: text (and optional second text), the Analyze button, class probabilities."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pandas as pd

import bertviz_app as core

from . import analysis, figures, model_loading, plots
from .markup import esc

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
            # a model folder with calibration.json: the probabilities above are temperature-scaled; this says so
            # and shows the raw ones on request (redrawn from the record, no model work). Hidden otherwise.
            calibration = gr.Markdown(visible=False, elem_id="bv-calibration")
            raw = gr.Checkbox(value=False, label="Show raw probabilities", visible=False, elem_id="bv-raw-probs",
                              info="the model's own softmax, before temperature scaling")
            # a token classifier (a tagger) answers with entities instead of class probabilities: shown for one
            entities = gr.HighlightedText(label="Entities", show_legend=True, visible=False, elem_id="bv-entities")
    bar = figures.plot(label="Probabilities", elem_id="bv-prob-bar")
    tokens = gr.HTML(label="Which tokens drove the prediction (Integrated Gradients)", elem_id="bv-predict-tokens")
    tag_words = gr.Dataframe(headers=list(TAG_COLUMNS), label="Each word's tag and its probability", visible=False,
                             interactive=False, wrap=True, elem_id="bv-tag-words")
    return SimpleNamespace(text=text, pair=pair, analyze=analyze, status=status, skip_ig=skip_ig, window=window,
                           model_info=model_info, warnings=warnings, notice=notice, label=label, bar=bar, tokens=tokens,
                           calibration=calibration, raw=raw, entities=entities, tag_words=tag_words)


TAG_COLUMNS = ("word", "tag", "probability", "characters")


IDLE_LABEL = "Analyze"


def busy(ui: SimpleNamespace, label: str, status: str) -> dict:
    """The Analyze button while an analysis runs: its progress as the label, not clickable."""
    return {ui.analyze: gr.update(value=label, interactive=False), ui.status: status}


def idle(ui: SimpleNamespace) -> dict:
    """The Analyze button back as it was, the status line empty."""
    return {ui.analyze: gr.update(value=IDLE_LABEL, interactive=True), ui.status: ""}


def cleared(ui: SimpleNamespace) -> dict:
    """Every Predict output that belongs to an analysed text, empty (the model's lines stay)."""
    return {ui.notice: "", ui.label: None, ui.bar: plots.empty_figure(), ui.tokens: "",
            ui.calibration: gr.update(value="", visible=False), ui.raw: gr.update(value=False, visible=False),
            ui.entities: gr.update(value=None, visible=False), ui.tag_words: gr.update(value=None, visible=False)}


def render_tagging(ui: SimpleNamespace, tagging: core.Tagging, lm, pair: str | None = None) -> dict:
    """A token classifier's answer: the text with its entities highlighted, and each word's tag and probability;
    the classifier's outputs empty (a tagger has no class probabilities to show)."""
    n = len(tagging.entities)
    notice = (f"**A token classifier (a tagger):** {n} entit{'y' if n == 1 else 'ies'} in {len(tagging.words)} words"
              + (f", read in {tagging.windows} overlapping windows" if tagging.windows > 1 else "")
              + (", **cut at the model's length**" if tagging.truncated else "") + ". "
              "Its attention is on the Attention tab; why it tags each entity (or a word) on the Attributions tab.")
    if pair:
        notice += " The second text is not read: a tagger tags one text."
    rows = [[w.text, w.label, round(float(w.score), 4), f"{w.start}-{w.end}"] for w in tagging.words]
    value = {"text": tagging.text, "entities": [{"entity": e.label, "start": e.start, "end": e.end}
                                                for e in tagging.entities]}
    return {ui.model_info: model_loading.model_line(lm), ui.warnings: model_loading.warnings_md(lm),
            ui.notice: notice, ui.label: None, ui.bar: plots.empty_figure(), ui.tokens: "",
            ui.calibration: gr.update(value="", visible=False), ui.raw: gr.update(value=False, visible=False),
            ui.entities: gr.update(value=value, visible=True),
            ui.tag_words: gr.update(value=pd.DataFrame(rows, columns=list(TAG_COLUMNS)), visible=True)}


def truncation_notice(rec: analysis.Record, max_length: int | None = None) -> str:
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


def pair_md(rec: analysis.Record, lm=None) -> str:
    """A note before the text's other notices when a second text was given to a model trained on single texts
    (``core.pair_notice``; a model whose training is not recorded gets none), else ""."""
    note = core.pair_notice(lm, rec.prediction.pair) if lm is not None else None
    return f"**Note:** {esc(note)}\n\n" if note else ""


LABEL = "Class probabilities"
SCALED_LABEL = "Class probabilities (temperature-scaled)"
RAW_LABEL = "Class probabilities (raw, before temperature scaling)"
# The label component keeps its title (a plain value: /analyze's output stays {"label", "confidences"}); the
# note and switch under it, and the bar's title, say which probabilities are shown.


def calibration_md(rec: analysis.Record) -> str:
    """One line under the probabilities of a model whose folder holds a calibration.json: they are
    temperature-scaled, by which T, fitted on what; "" for raw probabilities (no calibration)."""
    c = rec.calibration
    if c is None:
        return ""
    rows = f"{c.rows:,} rows" if c.rows else "rows"
    source = f" of the {esc(c.source)}" if c.source else ""
    fitted = f"fitted on {rows}{source}" if (c.rows or c.source) else "how it was fitted is not recorded"
    # says the same whichever way the switch under it stands (the bar's title says which is drawn)
    return (f"**Calibrated by temperature scaling:** shown as predict reports them, softmax(logits / T) with "
            f"**T = {c.temperature:.3g}** (calibration.json, {fitted}); **Show raw probabilities** gives the model's "
            "own softmax. The predicted class is the same either way; the attributions explain the raw probabilities.")


def probabilities(ui: SimpleNamespace, rec: analysis.Record | None, raw: bool = False) -> dict:
    """The class probabilities (label and bar) of ``rec``: temperature-scaled as predict reports them,
    or the model's raw softmax when ``raw`` (for a calibrated record; an uncalibrated one has only those)."""
    if rec is None:
        return {ui.label: None, ui.bar: plots.empty_figure()}
    p = rec.prediction
    probs, title = p.probs, LABEL
    if rec.calibration is not None:
        probs, title = (rec.calibration.raw_probs, RAW_LABEL) if raw else (p.probs, SCALED_LABEL)
    return {ui.label: {lab: float(v) for lab, v in zip(p.labels, probs)},
            ui.bar: plots.prob_bar(p.labels, probs, title=title)}


def render(ui: SimpleNamespace, rec: analysis.Record, lm=None) -> dict:
    calibrated = rec.calibration is not None
    out = {
        ui.model_info: model_loading.model_line(lm) if lm is not None else "",
        ui.warnings: model_loading.warnings_md(lm) if lm is not None else "",
        ui.notice: pair_md(rec, lm) + truncation_notice(rec, lm.max_length if lm is not None else None),
        **probabilities(ui, rec),
        ui.calibration: gr.update(value=calibration_md(rec), visible=calibrated),
        ui.raw: gr.update(value=False, visible=calibrated),  # a new text opens on what predict reports
        ui.tokens: tokens_html(rec),
    }
    return out


def hide_tagging(ui: SimpleNamespace) -> dict:
    """A tagger's outputs hidden (a classifier's Analyze after a tagger's)."""
    return {ui.entities: gr.update(value=None, visible=False), ui.tag_words: gr.update(value=None, visible=False)}


def switch_raw(ui: SimpleNamespace, rec: analysis.Record | None, raw: bool) -> dict:
    """The "show raw probabilities" switch: the label and bar redrawn from the record (no model work)."""
    if rec is None or rec.calibration is None:
        return {ui.label: gr.skip(), ui.bar: gr.skip()}
    return probabilities(ui, rec, bool(raw))


def tokens_html(rec: analysis.Record) -> str:
    """The words coloured by their attribution, or "" while Integrated Gradients are pending/skipped."""
    if rec.attribution is None:
        return ""
    return core.attribution_tokens_html(
        rec.attribution, merge=True, min_change=rec.min_change,
        title=f"Words coloured by their attribution to \u201c{rec.attribution.target}\u201d")
