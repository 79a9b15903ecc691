"""The Evaluate tab's event handlers (``Handlers``) and the small helpers they share; the layout
and the wiring are in ``evaluate_tab``.

The evaluation (``core.evaluate_file``) runs in a worker thread while the status line says how many
rows are done and about how long is left (``core.RateEta``); Cancel stops it between batches. The
result is stored as a run folder (``bertviz_app.evaluate.evaluation_runs``: the visitor's own in public mode)
and the page is drawn FROM that folder (``evaluate_view.load_run``), so reopening a stored
evaluation draws the same page. The geometry's layer, dimensions and colouring redraw from the
loaded folder (``gr.State``), never from the model. A row chosen in a table, or a point clicked in
the scatter, opens in the Predict tab (or the Attributions tab) as the Fine-tune tab sends its rows.

A tagger (a token classifier) chosen in the Model tab: the upload is read as tagged words (``read_tagged``), the
evaluation is ``evaluate_tagged`` (``compare_taggers`` with a second tagger) with the same progress and cancel,
and the result is drawn by ``evaluate_tagger`` and not stored (the page says so). The file asked for, the
controls offered and the models to compare with follow the chosen model's head (``model_state``,
``compare_options``).

A question answering model (a span reader) chosen: the upload is read as questions with their contexts and answers
(``read_squad``: SQuAD JSON or a question/context/answer_text/answer_start CSV, its refusals said as it says them),
the evaluation is ``evaluate_answers`` (``compare_readers`` with a second reader: Compare with lists the other
readers) with the same progress (in questions) and cancel, and the result is drawn by ``evaluate_reader`` and not
stored. No slice words: its slices are fixed. A wrong answer's row clicked opens its question and context in the
Predict tab's Question and Context boxes (``on_answer_row``), as a classifier's row opens its text there.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import gradio as gr

import bertviz_app as core
from bertviz_app.evaluate import evaluation_runs
from bertviz_app.evaluate.answer_evaluation import compare_readers, evaluate_answers
from bertviz_app.evaluate.tagger_evaluation import compare_taggers, evaluate_tagged
from bertviz_app.models import visitors
from bertviz_app.models.catalog import folder_head
from bertviz_app.models.heads import QUESTION_ANSWERING, SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION
from bertviz_app.train.data.squad import QAFile, read_squad
from bertviz_app.train.data.tagged import TaggedFile, read_tagged

from . import evaluate_reader, evaluate_tagger, evaluate_view, figures, guards, model_loading, plots, streaming, visitor
from .evaluate_view import RunView
from .finetune_view import load_base, shown_name
from .markup import esc
from .streaming import CancelFlag

__all__ = ["Handlers", "NONE", "NO_COMPARE", "NO_PAIR", "file_head", "file_wanted", "parse_words", "progress_line",
           "rows_table"]

NONE = ""  # the "no second text" / "compare with nothing" choice
# the heads an evaluation reads (a table, a tagged file, a SQuAD file)
EVALUATED = (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION, QUESTION_ANSWERING)
# each head's file: what a file read for it is called when it is put away, the file, its formats
FILE_OF = {SEQUENCE_CLASSIFICATION: ("the table read for a classifier", "a labelled table",
                                     "a text and a label column"),
           TOKEN_CLASSIFICATION: ("the tagged file read for a tagger", "a tagged file",
                                  "CoNLL, JSON lines with tokens and tags, or a tokens/tags CSV"),
           QUESTION_ANSWERING: ("the questions read for a question answering model", "a question answering file",
                                "SQuAD JSON, or a CSV with question, context, answer_text and answer_start columns")}


def file_wanted(head) -> str:
    """The file a model of ``head`` is evaluated on, with its formats ("a tagged file (CoNLL, ...)")."""
    _, file, formats = FILE_OF.get(head, FILE_OF[SEQUENCE_CLASSIFICATION])
    return f"{file} ({formats})"


def file_head(table):
    """The head a file read at upload is for: a ``TaggedFile`` a tagger's, a ``QAFile`` a reader's, a table a
    classifier's."""
    if isinstance(table, TaggedFile):
        return TOKEN_CLASSIFICATION
    if isinstance(table, QAFile):
        return QUESTION_ANSWERING
    return SEQUENCE_CLASSIFICATION


def head_kind(head) -> str:
    """A model of ``head`` in a few words, as a reason names it ("a token classifier")."""
    return {SEQUENCE_CLASSIFICATION: "a sequence classifier", TOKEN_CLASSIFICATION: "a token classifier"}.get(
        head, f"a {head.name} model")
NO_PAIR = [("(none)", NONE)]
NO_COMPARE = [("(none)", NONE)]


def shared_model_why(name: str) -> str:
    return ("On this shared app a temperature is saved only into your own fine-tuned runs: the shared model "
            f"{shown_name(name)!r} answers every visitor as it is.")


def hub_model_why(name: str) -> str:
    return (f"{shown_name(name)} is a Hub model with no folder of its own here: save it to a folder and evaluate "
            "that folder to keep a temperature with it.")


def parse_words(value: str | None) -> list[str]:
    """The words box ("not, but") -> ["not", "but"]: split at commas or semicolons (a word may hold
    a space: "not bad"), blanks dropped, each once."""
    words = [w.strip() for w in re.split(r"[,;\n]", value or "")]
    return list(dict.fromkeys(w for w in words if w))


def progress_line(done: int, total: int, left: float | None, what: str = "Evaluating",
                  cancelling: bool = False, unit: str = "rows") -> str:
    """The status line while rows (a tagger's: sentences) are evaluated: done of all and the time left (or
    "measuring")."""
    if not total:
        return f"**{what}:** starting…"
    eta = f"{streaming.AnalyzeProgress.duration(left)} left" if left is not None else f"time left: {core.MEASURING}"
    note = " · cancelling after this batch…" if cancelling else ""
    return f"**{what}:** {done:,} of {total:,} {unit} ({done / total:.0%}) · {eta}{note}"


def rows_table(rows: list[dict], pairs: bool = False):
    """A rows table's new value (``evaluate_view.rows_frame``) with its column widths: the second text's column
    comes and goes with the evaluation shown."""
    return gr.update(value=evaluate_view.rows_frame(rows, pairs), column_widths=evaluate_view.rows_widths(pairs))


VECTORS_IN_MEMORY = 256 * 10**6  # bytes of [CLS] and mean vectors kept in memory; more go to a scratch folder


def _large(lm, rows: int) -> bool:
    """Whether every row's vectors at every depth (2 x rows x (L + 1) x hidden x 2 bytes) would pass
    ``VECTORS_IN_MEMORY``: then they are memory-mapped in a scratch folder (removed once stored)."""
    hidden = int(getattr(lm.model.config, "hidden_size", 768))
    return 4 * rows * (lm.num_layers + 1) * hidden > VECTORS_IN_MEMORY


class Handlers:
    """The tab's event handlers with what they share: the components ``ui``, the server's
    ``settings``, the app's default model and the explorer's components a chosen row goes to."""

    def __init__(self, ui: SimpleNamespace, *, default: str, settings: core.Settings, predict_text, predict_pair,
                 tabs, link_tab=None):
        self.ui, self.default, self.settings = ui, default, settings
        self.predict_text, self.predict_pair, self.tabs = predict_text, predict_pair, tabs
        self.link_tab = link_tab  # the page link's tab (ui.links), which a tab opened from here must follow

    # ---------------------------------------------------------------- upload
    def on_upload(self, path, model_name=None):
        """A file: read it (kept in the session; public mode: the upload is deleted once read), its
        columns offered and guessed as the evaluation would guess them. A refused file (unreadable, too
        big, a zip renamed .csv, over the upload quota...) is cleared from the File component, so it does
        not look uploaded, and the status line says why and what to fix (no toast, no badge). With
        ``model_name`` a tagger (the model chosen when the file arrives), the file is read as tagged words; a
        question answering model, as questions with their contexts and answers (``read_squad``)."""
        ui = self.ui
        empty = gr.update(choices=[], value=None)
        if not path:
            return {ui.table: None, ui.refused: None, ui.notices: "", ui.text_col: empty, ui.label_col: empty,
                    ui.pair_col: gr.update(choices=NO_PAIR, value=NONE)}
        cleared = {ui.table: None, ui.upload: None, ui.text_col: empty, ui.label_col: empty,
                   ui.pair_col: gr.update(choices=NO_PAIR, value=NONE)}
        try:
            visitor.upload(path)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge (upload_refused logs the unexpected)
            why = guards.upload_refused(path, exc)
            return {**cleared, ui.refused: None, ui.notices: why, ui.status: why}
        try:
            head = self.reads_head(model_name)
            if head is TOKEN_CLASSIFICATION:
                tagged = read_tagged(path, max_upload_mb=self.settings.max_upload_mb,
                                     max_sentences=self.settings.max_rows)
                return {**cleared, ui.upload: gr.skip(), ui.table: tagged, ui.refused: None, ui.status: "",
                        ui.notices: evaluate_tagger.tagged_md(tagged)}
            if head is QUESTION_ANSWERING:
                questions = read_squad(path, max_upload_mb=self.settings.max_upload_mb,
                                       max_questions=self.settings.max_rows)
                return {**cleared, ui.upload: gr.skip(), ui.table: questions, ui.refused: None, ui.status: "",
                        ui.notices: evaluate_reader.read_md(questions)}
            table = core.read_table(path, max_upload_mb=self.settings.max_upload_mb, max_rows=self.settings.max_rows)
        except core.DataError as exc:
            return {**cleared, ui.refused: guards.refused_file(path, exc),
                    ui.notices: f"**Error:** {esc(exc)}", ui.status: guards.upload_refused(path, exc)}
        finally:
            visitor.discard(path)
        guess = core.guess_columns(table)
        cols = list(table.columns)
        lines = [f"**{esc(table.name)}**: {table.n_rows:,} rows, {len(cols)} columns."]
        lines += [f"Note: {esc(n)}" for n in table.notices]
        if guess.reasons:
            lines.append("Guessed columns: " + "; ".join(esc(r) for r in guess.reasons) + ". Change them if they are "
                         "wrong, then press Evaluate.")
        if guess.label is None:
            lines.append("**No label column found:** an evaluation compares each row's label with the prediction; "
                         "choose the column that holds the labels.")
        return {ui.table: table, ui.refused: None, ui.notices: "  \n".join(lines), ui.status: "",
                ui.text_col: gr.update(choices=cols, value=guess.text),
                ui.label_col: gr.update(choices=cols, value=guess.label),
                ui.pair_col: gr.update(choices=[*NO_PAIR, *[(c, c) for c in cols]], value=guess.pair or NONE)}

    def file_for_model(self, model_name, table):
        """Another model chosen while a file is shown: a file read for another head (tagged words for a classifier,
        a table for a tagger, questions for either, or either for a question answering model) is put away, and the
        line under the upload says why and what to upload, so Evaluate is not offered a file it would refuse. A file
        of the model's kind, or a model that does not open, leaves it as it is."""
        ui = self.ui
        kept = dict.fromkeys([ui.upload, ui.table, ui.refused, ui.notices, ui.text_col, ui.label_col, ui.pair_col],
                             gr.skip())
        if table is None:
            return kept
        try:
            head = model_loading.chosen_head(model_name, self.default, self.settings)
        except core.BertvizError:
            return kept
        head = head if head in FILE_OF else SEQUENCE_CLASSIFICATION  # as on_upload reads for it
        if head is file_head(table):
            return kept
        shown = esc(shown_name((model_name or "").strip() or self.default))
        kind = {TOKEN_CLASSIFICATION: "a tagger", QUESTION_ANSWERING: "a question answering model"}.get(
            head, "a sequence classifier")
        why = f"**{shown} is {kind}:** {FILE_OF[file_head(table)][0]} was put away. Upload {file_wanted(head)}."
        empty = gr.update(choices=[], value=None)
        return {ui.upload: None, ui.table: None, ui.refused: None, ui.notices: why, ui.text_col: empty,
                ui.label_col: empty, ui.pair_col: gr.update(choices=NO_PAIR, value=NONE)}

    def reads_tags(self, model_name) -> bool:
        """Is ``model_name`` (the chosen model) a tagger, so its file is tagged words?"""
        return self.reads_head(model_name) is TOKEN_CLASSIFICATION

    def reads_head(self, model_name):
        """The head whose file an upload is read as for ``model_name`` (the chosen model): a tagger's (tagged
        words), a question answering model's (questions) or a classifier's (a table). A model that does not open,
        or none named, reads as a classifier here (Evaluate says why it cannot be evaluated)."""
        if model_name is None:
            return SEQUENCE_CLASSIFICATION
        try:
            head = model_loading.chosen_head(model_name, self.default, self.settings)
        except core.BertvizError:
            return SEQUENCE_CLASSIFICATION
        return head if head in (TOKEN_CLASSIFICATION, QUESTION_ANSWERING) else SEQUENCE_CLASSIFICATION

    # ---------------------------------------------------------------- evaluate
    @staticmethod
    def arm(flag: CancelFlag):
        flag.arm()

    def run(self, flag, model_name, table, refused, text_col, label_col, pair_col, words, compare, geometry):
        """A refusal (no file, no label column, labels the model lacks...) is the status line's message,
        not an error badge: the status is what this tab's user reads."""
        ui = self.ui
        try:
            yield from self.evaluate(flag, model_name, table, refused, text_col, label_col, pair_col, words, compare,
                                     geometry)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge (refusal_md logs the unexpected)
            yield {ui.status: f"{guards.refusal_md(exc)}  \nNothing was stored."}

    def evaluate(self, flag, model_name, table, refused, text_col, label_col, pair_col, words, compare, geometry):
        ui, cancel = self.ui, flag.event
        if table is None:
            head = self.reads_head(model_name)
            raise core.DataError(refused or (
                "Upload a tagged file first (CoNLL, JSON lines with tokens and tags, or a tokens/tags CSV)."
                if head is TOKEN_CLASSIFICATION else f"Upload {file_wanted(QUESTION_ANSWERING)} first."
                if head is QUESTION_ANSWERING else
                "Upload a labelled file first (.csv, .tsv or .txt with a header row)."))
        owner = visitor.owner()
        lm = model_loading.load(model_name, self.default, self.settings)
        if lm.head is QUESTION_ANSWERING or isinstance(table, QAFile):
            yield from self.evaluate_reader(flag, lm, table, compare)
            return
        if lm.head is TOKEN_CLASSIFICATION or isinstance(table, TaggedFile):
            yield from self.evaluate_tagger(flag, lm, table, words, compare)
            return
        if not label_col:
            raise core.DataError(f"Choose the label column: an evaluation compares each row's label with the "
                                 f"model's prediction (columns: {', '.join(table.columns)}).")
        if owner == visitors.NOBODY:
            raise core.InputError("This page has no owner token yet: reload the page, then evaluate again.")
        other = load_base(compare, self.default, self.settings) if compare else None
        track, progress = self.tracker(lm, other)

        def work():
            with tempfile.TemporaryDirectory(prefix="bertviz-vectors-") as scratch:
                ev = core.evaluate_file(lm, table, text_col or None, label_col or None, pair_col or None,
                                        words=parse_words(words), progress=progress, cancel=cancel,
                                        layers=bool(geometry), compare_with=other,
                                        vectors_folder=scratch if geometry and _large(lm, table.n_rows) else None)
                return evaluation_runs.save(ev, self.settings.models_dir, owner,
                                            keep_per_owner=self.settings.max_evaluations_per_visitor)

        saved = yield from self.run_work(flag, work, track)
        if saved is None:  # cancelled: the status says so
            return
        out = self.render(evaluation_runs.open_evaluation(self.settings.models_dir, saved.name, owner), saved.name)
        lines = [f"**Done:** stored as **{esc(saved.name)}** (reopen it below)."]
        if geometry and not out[ui.view].projections:
            lines.append("No geometry: a projection needs at least 3 rows.")
        if saved.removed:
            lines.append(f"Removed your oldest evaluation{'s' if len(saved.removed) > 1 else ''} "
                         f"({esc(', '.join(saved.removed))}): a visitor keeps "
                         f"{self.settings.max_evaluations_per_visitor}.")
        out[ui.status] = "  \n".join(lines)
        out[ui.stored] = gr.update(choices=self.choices(), value=saved.name)
        yield out

    def evaluate_tagger(self, flag, lm, tagged, words, compare):
        """A tagger's evaluation of the tagged file read at upload (``evaluate_tagged``; with ``compare``, both
        taggers on the same sentences: ``compare_taggers``), in a worker thread with the progress in sentences;
        drawn, not stored (``evaluate_tagger.NOT_STORED`` says so)."""
        ui, cancel = self.ui, flag.event
        shown = shown_name(lm.name)  # in a refusal, escaped where it is shown (guards.refusal_md)
        if lm.head is not TOKEN_CLASSIFICATION:
            raise core.DataError(f"The file shown was read as tagged words, for a tagger; {shown} is a sequence "
                                 "classifier, evaluated on a table with a text and a label column. Remove the file "
                                 "(×) and upload a labelled table.")
        if not isinstance(tagged, TaggedFile):
            raise core.DataError(f"{shown} is a tagger (token classification), evaluated on tagged words, and the "
                                 "file shown was read as a classifier's table when it was uploaded. Remove it (×) "
                                 "and upload it again (CoNLL, JSON lines with tokens and tags, or a tokens/tags CSV).")
        other = load_base(compare, self.default, self.settings) if compare else None
        track, progress = self.tracker(lm, other, unit="sentences")

        def work():
            run = dict(words=parse_words(words), progress=progress, cancel=cancel)
            if other is None:
                return evaluate_tagged(lm, tagged, **run), None
            comparison = compare_taggers(lm, other, tagged, **run)
            return comparison.a, comparison

        done = yield from self.run_work(flag, work, track)
        if done is None:  # cancelled: the status says so
            return
        ev, comparison = done
        out = self.render_tagged(ev, comparison)
        out[ui.status] = (f"**Done:** {ev.n_sentences:,} sentences evaluated; entity F1 {ev.entity_f1:.3f}. "
                          "Not stored: a tagger's evaluation is shown below only.")
        yield out

    def evaluate_reader(self, flag, lm, questions, compare=None):
        """A question answering model's evaluation of the file read at upload (``evaluate_answers``: every question
        answered, SQuAD's EM and F1), in a worker thread with the progress in questions; drawn, not stored
        (``evaluate_reader.NOT_STORED`` says so). The slice words do not apply (its slices are fixed); a comparison
        with ``compare``, a second reader answers the same questions (``compare_readers``); a model that is not a reader
        is refused, saying what Compare with takes."""
        ui, cancel = self.ui, flag.event
        shown = shown_name(lm.name)  # in a refusal, escaped where it is shown (guards.refusal_md)
        if lm.head is not QUESTION_ANSWERING:
            raise core.DataError(f"The file shown was read as questions with their contexts and answers, for a "
                                 f"question answering model; {shown} is {head_kind(lm.head)}. Remove the file (×) and "
                                 f"upload {file_wanted(lm.head)}.")
        if not isinstance(questions, QAFile):
            read = "tagged words, for a tagger" if isinstance(questions, TaggedFile) else "a classifier's table"
            raise core.DataError(f"{shown} is a question answering model, evaluated on questions with their contexts "
                                 f"and answers, and the file shown was read as {read} when it was uploaded. Remove it "
                                 f"(×) and upload {file_wanted(QUESTION_ANSWERING)}.")
        other = load_base(compare, self.default, self.settings) if compare else None
        if other is not None and other.head is not QUESTION_ANSWERING:
            raise core.InputError(f"{shown_name(other.name)} is {head_kind(other.head)}: {shown} is a question "
                                  "answering model, compared only with another question answering model on the same "
                                  "questions. Choose one listed in Compare with, or (none).")
        track, progress = self.tracker(lm, other, unit="questions")

        def work():
            if other is None:
                return evaluate_answers(lm, questions, progress=progress, cancel=cancel), None
            comparison = compare_readers(lm, other, questions, progress=progress, cancel=cancel)
            return comparison.a, comparison

        done = yield from self.run_work(flag, work, track)
        if done is None:  # cancelled: the status says so
            return
        ev, comparison = done
        out = self.render_answers(ev, comparison)
        line = (f"**Done:** {ev.n_questions:,} questions evaluated; exact match {ev.exact:.3f}, F1 {ev.f1:.3f}"
                + ("" if comparison is None else f"; {esc(shown_name(comparison.b.model))}: exact match "
                   f"{comparison.b.exact:.3f}, F1 {comparison.b.f1:.3f}") + ".")
        out[ui.status] = f"{line} Not stored: a question answering model's evaluation is shown below only."
        yield out

    @staticmethod
    def tracker(lm, other=None, **extra) -> tuple[dict, Callable[[int, int], None]]:
        """The progress record an evaluation of ``lm`` (then ``other``) fills, and the callback that fills it."""
        what = f"Evaluating with {shown_name(lm.name)}, then {shown_name(other.name)}" if other else "Evaluating"
        track = {"what": what, "done": 0, "total": 0, **extra,
                 "eta": core.RateEta(min_units=1, min_seconds=2.0, window=60.0)}

        def progress(done, total):
            track["done"], track["total"] = done, total
            track["eta"].update(done)

        return track, progress

    def run_work(self, flag, work, track: dict):
        """``work`` in a worker thread behind the Starting line and then its progress: its result, or None when it
        was cancelled (the status line then says so); the Cancel flag re-armed either way."""
        ui, cancel = self.ui, flag.event
        yield {ui.status: "**Starting…** loading the model"}
        try:
            return (yield from streaming.stream_work(work, lambda: self.progress(track, cancel),
                                                     on_abandon=cancel.set))
        except core.CancelledError as exc:
            yield {ui.status: f"**Cancelled:** {esc(exc)}"}
            return None
        finally:
            if flag.event is cancel:
                flag.arm()

    def tagger_outputs(self) -> list:
        """The components a tagger's evaluation is drawn in (after the classifier's in the run's outputs)."""
        ui = self.ui
        return [ui.tagger_box, ui.tag_summary, ui.tag_types, ui.tag_comparison, ui.tag_slices, ui.tag_errors]

    def reader_outputs(self) -> list:
        """The components a question answering model's evaluation is drawn in (after the tagger's)."""
        ui = self.ui
        return [ui.reader_box, ui.qa_summary, ui.qa_comparison, ui.qa_slices, ui.qa_errors, ui.qa_rows]

    def reader_hidden(self) -> dict:
        """The reader's results hidden (another head's evaluation drawn). A layout without them (a stand-in that
        names only the classifier's and the tagger's components) draws as before."""
        return {self.ui.reader_box: gr.update(visible=False)} if hasattr(self.ui, "reader_box") else {}

    def render_answers(self, ev, comparison=None) -> dict:
        """A question answering model's evaluation drawn (with ``comparison``, the two readers compared); the
        classifier's and the tagger's results (and a stored evaluation's view) hidden. ``qa_rows`` keeps the listed
        wrong answers' questions and contexts, for a click on one to open it in Predict."""
        ui = self.ui
        return {ui.view: None, ui.selected: None, ui.selected_md: "", ui.classifier_box: gr.update(visible=False),
                ui.geometry_box: gr.update(visible=False), ui.compare_box: gr.update(visible=False),
                ui.tagger_box: gr.update(visible=False), ui.reader_box: gr.update(visible=True),
                ui.qa_summary: evaluate_reader.summary_md(ev), ui.qa_slices: evaluate_reader.slices_frame(ev),
                ui.qa_comparison: evaluate_reader.comparison_md(comparison),
                ui.qa_errors: evaluate_reader.errors_frame(ev), ui.qa_rows: evaluate_reader.error_rows(ev)}

    def render_tagged(self, ev, comparison=None) -> dict:
        """A tagger's evaluation drawn; the classifier's results (and a stored evaluation's view) hidden."""
        ui = self.ui
        return {ui.view: None, ui.selected: None, ui.selected_md: "", ui.classifier_box: gr.update(visible=False),
                ui.geometry_box: gr.update(visible=False), ui.compare_box: gr.update(visible=False),
                ui.tagger_box: gr.update(visible=True), ui.tag_summary: evaluate_tagger.summary_md(ev),
                ui.tag_types: evaluate_tagger.types_frame(ev),
                ui.tag_comparison: evaluate_tagger.comparison_md(comparison),
                ui.tag_slices: evaluate_tagger.slices_frame(ev), ui.tag_errors: evaluate_tagger.errors_frame(ev),
                **self.reader_hidden()}

    def progress(self, track: dict, cancel) -> dict:
        return {self.ui.status: progress_line(track["done"], track["total"], track["eta"].left(track["total"])
                                              if track["total"] else None, track["what"], cancel.is_set(),
                                              track.get("unit", "rows"))}

    @staticmethod
    def on_cancel(flag: CancelFlag) -> None:
        """Ask the running evaluation to stop; it says "Cancelled" itself once it has."""
        flag.event.set()

    # ---------------------------------------------------------------- drawing a stored evaluation
    def render(self, folder, name: str) -> dict:
        """Every result component drawn from the run folder."""
        ui = self.ui
        v = evaluate_view.load_run(folder, name)
        out = {ui.view: v, ui.selected: None, ui.selected_md: "", ui.summary: evaluate_view.summary_md(v),
               ui.per_class: evaluate_view.per_class_frame(v), ui.confusion: evaluate_view.confusion_figure(v),
               ui.slices: evaluate_view.slices_frame(v), ui.slice_md: "",
               ui.slice_rows: rows_table([], v.pairs),
               ui.wrong: rows_table(evaluate_view.wrong_rows(v), v.pairs),
               ui.calibration: evaluate_view.calibration_md(v), ui.reliability: evaluate_view.reliability_figure(v),
               ui.save_t_md: "", ui.classifier_box: gr.update(visible=True), ui.tagger_box: gr.update(visible=False),
               **self.reader_hidden()}
        # offered only for a temperature that helped on the rows it was measured on (NLL lower, ECE not higher),
        # for a model it can be saved into; else the line under the button says why not
        refused = self.save_refused(v) if evaluate_view.temperature_judgement(v)[0] else ""
        out[ui.save_t] = gr.update(visible=refused is None)
        if refused:
            out[ui.save_t_md] = f"**Not offered for saving:** {esc(refused)}"
        if v.projections:
            layers = v.layers
            last = layers[-1]
            out[ui.geometry_box] = gr.update(visible=True)
            out[ui.layer] = gr.update(minimum=layers[0], maximum=last, value=last)
            out[ui.scatter] = evaluate_view.scatter_figure(v, last, 2, "true", "cls")
            out[ui.probes] = evaluate_view.probes_figure(v, last)
            out[ui.dims], out[ui.colour], out[ui.vector] = 2, "true", "cls"
        else:
            out[ui.geometry_box] = gr.update(visible=False)
            out[ui.scatter] = plots.empty_figure("No geometry in this evaluation.")
            out[ui.probes] = plots.empty_figure("No geometry in this evaluation.")
        out[ui.compare_box] = gr.update(visible=bool(v.comparison))
        out[ui.comparison] = evaluate_view.comparison_md(v)
        out[ui.disagreements] = evaluate_view.disagreement_frame(v)
        out[ui.compare_slices] = evaluate_view.comparison_frame(v)
        return out

    def save_refused(self, v: RunView) -> str | None:
        """Why Save temperature would refuse the shown evaluation's model, read without loading it (None: it
        would not): on a shared app a model that is not the visitor's own run; a Hub model, which has no folder
        here (a name that is neither listed nor a folder). The button is offered only where this is None."""
        name = str(v.metrics.get("model") or "")
        if self.settings.public and not (visitors.is_run_name(name) and visitor.owner() is not None):
            return shared_model_why(name)
        listed = {m["name"] for m in core.list_models(self.settings.models_dir)}
        if name not in listed and not Path(name).expanduser().is_dir():
            return hub_model_why(name)
        return None

    def save_temperature(self, v: RunView | None) -> str:
        """The temperature the shown evaluation fitted, saved into its model's folder (calibration.json),
        which Predict applies at once; refused, with the reason, when it did not help on the rows it was
        measured on. Public mode: only into the visitor's own runs (a shared model's
        probabilities are every visitor's)."""
        if v is None:
            raise core.InputError("Evaluate a file (or open a stored evaluation) first.")
        calib, name = v.metrics.get("calibration") or {}, str(v.metrics.get("model") or "")
        helps, why = evaluate_view.temperature_judgement(v)
        if not helps:  # the button is hidden then; an old page or a direct call still gets the reason
            raise core.InputError(why if calib.get("temperature") is None else f"This temperature is not saved: {why}")
        if self.settings.public and not (visitors.is_run_name(name) and visitor.owner() is not None):
            raise core.InputError(shared_model_why(name))
        if self.settings.public:
            visitors.check_access(name, visitor.owner(), Path(self.settings.models_dir) / "runs")
        lm = model_loading.load(name, self.default, self.settings)
        if lm.source == "hub":
            raise core.InputError(hub_model_why(name))
        rows, source = calib.get("fitted_on_rows") or 0, v.metrics.get("source") or "a file"
        core.save_evaluated_temperature(lm.path, calib, f"evaluate: {rows:,} rows of {source} ({v.name})")
        lm.temperature = float(calib["temperature"])  # the loaded model: Predict applies it from the next text
        return (f"Saved **T = {lm.temperature:.3f}** in {esc(shown_name(name))}'s calibration.json: Predict applies "
                "it from now on (**Show raw probabilities** gives the model's own softmax).")

    def open_stored(self, name):
        if not visitor.ready():
            raise core.InputError("This page has no owner token yet: reload the page, then open it again.")
        folder = evaluation_runs.open_evaluation(self.settings.models_dir, name, visitor.owner())
        out = self.render(folder, folder.name)
        out[self.ui.status] = f"Opened **{esc(folder.name)}**."
        return out

    def restore_run(self, name):
        """A link's evaluation (``tab=evaluate&run=<name>``, set by the page's link on load): drawn as Open
        draws it. One that is not the visitor's, or no longer stored, is said in the status line (the
        page was only opened: no error badge)."""
        if not name:
            return {self.ui.status: gr.skip()}
        try:
            out = self.open_stored(name)
        except core.BertvizError as exc:
            return {self.ui.status: f"**From the link:** {esc(exc)}"}
        out[self.ui.stored] = gr.update(choices=self.choices(), value=name)
        return out

    def choices(self) -> list[tuple[str, str]]:
        return evaluate_view.stored_choices(evaluation_runs.list_evaluations(self.settings.models_dir,
                                                                             visitor.owner()))

    def refresh(self, chosen=None, model_name=None):
        """The stored list and the compare-with choices for the chosen model (page load: the visitor's own)."""
        ui = self.ui
        if not visitor.ready():
            return dict.fromkeys([ui.stored, ui.compare, *self.head_outputs()], gr.skip())
        try:
            choices = self.choices()
        except OSError:
            choices = []
        names = [v for _, v in choices]
        return {ui.stored: gr.update(choices=choices, value=chosen if chosen in names else None),
                **self.suggest(model_name, suggest_base=False)}

    def compare_options(self, lm: core.LoadedModel) -> tuple[list[tuple[str, str]], str]:
        """(choices, note) of the compare-with control for ``lm``: the listed models with its head and its
        classes (a tagger: its tags), read from each folder's config.json, nothing loaded; never ``lm`` itself;
        the note names the ones left out and why, so no choice is offered that the evaluation would refuse. A question
        answering model: the other question answering models (a span head has no classes; its family and training may
        differ)."""
        own = Path(lm.path).resolve()
        tagger, reader = lm.head is TOKEN_CLASSIFICATION, lm.head is QUESTION_ANSWERING
        keep, other, multi, itself, heads = [], [], [], [], {}
        for m in visitor.visible(core.list_models(self.settings.models_dir)):
            if not m["built"] or not m["path"]:
                continue
            if Path(m["path"]).resolve() == own:
                itself.append(m["name"])
                continue
            head = folder_head(m["path"])
            if head not in (lm.head, None):  # a tagger beside a classifier, the reverse, a question answerer...
                heads.setdefault(head, []).append(m["name"])
                continue
            if reader:  # any span reader answers the same questions; a folder whose head is not known is not offered
                (keep if head is QUESTION_ANSWERING else other).append(m["name"])
                continue
            labels = core.folder_labels(m["path"])
            if labels is None or set(labels) != set(lm.labels):
                other.append(m["name"])
            elif not tagger and core.folder_multi_label(m["path"]):  # evaluate reads single-label classifiers only
                multi.append(m["name"])
            else:
                keep.append(m["name"])
        if reader:
            note = "another question answering model, on the same questions (optional)"
        elif tagger:
            note = f"another tagger with the tags {', '.join(lm.labels)}, on the same sentences (optional)"
        else:
            note = f"another model with the classes {', '.join(lm.labels)}, on the same rows (optional)"
        left = [(names, why) for names, why in (
            *((names, head_kind(head)) for head, names in heads.items()),
            (other, "head not known" if reader else "other tags" if tagger else "other classes"),
            (multi, "multi-label"),
            (itself[:1], "the model evaluated")) if names]
        if left:
            note += ". Not listed: " + "; ".join(
                ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "") + f" ({why})"
                for names, why in left)
        return [*NO_COMPARE, *[(shown_name(n), n) for n in keep]], note + "."

    def head_outputs(self) -> list:
        """What ``model_state`` sets: Evaluate's button and the line under it, and what follows the model's head
        (the upload's label and hint, the table's columns, the geometry switch, the words box)."""
        ui = self.ui
        return [ui.start, ui.model_note, ui.upload, ui.file_hint, ui.columns_row, ui.geometry, ui.words]

    def head_state(self, lm: core.LoadedModel) -> dict:
        """The controls that follow the head: a tagger's file is tagged words (no columns to choose, no [CLS]
        geometry: it reads every token), a classifier's a table of texts and labels, a question answering model's
        questions with their contexts and answers (no columns, no geometry, and no slice words: its slices are
        fixed)."""
        ui, et, er = self.ui, evaluate_tagger, evaluate_reader
        if lm.head is QUESTION_ANSWERING:
            return {ui.upload: gr.update(label=er.READER_UPLOAD), ui.file_hint: er.READER_FILE,
                    ui.columns_row: gr.update(visible=False), ui.geometry: gr.update(visible=False, value=False),
                    ui.words: gr.update(visible=False)}
        tagger = lm.head is TOKEN_CLASSIFICATION
        return {ui.upload: gr.update(label=et.TAGGER_UPLOAD if tagger else et.CLASSIFIER_UPLOAD),
                ui.file_hint: et.TAGGER_FILE if tagger else et.CLASSIFIER_FILE,
                ui.columns_row: gr.update(visible=not tagger),
                ui.geometry: gr.update(visible=not tagger, **({"value": False} if tagger else {})),
                ui.words: gr.update(visible=True,
                                    label="Slice by sentences containing" if tagger else "Slice by rows containing")}

    def model_state(self, name: str | None, lm: core.LoadedModel | None = None,
                    exc: BaseException | None = None) -> dict:
        """Evaluate's button for the chosen model: offered for a single-label classifier, a tagger or a question
        answering model that opens; else greyed, with the line under it saying why (the evaluation would refuse it:
        ``evaluate``). With a model that opens, the controls that follow its head (``head_state``)."""
        ui, shown = self.ui, esc(shown_name((name or "").strip() or self.default))
        if exc is not None:
            why = f"**{shown} cannot be opened**, so it cannot be evaluated: {esc(exc)} Choose another model in " \
                  "the Model tab."
        elif lm is not None and lm.head not in EVALUATED:
            why = f"**{shown} is {esc(head_kind(lm.head))}:** an evaluation reads sequence classifiers (a labelled " \
                  "table), taggers (a tagged file) and question answering models (a SQuAD file). Choose another " \
                  "model in the Model tab."
        elif lm is not None and lm.multi_label:
            why = f"**{shown} is a multi-label model:** an evaluation reads single-label classifiers only (one " \
                  "class per row, softmax outputs). Choose another model in the Model tab."
        else:
            return {ui.start: gr.update(interactive=True), ui.model_note: "",
                    **(self.head_state(lm) if lm is not None else {})}
        return {ui.start: gr.update(interactive=False), ui.model_note: why}

    def suggest(self, model_name, suggest_base: bool = True):
        """The compare-with control for the chosen model (``compare_options``), set to its base when it is a
        fine-tuned run whose base has the same classes (the before/after pair); else to none. A model that
        cannot be opened here offers no comparison."""
        ui = self.ui
        try:
            lm = model_loading.load(model_name, self.default, self.settings)
        except core.BertvizError as exc:
            return {ui.compare: gr.update(choices=NO_COMPARE, value=NONE,
                                          info="another model with the same classes (choose a model that opens)"),
                    **self.model_state(model_name, exc=exc)}
        choices, note = self.compare_options(lm)
        base = core.base_of(lm) if suggest_base else None
        if base is not None and base not in [v for _, v in choices]:
            # a base the list does not hold (a folder, a Hub id): offered when it opens with the run's classes
            try:
                other = load_base(base, self.default, self.settings) if base != core.ENCODER else None
                ok = other is not None and other.head is lm.head and (lm.head is QUESTION_ANSWERING or (
                    not other.multi_label and set(other.labels) == set(lm.labels)))
            except core.BertvizError:
                ok = False
            if ok:
                choices.append((shown_name(base), base))
        value = base if base in [v for _, v in choices] else NONE
        return {ui.compare: gr.update(choices=choices, value=value, info=note), **self.model_state(model_name, lm)}

    # ---------------------------------------------------------------- choosing rows
    def on_slice(self, v: RunView | None, evt: gr.SelectData):
        ui = self.ui
        i = evaluate_view.pick_slice(v, evt.row_value)
        if i is None:
            return {ui.slice_md: "", ui.slice_rows: rows_table([])}
        s = v.slices[i]
        rows = evaluate_view.slice_rows(v, i)
        shown = "" if len(rows) <= evaluate_view.MAX_LISTED else f" the {evaluate_view.MAX_LISTED:,} most confident"
        md = (f"**{esc(s['name'])}**: {s['size']:,} rows, {len(rows):,} misclassified"
              + (f" (listed below{shown}, most confident first; select one to open it)." if rows else "."))
        return {ui.slice_md: md, ui.slice_rows: rows_table(rows, v.pairs)}

    def on_row(self, v: RunView | None, evt: gr.SelectData):
        ui = self.ui
        r = evaluate_view.pick_row(v, evt.row_value)
        if r is None:
            return {ui.selected: None, ui.selected_md: ""}
        return {ui.selected: r, ui.selected_md: f"Selected row {r['row']}: true **{esc(r['true'])}**, predicted "
                f"**{esc(r['predicted'])}** ({r['confidence']:.1%})."}

    def send(self, r: dict | None, tab: str):
        """The row's text (and second text) in the Predict tab's boxes, and ``tab`` opened (a handler's
        tab change fires no select event: the page link's tab is set here too)."""
        if not r:
            raise core.InputError("Select a row of a table first (or click a point of the geometry).")
        out = {self.predict_text: r["text"], self.predict_pair: r.get("pair") or "", self.tabs: gr.Tabs(selected=tab)}
        if self.link_tab is not None:
            out[self.link_tab] = tab
        return out

    def to_predict(self, r):
        return self.send(r, "predict")

    def to_attributions(self, r, open_tab: dict | None = None):
        """The row to the Attributions tab, which the page's ``open_tab`` (changed in place, as the page's
        own tab events change it) now names, so the Analyze that follows draws that tab for this row."""
        out = self.send(r, "attributions")
        if isinstance(open_tab, dict):
            open_tab["tab"] = "attributions"
        return out

    def on_answer_row(self, rows: list[dict] | None, evt: gr.SelectData):
        """A wrong answer's row clicked (a question answering model's evaluation): its question in Predict's Question
        box and its context in the Context box, the Predict tab opened (Analyze then highlights the model's answer).
        A click that points at no listed answer (a stale page) changes nothing."""
        r = evaluate_reader.pick_error(rows, evt.row_value, evt.index[0] if isinstance(evt.index, list) else None)
        if r is None:
            skip = [self.predict_text, self.predict_pair, self.tabs, *([self.link_tab] if self.link_tab else [])]
            return dict.fromkeys(skip, gr.skip())
        return self.send(r, "predict")

    def on_point(self, v: RunView | None, value):
        """A point of the scatter clicked: its row opened in Predict."""
        index = figures.clicked_value(value)
        if v is None or index is None or not index.isdigit() or int(index) >= len(v.rows):
            skip = [self.predict_text, self.predict_pair, self.tabs, *([self.link_tab] if self.link_tab else [])]
            return dict.fromkeys(skip, gr.skip())
        return self.send(v.rows[int(index)], "predict")

    # ---------------------------------------------------------------- geometry, from the loaded folder
    def redraw_geometry(self, v: RunView | None, layer, dims, colour, vector):
        ui = self.ui
        if v is None or not v.projections:
            return {ui.scatter: gr.skip(), ui.probes: gr.skip()}
        return {ui.scatter: evaluate_view.scatter_figure(v, int(layer), int(dims or 2), colour or "true",
                                                         vector or "cls"),
                ui.probes: evaluate_view.probes_figure(v, int(layer))}
