"""Predict tab: text (and optional second text), the Analyze button, class probabilities."""

from __future__ import annotations

import html
from types import SimpleNamespace

import gradio as gr
import pandas as pd

import bertviz_app as core
from bertviz_app.models.heads import QUESTION_ANSWERING, SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION

from . import analysis, figures, model_loading, plots
from .markup import esc

EXAMPLES = [
    ["A gorgeous, moving film: a joy from start to finish.", ""],
    ["The movie was a tedious slog, and the acting was awful.", ""],
    ["It's not a bad film, but it is not a great one either.", ""],
]
# a tagger's: sentences with people, places, organisations, dates and amounts (the default tagger's types)
TAGGER_EXAMPLES = [
    ["Angela Merkel met Barack Obama in Berlin on Tuesday to discuss NATO.", ""],
    ["Apple paid $3 billion for Beats Electronics, the company founded by Dr. Dre and Jimmy Iovine.", ""],
    ["The Republicans in Ohio voted for the senator from Texas in 2016.", ""],
]
# a reader's: a question and the context that holds its answer (the last one does not: SQuAD 2.0's no answer)
READER_EXAMPLES = [
    ["Who directed the film?", "The film was directed by Jane Campion and shot in New Zealand over eleven weeks "
     "in 1992. It won the Palme d'Or at Cannes the following year."],
    ["Where was the film shot?", "The film was directed by Jane Campion and shot in New Zealand over eleven weeks "
     "in 1992. It won the Palme d'Or at Cannes the following year."],
    ["Who composed the score?", "The film was directed by Jane Campion and shot in New Zealand over eleven weeks "
     "in 1992. It won the Palme d'Or at Cannes the following year."],
]


def build() -> SimpleNamespace:
    with gr.Row():
        with gr.Column(scale=3):
            # the two boxes read as Question and Context for a question answering model (``head_view``)
            text = gr.Textbox(label=TEXT_LABEL, lines=4, placeholder=TEXT_PLACEHOLDER, elem_id="bv-text")
            pair = gr.Textbox(label=PAIR_LABEL, lines=2, placeholder="", elem_id="bv-pair")
            with gr.Row():
                analyze = gr.Button(IDLE_LABEL, variant="primary", elem_id="bv-analyze")
                skip_ig = gr.Checkbox(value=False, label="Skip Integrated Gradients", elem_id="bv-skip-ig",
                                      info="prediction and attention only (IG on a long text takes up to a minute)")
                window = gr.Checkbox(value=False, label="Classify a long text whole", elem_id="bv-window",
                                     info="past the model's length: overlapping windows, their logits averaged")
                # a question answering model's: "no answer" when its score beats the best span's by more than this
                threshold = gr.Number(value=0.0, label="No-answer threshold", visible=False,
                                      elem_id="bv-no-answer-threshold", info=THRESHOLD_INFO)
                # the threshold as Analyze reads it: a State, not the box itself, so /analyze keeps its inputs
                chosen_threshold = gr.State({"threshold": 0.0})
            # what a running Analyze is doing, right under the button that shows its progress and time left
            status = gr.Markdown(elem_id="bv-status")
            # each head's examples, the loaded model's shown (``head_view``)
            with gr.Column(elem_id="bv-examples") as examples:
                gr.Examples(EXAMPLES, inputs=[text, pair], label="Examples")
            with gr.Column(visible=False, elem_id="bv-tagger-examples") as tagger_examples:
                gr.Examples(TAGGER_EXAMPLES, inputs=[text, pair], label="Examples")
            with gr.Column(visible=False, elem_id="bv-reader-examples") as reader_examples:
                gr.Examples(READER_EXAMPLES, inputs=[text, pair], label="Examples (question, context)")
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
            # a question answering model answers with a span of the context: the answer, the context highlighted
            answer = gr.HTML(visible=False, elem_id="bv-answer")
    bar = figures.plot(label="Probabilities", elem_id="bv-prob-bar")
    tokens = gr.HTML(label="Which tokens drove the prediction (Integrated Gradients)", elem_id="bv-predict-tokens")
    tag_words = gr.Dataframe(headers=list(TAG_COLUMNS), label="Each word's tag and its probability", visible=False,
                             interactive=False, wrap=True, elem_id="bv-tag-words")
    n_best = gr.Dataframe(headers=list(N_BEST_COLUMNS), label="The best spans (n-best)", visible=False,
                          interactive=False, wrap=True, elem_id="bv-n-best")
    return SimpleNamespace(text=text, pair=pair, analyze=analyze, status=status, skip_ig=skip_ig, window=window,
                           model_info=model_info, warnings=warnings, notice=notice, label=label, bar=bar, tokens=tokens,
                           calibration=calibration, raw=raw, entities=entities, tag_words=tag_words,
                           threshold=threshold, chosen_threshold=chosen_threshold, answer=answer, n_best=n_best,
                           examples=examples, tagger_examples=tagger_examples, reader_examples=reader_examples)


TEXT_LABEL, TEXT_PLACEHOLDER = "Text", "Type or paste a sentence to classify and explain…"
PAIR_LABEL = "Second text (optional, for sentence-pair models)"
QUESTION_LABEL, QUESTION_PLACEHOLDER = "Question", "Type the question to answer from the context…"
CONTEXT_LABEL, CONTEXT_PLACEHOLDER = "Context", "Paste the text the answer is to be found in…"
THRESHOLD_INFO = ("\"no answer\" when its score beats the best span's by more than this (0: whenever it beats it; "
                  "raise it to answer more often)")
N_BEST_COLUMNS = ("answer", "start", "end", "score")


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
            ui.entities: gr.update(value=None, visible=False), ui.tag_words: gr.update(value=None, visible=False),
            **hide_answer(ui)}


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
    if (t := lm.temperature) != 1.0:  # what tag applied (a tagger is single-label)
        notice += (f" The scores are calibrated by temperature scaling, softmax(logits / T) with **T = {t:.3g}** "
                   "(the folder's calibration.json, fitted when it was fine-tuned); the tags are the same either way.")
    rows = [[w.text, w.label, round(float(w.score), 4), f"{w.start}-{w.end}"] for w in tagging.words]
    value = {"text": tagging.text, "entities": [{"entity": e.label, "start": e.start, "end": e.end}
                                                for e in tagging.entities]}
    return {ui.model_info: model_loading.model_line(lm), ui.warnings: model_loading.warnings_md(lm),
            ui.notice: notice, ui.label: None, ui.bar: plots.empty_figure(), ui.tokens: "",
            ui.calibration: gr.update(value="", visible=False), ui.raw: gr.update(value=False, visible=False),
            ui.entities: gr.update(value=value, visible=True),
            ui.tag_words: gr.update(value=pd.DataFrame(rows, columns=list(TAG_COLUMNS)), visible=True),
            **hide_answer(ui)}


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
    """A tagger's and a question answering model's outputs hidden (a classifier's Analyze after theirs)."""
    return {ui.entities: gr.update(value=None, visible=False), ui.tag_words: gr.update(value=None, visible=False),
            **hide_answer(ui)}


def hide_answer(ui: SimpleNamespace) -> dict:
    """A question answering model's outputs hidden."""
    return {ui.answer: gr.update(value="", visible=False), ui.n_best: gr.update(value=None, visible=False)}


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


# --------------------------------------------------------------------------- a question answering model
def head_view(ui: SimpleNamespace, lm) -> dict:
    """The two text boxes as ``lm``'s head reads them (labels and placeholders only: what was typed stays): Question
    and Context for a question answering model, with its no-answer threshold; Text and Second text otherwise, with
    the long-text switch (an answer reads a long context in windows by itself); the class probabilities shown for
    a classifier only; the head's examples."""
    qa = lm.head is QUESTION_ANSWERING
    return {ui.text: gr.update(label=QUESTION_LABEL if qa else TEXT_LABEL,
                               placeholder=QUESTION_PLACEHOLDER if qa else TEXT_PLACEHOLDER),
            ui.pair: gr.update(label=CONTEXT_LABEL if qa else PAIR_LABEL, placeholder=CONTEXT_PLACEHOLDER if qa else "",
                               lines=6 if qa else 2),
            ui.threshold: gr.update(visible=qa), ui.window: gr.update(visible=not qa),
            # class probabilities are a classifier's: a tagger's or a reader's page shows no empty box for them
            ui.label: gr.update(visible=lm.head is SEQUENCE_CLASSIFICATION),
            ui.bar: gr.update(visible=lm.head is SEQUENCE_CLASSIFICATION),
            ui.examples: gr.update(visible=lm.head is SEQUENCE_CLASSIFICATION),
            ui.tagger_examples: gr.update(visible=lm.head is TOKEN_CLASSIFICATION),
            ui.reader_examples: gr.update(visible=qa)}


def answer_line(a: core.Answer, threshold) -> str:
    """The answer in words (HTML, user text escaped): the span and its score against the no-answer score, or "no
    answer" with its score against the best span's."""
    best = a.n_best[0] if a.n_best else None
    na = f"no-answer score {a.no_answer_score:.4f}"
    if not a.no_answer:
        return (f'<b>Answer:</b> “<span class="bv-answer-text">{html.escape(a.text)}</span>” · score '
                f"{a.score:.4f} (characters {a.start}-{a.end}) · {na}")
    if best is None:
        return f'<b>No answer:</b> the model finds no span in this context · <span class="bv-no-answer">{na}</span>'
    return (f'<b>No answer</b> (<span class="bv-no-answer">{na}</span>): it beats the best span, '
            f"“{html.escape(best.text)}” at {best.score:.4f}, by more than the threshold {threshold:g}. Raise the "
            "no-answer threshold to answer with that span.")


def answer_html(a: core.Answer, threshold) -> str:
    """The answer line over the context as given, the answer's characters ``context[start:end]`` highlighted (every
    character escaped, spaces and line breaks kept)."""
    c = a.context
    if a.no_answer:
        body = html.escape(c)
    else:
        body = (html.escape(c[: a.start]) + f'<mark class="bv-answer-mark">{html.escape(c[a.start: a.end])}</mark>'
                + html.escape(c[a.end:]))
    windows = f" (read in {a.windows} overlapping windows)" if a.windows > 1 else ""
    return (f'<div class="bv-answer-line">{answer_line(a, threshold)}</div>'
            f'<div class="bv-title">Context{windows}</div><div class="bv-answer-context">{body}</div>')


def render_answer(ui: SimpleNamespace, rec, lm) -> dict:
    """A question answering model's answer (``rec``: an ``analysis.AnswerRecord``): the answer with the context
    highlighted and the n-best table; the classifier's and the tagger's outputs empty."""
    a = rec.answer
    rows = [[s.text, s.start, s.end, round(float(s.score), 4)] for s in a.n_best]
    notice = ("**A question answering model:** it answers with a span of the context. Its attention (question and "
              "context together) is on the Attention tab; why it answers this span on the Attributions tab.")
    return {ui.model_info: model_loading.model_line(lm), ui.warnings: model_loading.warnings_md(lm),
            ui.notice: notice, ui.label: None, ui.bar: plots.empty_figure(), ui.tokens: "",
            ui.calibration: gr.update(value="", visible=False), ui.raw: gr.update(value=False, visible=False),
            ui.entities: gr.update(value=None, visible=False), ui.tag_words: gr.update(value=None, visible=False),
            ui.answer: gr.update(value=answer_html(a, rec.threshold), visible=True),
            ui.n_best: gr.update(value=pd.DataFrame(rows, columns=list(N_BEST_COLUMNS)), visible=True)}
