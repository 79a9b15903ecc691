"""Evaluate tab: the chosen model on an uploaded labelled file (.csv, .tsv, .txt): metrics, slices
worst first, the rows it gets wrong, calibration before/after a temperature, and optionally the
[CLS] geometry by layer and a comparison with another model. A tagger (token classifier) chosen in the
Model tab is evaluated on a tagged file instead (CoNLL, JSON lines, a tokens/tags CSV): entity scores with
their intervals, per type, slices, the sentences it gets wrong (``evaluate_tagger``), shown and not stored. A
question answering model (a span reader) is evaluated on a SQuAD file (JSON, or a question/context/answer CSV): exact
match and F1 with their intervals, the answerable and unanswerable questions apart, slices, the wrong answers
(``evaluate_reader``), shown and not stored; with a second reader in Compare with, the two compared on the same
questions; a wrong answer's row clicked opens its question and context in Predict.

This module lays the tab out (``build``) and connects its events (``wire``) to the handlers of
``evaluate_events.Handlers`` (how an evaluation runs, is stored and is drawn: see there).
"""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

import bertviz_app as core

from . import evaluate_reader, evaluate_tagger, evaluate_view, figures, guards, visitor
from .evaluate_events import NO_COMPARE, NO_PAIR, NONE, Handlers
from .evaluate_view import COLOURINGS, DIMENSIONS, VECTORS, RunView
from .streaming import CancelFlag

__all__ = ["build", "wire"]

ANALYZE_JS = "() => { const b = document.querySelector('#bv-analyze'); if (b) setTimeout(() => b.click(), 50); }"


# --------------------------------------------------------------------------- layout
def build(default: str, *, settings: core.Settings | None = None) -> SimpleNamespace:
    """The tab's components; ``settings``: public mode (no stored list before the visitor is known)."""
    settings = settings if settings is not None else core.Settings()
    gr.Markdown("Evaluate the model chosen in the Model tab on a labelled file (.csv, .tsv or .txt with a header "
                "row): accuracy with its 95% interval, macro-F1, per-class scores, the confusion matrix, the slices "
                "where it does worst, the rows it gets wrong, and how honest its confidence is (calibration before "
                "and after a temperature). Each evaluation is stored and can be reopened below. The same as "
                "`python -m bertviz_app evaluate FILE --out folder/`. A tagger (a token classifier) is evaluated on a "
                "tagged file instead: entity precision, recall and F1 with their intervals, per entity type, against "
                "tagging every word O. A question answering model (a reader) is evaluated on a SQuAD file: exact "
                "match and F1 with their intervals, answerable and unanswerable questions apart, and its wrong "
                "answers.")
    return SimpleNamespace(**_states(), **_file_fields(), **_run_fields(settings), **_results_fields(),
                           **_tagger_fields(), **_reader_fields(), **_geometry_fields(), **_comparison_fields())


def _components(scope: dict) -> dict:
    """The gradio components and blocks among a layout step's local names (what ``build`` returns)."""
    return {k: v for k, v in scope.items() if isinstance(v, (gr.components.Component, gr.blocks.BlockContext))}


def _states() -> dict:
    """The tab's per-session states (no visible element)."""
    flag = gr.State(CancelFlag())
    table = gr.State(None, time_to_live=3600)
    refused = gr.State(None)  # why the file shown was refused (Evaluate says so instead of "upload one")
    view = gr.State(None, time_to_live=3600)  # the shown evaluation, read from its folder (RunView)
    selected = gr.State(None, time_to_live=3600)  # the row chosen in a table (sent to Predict)
    return _components(locals())


def _file_fields() -> dict:
    """The labelled file, its column mapping, the slice words, the model to compare with, the geometry switch."""
    with gr.Row():
        with gr.Column(scale=1):
            # the types of every head's files: gradio checks an upload against the types the component was built
            # with; the label and the hint under it follow the chosen model's head (Handlers.model_state)
            upload = gr.File(label=evaluate_tagger.CLASSIFIER_UPLOAD, file_types=evaluate_reader.FILE_TYPES,
                             type="filepath", elem_id="bv-ev-upload")
            file_hint = gr.Markdown(evaluate_tagger.CLASSIFIER_FILE, elem_id="bv-ev-file-hint")
        with gr.Column(scale=2):
            notices = gr.Markdown(elem_id="bv-ev-notices")
            with gr.Row() as columns_row:  # a classifier's table's columns (hidden for a tagger and a reader)
                text_col = gr.Dropdown(choices=[], label="Text column", elem_id="bv-ev-text-col")
                label_col = gr.Dropdown(choices=[], label="Label column", elem_id="bv-ev-label-col")
                pair_col = gr.Dropdown(choices=NO_PAIR, value=NONE, label="Second text (optional)",
                                       elem_id="bv-ev-pair-col")
            with gr.Row():
                words = gr.Textbox(label="Slice by rows containing", placeholder="not, but", max_lines=1,
                                   info="words or phrases, comma-separated; whole words, case ignored",
                                   elem_id="bv-ev-words")
                compare = gr.Dropdown(choices=NO_COMPARE, value=NONE, label="Compare with", allow_custom_value=True,
                                      info="another model with the same classes, on the same rows (optional; a "
                                      "fine-tuned run: its base, when the base has its classes)",
                                      elem_id="bv-ev-compare")
                geometry = gr.Checkbox(value=False, label="[CLS] geometry by layer", elem_id="bv-ev-geometry",
                                       info="PCA of every row's vectors at each depth and a linear probe per layer")
    return _components(locals())


def _run_fields(settings: core.Settings) -> dict:
    """Evaluate and Cancel, the status lines, and the stored evaluations to reopen."""
    with gr.Row():
        start = gr.Button("Evaluate", variant="primary", elem_id="bv-ev-start")
        cancel = gr.Button("Cancel", variant="stop", elem_id="bv-ev-cancel")
    model_note = gr.Markdown(elem_id="bv-ev-model-note")  # why Evaluate is greyed for the chosen model
    status = gr.Markdown(elem_id="bv-ev-status")
    with gr.Row():
        stored = gr.Dropdown(choices=[], value=None, label="Stored evaluations", scale=4, elem_id="bv-ev-stored",
                             info="newest first" + ("; yours only (this browser's)" if settings.public else ""))
        open_btn = gr.Button("Open", scale=1, elem_id="bv-ev-open")
    return _components(locals())


def _results_fields() -> dict:
    """The shown evaluation: summary, per-class scores, confusion, slices, wrong rows, calibration."""
    with gr.Column() as classifier_box:  # hidden while a tagger's evaluation is shown
        scope = _classifier_results()
    return {**scope, "classifier_box": classifier_box}


def _classifier_results() -> dict:
    summary = gr.Markdown(elem_id="bv-ev-summary")
    with gr.Row():
        per_class = gr.Dataframe(value=evaluate_view.per_class_frame(None), label="Per-class scores",
                                 interactive=False, elem_id="bv-ev-per-class")
        confusion = figures.plot(label="Confusion matrix", elem_id="bv-ev-confusion")
    slices = gr.Dataframe(value=evaluate_view.slices_frame(None), label="Slices, worst first: select one to list the "
                          "rows of it the model gets wrong", interactive=False, wrap=True, max_height=360,
                          elem_id="bv-ev-slices", elem_classes=["bv-table"])
    slice_md = gr.Markdown(elem_id="bv-ev-slice-md")
    slice_rows = gr.Dataframe(value=evaluate_view.rows_frame([]), label="Misclassified rows of the chosen slice",
                              interactive=False, wrap=True, max_height=300, elem_id="bv-ev-slice-rows",
                              column_widths=evaluate_view.rows_widths(), elem_classes=["bv-table"])
    wrong = gr.Dataframe(value=evaluate_view.rows_frame([]), label="Misclassified rows, most confident first: select "
                         "one, then open it in Predict or Attributions", interactive=False, wrap=True, max_height=400,
                         elem_id="bv-ev-wrong", column_widths=evaluate_view.rows_widths(), elem_classes=["bv-table"])
    with gr.Row():
        selected_md = gr.Markdown(elem_id="bv-ev-selected")
        to_predict = gr.Button("Open in Predict", scale=0, elem_id="bv-ev-to-predict")
        to_attributions = gr.Button("Open in Attributions", scale=0, elem_id="bv-ev-to-attributions")
    with gr.Row():
        with gr.Column():
            calibration = gr.Markdown(elem_id="bv-ev-calibration")
            save_t = gr.Button("Save this temperature to the model", visible=False, elem_id="bv-ev-save-t")
            save_t_md = gr.Markdown(elem_id="bv-ev-save-t-md")
        reliability = figures.plot(label="Reliability diagram", elem_id="bv-ev-reliability")
    return _components(locals())


def _tagger_fields() -> dict:
    """A tagger's evaluation (shown when one is): entity scores, per type, slices, wrong sentences, comparison."""
    with gr.Column(visible=False, elem_id="bv-ev-tagger") as tagger_box:
        tag_summary = gr.Markdown(elem_id="bv-ev-tag-summary")
        tag_types = gr.Dataframe(value=evaluate_tagger.types_frame(None), label="Entity scores per type",
                                 interactive=False, elem_id="bv-ev-tag-types")
        tag_comparison = gr.Markdown(elem_id="bv-ev-tag-comparison")
        tag_slices = gr.Dataframe(value=evaluate_tagger.slices_frame(None), label="Slices by sentence length and by "
                                  "the words asked for, worst first", interactive=False, elem_id="bv-ev-tag-slices")
        tag_errors = gr.Dataframe(value=evaluate_tagger.errors_frame(None), label="Sentences with a wrong tag (the "
                                  "first 200, in file order): word[true→predicted]", interactive=False, wrap=True,
                                  max_height=400, elem_id="bv-ev-tag-errors", elem_classes=["bv-table"])
    return _components(locals())


def _reader_fields() -> dict:
    """A question answering model's evaluation (shown when one is): EM and F1 with the answerable and unanswerable
    parts, the comparison with a second reader, slices, the wrong answers (a row clicked opens it in Predict)."""
    qa_rows = gr.State(None, time_to_live=3600)  # the listed wrong answers' ids, questions and contexts
    with gr.Column(visible=False, elem_id="bv-ev-reader") as reader_box:
        qa_summary = gr.Markdown(elem_id="bv-ev-qa-summary")
        qa_comparison = gr.Markdown(elem_id="bv-ev-qa-comparison")
        qa_slices = gr.Dataframe(value=evaluate_reader.slices_frame(None), label="Slices by question word, answer "
                                 "length and context length, lowest F1 first", interactive=False,
                                 elem_id="bv-ev-qa-slices")
        qa_errors = gr.Dataframe(value=evaluate_reader.errors_frame(None), label=f"Wrong answers (not an exact match), "
                                 f"lowest F1 first (at most {evaluate_reader.MAX_ERRORS}): click one to open its "
                                 "question and context in Predict", interactive=False,
                                 wrap=True, max_height=400, elem_id="bv-ev-qa-errors", elem_classes=["bv-table"])
    return _components(locals())


def _geometry_fields() -> dict:
    """The [CLS] geometry by layer (shown when the evaluation has it)."""
    with gr.Group(visible=False) as geometry_box:
        gr.Markdown("#### [CLS] geometry by layer")
        with gr.Row():
            layer = gr.Slider(0, 1, value=1, step=1, label="Layer (0 = embeddings)", elem_id="bv-ev-layer")
            dims = gr.Radio(DIMENSIONS, value=2, label="Projection", elem_id="bv-ev-dims")
            colour = gr.Radio(COLOURINGS, value="true", label="Colour by", elem_id="bv-ev-colour")
            vector = gr.Radio(VECTORS, value="cls", label="Vector", elem_id="bv-ev-vector")
        with gr.Row():
            with gr.Column(scale=3):
                scatter, clicked = figures.clickable_plot(label="PCA of the vectors", elem_id="bv-ev-scatter")
            with gr.Column(scale=2):
                probes = figures.plot(label="Probe accuracy by layer", elem_id="bv-ev-probes")
    return _components(locals())


def _comparison_fields() -> dict:
    """The comparison with a second model (shown when the evaluation has one)."""
    with gr.Group(visible=False) as compare_box:
        comparison = gr.Markdown(elem_id="bv-ev-comparison")
        disagreements = gr.Dataframe(value=evaluate_view.disagreement_frame(RunView("", {}, [], [], {})),
                                     label="Rows the two models disagree on: select one, then open it in Predict",
                                     interactive=False, wrap=True, max_height=360, elem_id="bv-ev-disagreements",
                                     column_widths=evaluate_view.DISAGREEMENT_WIDTHS, elem_classes=["bv-table"])
        compare_slices = gr.Dataframe(value=evaluate_view.comparison_frame(RunView("", {}, [], [], {})),
                                      label="Per slice: each model's accuracy", interactive=False,
                                      elem_id="bv-ev-compare-slices")
    return _components(locals())


def wire(ui: SimpleNamespace, *, demo: gr.Blocks | None, model_dd, default: str, predict_text, predict_pair, tabs,
         settings: core.Settings | None = None, open_tab: gr.State | None = None, link_tab=None,
         link_run: gr.State | None = None) -> Handlers:
    """Connect the tab's events to ``Handlers``' methods. ``open_tab``: the page's record of the open tab
    (``{"tab": ...}``); given, "Open in Attributions" also runs Analyze on the row, drawn in that tab.
    ``link_tab``: the page link's tab, set when a row opens another tab; ``link_run``: the evaluation a
    link opened the page with (``tab=evaluate&run=...``), drawn when it is set."""
    h = Handlers(ui, default=default, settings=settings if settings is not None else core.Settings(),
                 predict_text=predict_text, predict_pair=predict_pair, tabs=tabs, link_tab=link_tab)
    sent = [predict_text, predict_pair, tabs, *([link_tab] if link_tab is not None else [])]
    private = dict(api_visibility="private")
    # .upload and .clear, not .change: clearing a refused file (on_upload) must not run the handler again
    # and wipe the status line that says why
    gr.on([ui.upload.upload, ui.upload.clear], guards.guard(h.on_upload),
          trigger_mode="always_last",  # a file put in while the last one's clear runs is read too
          inputs=[ui.upload, model_dd],
          outputs=[ui.upload, ui.table, ui.refused, ui.notices, ui.text_col, ui.label_col, ui.pair_col, ui.status],
          concurrency_limit=2, **private)
    results = [ui.view, ui.selected, ui.selected_md, ui.summary, ui.per_class, ui.confusion, ui.slices, ui.slice_md,
               ui.slice_rows, ui.wrong, ui.calibration, ui.save_t, ui.save_t_md, ui.reliability, ui.geometry_box,
               ui.layer, ui.scatter, ui.probes, ui.dims, ui.colour, ui.vector, ui.compare_box, ui.comparison,
               ui.disagreements, ui.compare_slices, ui.classifier_box, *h.tagger_outputs(), *h.reader_outputs()]
    ui.start.click(h.arm, inputs=[ui.flag], outputs=None, queue=False, **private).then(
        guards.guard_stream(h.run), inputs=[ui.flag, model_dd, ui.table, ui.refused, ui.text_col, ui.label_col,
                                            ui.pair_col, ui.words, ui.compare, ui.geometry],
        outputs=[ui.status, ui.stored, *results], concurrency_limit=1, concurrency_id="evaluate",
        show_progress_on=[ui.status], **private)
    ui.cancel.click(h.on_cancel, inputs=[ui.flag], outputs=None, queue=False, **private)
    # a refusal stays in the tab's status line (Save's: the line under its button): no toast, no "Error" badges
    ui.open_btn.click(guards.to_status(h.open_stored, ui.status), inputs=[ui.stored], outputs=[ui.status, *results],
                      concurrency_limit=2, concurrency_id="evaluate-open", **private)
    ui.save_t.click(guards.to_status(h.save_temperature, ui.save_t_md), inputs=[ui.view], outputs=[ui.save_t_md],
                    concurrency_limit=1, concurrency_id="evaluate-save-t", **private)
    if demo is not None:
        visitor.on_page_load(demo, h.refresh, inputs=[ui.stored, model_dd],
                             outputs=[ui.stored, ui.compare, *h.head_outputs()])
    if link_run is not None:
        link_run.change(guards.to_status(h.restore_run, ui.status), inputs=[link_run],
                        outputs=[ui.status, ui.stored, *results],
                        concurrency_limit=2, concurrency_id="evaluate-open", **private)
    # another model chosen (a fine-tune's new run too): its base offered for the comparison (may load both)
    # a tagger or a classifier: the file asked for, the controls and the comparisons follow its head
    model_dd.change(guards.guard(h.suggest), inputs=[model_dd], outputs=[ui.compare, *h.head_outputs()],
                    concurrency_limit=1,
                    concurrency_id="evaluate-suggest", show_progress="hidden", **private)
    # a file read for another head (a tagger's tagged words, a classifier's table, a reader's questions) put away
    model_dd.change(guards.guard(h.file_for_model), inputs=[model_dd, ui.table],
                    outputs=[ui.upload, ui.table, ui.refused, ui.notices, ui.text_col, ui.label_col, ui.pair_col],
                    concurrency_limit=1, concurrency_id="evaluate-file-model", show_progress="hidden", **private)
    ui.slices.select(guards.guard(h.on_slice), inputs=[ui.view], outputs=[ui.slice_md, ui.slice_rows], queue=False,
                     **private)
    for table in (ui.wrong, ui.slice_rows, ui.disagreements):
        table.select(guards.guard(h.on_row), inputs=[ui.view], outputs=[ui.selected, ui.selected_md], queue=False,
                     **private)
    # ``sent`` holds the link's tab State: queued, since gradio's page fires a State's change only after a queued event
    ui.to_predict.click(guards.guard(h.to_predict), inputs=[ui.selected], outputs=sent, queue=True, **private)
    if open_tab is None:
        ui.to_attributions.click(guards.guard(h.to_attributions), inputs=[ui.selected], outputs=sent, queue=True,
                                 **private)
    else:  # the Attributions tab shows the analysed text's: Analyze the row (its button, as a user would)
        ui.to_attributions.click(guards.guard(h.to_attributions), inputs=[ui.selected, open_tab], outputs=sent,
                                 queue=True, **private).success(None, js=ANALYZE_JS, **private)
    # a reader's wrong answer clicked: its question and context in Predict (queued: it writes the link's tab State)
    ui.qa_errors.select(guards.guard(h.on_answer_row), inputs=[ui.qa_rows], outputs=sent, queue=True, **private)
    ui.clicked.change(guards.guard(h.on_point), inputs=[ui.view, ui.clicked], outputs=sent, queue=True, **private)
    gr.on([ui.layer.input, ui.dims.input, ui.colour.input, ui.vector.input], guards.guard(h.redraw_geometry),
          inputs=[ui.view, ui.layer, ui.dims, ui.colour, ui.vector], outputs=[ui.scatter, ui.probes],
          trigger_mode="always_last", show_progress="minimal", concurrency_limit=4, concurrency_id="evaluate-draw",
          **private)
    return h
