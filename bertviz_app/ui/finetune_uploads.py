"""The Fine-tune tab's intake: a training or validation upload read by each head's reader (a classifier's table, a
tagger's tagged sentences, a reader's questions), the task set from what read it (or the user's pick), and the
fields that task needs shown. ``UploadHandlers`` holds the intake's event handlers (``finetune_tab.Handlers`` is
one); ``wire_intake`` connects them. The readers' words and the pure helpers are ``finetune_view``'s,
``finetune_tagger``'s and ``finetune_reader``'s."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pandas as pd

import bertviz_app as core

from . import finetune_reader as reader
from . import finetune_tagger as tagger
from . import guards, visitor
from .finetune_view import core_train_help, read_upload, refusal, report_md, table_notes
from .markup import esc

__all__ = ["AUTO", "EMPTY_PREVIEW", "NONE", "NOT_USED", "NO_PAIR", "PREVIEW_ROWS", "UploadHandlers", "wire_intake"]

NONE = ""  # the "no second text" choice of the pair dropdown
PREVIEW_ROWS = 10
AUTO = "blank = automatic (from the data size)"
EMPTY_PREVIEW = pd.DataFrame(columns=["row"])  # the preview before a file is read
NO_PAIR = [("(none)", NONE)]
NOT_USED = [("(not used by a tagger)", NONE)]  # the column fields' one choice while a tagged file is shown
NOT_USED_BY_READER = [("(not used by a reader)", NONE)]  # ... and while a question answering file is shown
HEAD_NOTES = {tagger.TOKEN: (tagger.MODE_NOTE, tagger.MAX_LEN_NOTE), reader.QUESTION: (reader.MODE_NOTE,
                                                                                        reader.MAX_LEN_NOTE)}


class UploadHandlers:
    """The intake's event handlers; the class that mixes them in holds ``f`` (the tab's components) and
    ``settings`` (the server's)."""

    f: SimpleNamespace
    settings: core.Settings

    # ---------------------------------------------------------------- the training file
    def on_upload(self, path, note: guards.Refusal | None = None, pick: str | None = None):
        """A training file: read it, guess the columns, show the preview and the report. A file refused with
        an error (not an upload, over the quota: raised on, so an API caller gets it) is noted in ``note``
        for ``after_upload``; one that cannot be read is the ``refused`` state's message. The file is also read
        as tagged sentences (a tagger's) and as questions (a reader's), and the task set from what read it
        (``pick``: the user's choice)."""
        if note is not None:
            note.message = ""
        try:
            return self.read_training_file(path, pick)
        except Exception as exc:
            if note is not None:
                note.message = guards.upload_refused(path, exc, logged=False)
            raise

    def after_upload(self, refused, note: guards.Refusal, status, task=tagger.SEQUENCE, tagged_refused=None,
                     qa_refused=None):
        """After each training upload (page only): a refused file is cleared from the File component, so it
        does not look uploaded, and the status line says why and what to fix (no "Error" badge is left: this
        event touches the upload's outputs); a good file clears an earlier refusal from that line. The task
        control and the fields shown follow the task the file was read for (``task``)."""
        f = self.f
        refused = {tagger.TOKEN: tagged_refused, reader.QUESTION: qa_refused, tagger.SEQUENCE: refused}.get(task)
        why = note.message or (f"**Error:** {esc(refused)}" if refused else "")
        out = self.task_view(task) if not note.message else {}
        if why:
            return {**out, f.upload: None, f.status: why}
        return {**out, f.status: "" if str(status or "").startswith("**Error:**") else gr.skip()}

    def task_view(self, task: str | None) -> dict:
        """The task control set to ``task``; a tagger's or a reader's: the classifier's column fields hidden, the mode
        fixed at full and max length greyed, each saying why."""
        f = self.f
        if task in HEAD_NOTES:
            mode_note, max_len_note = HEAD_NOTES[task]
            # "hidden", not False: a component gradio unmounts keeps sending the value it had (a table's label
            # column), which gradio then refuses at Start as not among the choices set since
            return {f.task: gr.update(value=task), f.columns: gr.update(visible="hidden"),
                    f.mode: gr.update(value="full", interactive=False, info=mode_note),
                    f.max_len: gr.update(interactive=False, value="", info=max_len_note)}
        return {f.task: gr.update(value=task), f.columns: gr.update(visible=True),
                f.mode: gr.update(interactive=True, info=None),
                f.max_len: gr.update(interactive=True, info=f"{core_train_help('max_length')} {AUTO}")}

    def on_task(self, task, table, tagged, refused, tagged_refused, status, qa=None, qa_refused=None):
        """The user picked the task: the file shown as that task reads it (every reading was made on upload), the
        fields it needs shown, the pick kept for the next upload that more than one task could read."""
        f = self.f
        if task == tagger.TOKEN:
            out, why = self.tagged_outputs(tagged, tagged_refused), tagged_refused
        elif task == reader.QUESTION:
            out, why = self.questions_outputs(qa, qa_refused), qa_refused
        else:
            out, why = self.table_outputs(table, None, None, refused), refused
        out.update(self.task_view(task))
        out.update({f.task_now: task, f.task_pick: task,
                    f.status: f"**Error:** {esc(why)}" if why else
                    "" if str(status or "").startswith("**Error:**") else gr.skip()})
        return out

    def read_training_file(self, path, pick: str | None = None):
        f = self.f
        visitor.upload(path)  # public mode: counted, and deleted once read
        try:
            table, guess, notes, refused = read_upload(path, self.settings)
            tagged, tagged_refused = tagger.read_tagged_upload(path, self.settings)
            qa, qa_refused = reader.read_squad_upload(path, self.settings)
            meant = qa is None and reader.looks_meant(path)  # a question answering file the reader refused
        finally:
            visitor.discard(path)
        if qa is not None:  # the other tasks say what it holds (a SQuAD CSV is also a table a classifier reads)
            tagged_refused = reader.other_task_refusal(path, qa)
            refused = refused if table is not None else tagged_refused
        elif qa_refused and not meant and (table is not None or tagged is not None):  # another task's file
            qa_refused = reader.not_questions(qa_refused, table, tagged)
        task = reader.choose_task(table, tagged, qa, refused, pick, path, meant)
        if task == tagger.TOKEN:
            out = self.tagged_outputs(tagged, tagged_refused)
        elif task == reader.QUESTION:
            out = self.questions_outputs(qa, qa_refused)
        else:
            out = self.table_outputs(table, guess, notes, refused)
        if task is None:  # both tasks read it: the user chooses
            out[f.notices] = tagger.CHOOSE + "  \n" + out[f.notices]
        out.update({f.table: table, f.refused: refused, f.tagged: tagged, f.tagged_refused: tagged_refused,
                    f.qa: qa, f.qa_refused: qa_refused, f.task_now: task})
        return out

    def not_used(self, choices) -> dict:
        """The classifier's column fields (hidden, ``task_view``) with one choice, "not used": a page whose dropdown
        was emptied (choices [], value None) went on sending its old value, which gradio then refused at Start as not
        among the choices."""
        f = self.f
        # one update each: gradio takes the value out of an update it applies, so a shared one left the label
        # column's old value in place
        return {f.text_col: gr.update(choices=choices, value=NONE), f.label_col: gr.update(choices=choices, value=NONE),
                f.pair_col: gr.update(choices=NO_PAIR, value=NONE), f.multi: False}

    def tagged_outputs(self, tagged, tagged_refused) -> dict:
        """The upload's outputs for a tagger: what was read (sentences, entities per type, the scheme) or why
        not; the classifier's column fields "not used"."""
        f = self.f
        out = self.not_used(NOT_USED)
        if tagged is None:
            out.update({f.notices: f"**Error:** {esc(tagged_refused)}" if tagged_refused else "",
                        f.preview: EMPTY_PREVIEW, f.report: ""})
        else:
            out.update({f.notices: tagger.summary_md(tagged), f.preview: tagger.preview_frame(tagged),
                        f.report: tagger.report_md(tagged)})
        return out

    def questions_outputs(self, qa, qa_refused) -> dict:
        """The upload's outputs for a reader: what was read (questions, contexts, answerable and unanswerable, the
        answers checked at their offsets) or why not; the classifier's column fields "not used"."""
        f = self.f
        out = self.not_used(NOT_USED_BY_READER)
        if qa is None:
            out.update({f.notices: f"**Error:** {esc(qa_refused)}" if qa_refused else "", f.preview: EMPTY_PREVIEW,
                        f.report: ""})
        else:
            out.update({f.notices: reader.summary_md(qa), f.preview: reader.preview_frame(qa),
                        f.report: reader.report_md(qa)})
        return out

    def table_outputs(self, table, guess, notes, refused) -> dict:
        """The upload's outputs for a classifier: the notices, the preview, the columns guessed and the report
        (``guess``/``notes`` None: made again from ``table``), or why the table was refused."""
        f = self.f
        if table is not None and guess is None:
            guess = core.guess_columns(table)
            notes = table_notes(table, guess)
        if table is None and notes is None:
            notes = f"**Error:** {esc(refused)}" if refused else ""
        if table is None:
            # one update each: gradio takes the value out of an update it applies (a shared one left the label
            # column's old value on the page, sent at Start and refused as not among the choices)
            return {f.notices: notes, f.preview: EMPTY_PREVIEW, f.text_col: gr.update(choices=[], value=None),
                    f.label_col: gr.update(choices=[], value=None),
                    f.pair_col: gr.update(choices=NO_PAIR, value=NONE), f.multi: False,
                    f.report: ""}
        cols = list(table.columns)
        return {
            f.notices: notes,
            f.preview: table.preview(PREVIEW_ROWS),
            f.text_col: gr.update(choices=cols, value=guess.text),
            f.label_col: gr.update(choices=cols, value=guess.label),
            f.pair_col: gr.update(choices=[*NO_PAIR, *[(c, c) for c in cols]], value=guess.pair or NONE),
            f.multi: False,
            f.report: report_md(table, guess.text, guess.label, guess.pair, False, self.settings),
        }

    def on_mapping(self, table, text_col, label_col, pair_col, multi_label):
        """The columns changed: the report again."""
        return report_md(table, text_col, label_col, pair_col, multi_label, self.settings)

    # ---------------------------------------------------------------- the validation file
    def on_val_upload(self, path, task=tagger.SEQUENCE):
        """A validation file: its table, refusal and notices (and, for a tagger, its tagged sentences; for a reader,
        its questions). A file the task cannot read is cleared from the File component and the status line says why
        and what to fix. The reader's reading is made for its task only (``after_val_upload`` forgets it when a
        file is read for another task)."""
        f = self.f
        if not path:
            return {f.val_table: None, f.val_refused: None, f.val_tagged: None, f.val_tagged_refused: None,
                    f.val_qa: None, f.val_qa_refused: None, f.notices: ""}
        tagged, tagged_refused, qa = None, None, None
        try:
            visitor.upload(path)
            try:
                tagged, tagged_refused = tagger.read_tagged_upload(path, self.settings, "validation file")
                if task == reader.QUESTION:
                    qa = reader.read_squad_upload(path, self.settings, "validation file")
                t = core.read_table(path, max_upload_mb=self.settings.max_upload_mb, max_rows=self.settings.max_rows)
            finally:
                visitor.discard(path)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge (upload_refused logs the unexpected)
            why = guards.upload_refused(path, exc)
            out = {f.val_table: None, f.status: why, f.val_tagged: tagged, f.val_tagged_refused: tagged_refused,
                   f.val_refused: refusal(path, exc, "validation file") if isinstance(exc, core.DataError) else None,
                   f.notices: f"**Error in the validation file:** {esc(exc)}" if isinstance(exc, core.DataError)
                   else why}
            if qa is not None and isinstance(exc, core.DataError):  # a reader's: its questions decide
                return self.val_questions(out, qa)
            if tagged is None or not isinstance(exc, core.DataError):  # neither task reads it
                if task == tagger.TOKEN and tagged_refused:
                    out.update({f.status: f"**Error:** {esc(tagged_refused)}",
                                f.notices: f"**Error in the validation file:** {esc(tagged_refused)}"})
                return {**out, f.val_upload: None}
            return {**out, f.status: gr.skip(), f.notices: self.val_tagged_notes(tagged)}
        out = {f.val_tagged: tagged, f.val_tagged_refused: tagged_refused}
        if qa is not None:
            return self.val_questions({**out, f.val_table: t, f.val_refused: None}, qa)
        if task == tagger.TOKEN:
            return {**out, f.val_table: t, f.val_refused: None,
                    f.notices: self.val_tagged_notes(tagged) if tagged is not None else
                    f"**Error in the validation file:** {esc(tagged_refused)}"}
        notes = [f"Validation file **{esc(t.name)}**: {t.n_rows:,} rows."]
        notes += [f"Note: {esc(n)}" for n in t.notices]
        return {**out, f.val_table: t, f.val_refused: None, f.notices: "  \n".join(notes)}

    def val_questions(self, out: dict, qa) -> dict:
        """``on_val_upload``'s outputs for a reader (``qa``: ``read_squad_upload``'s pair): its questions kept, or the
        file cleared with the reader's refusal (the other tasks' readings forgotten with it)."""
        f = self.f
        questions, why = qa
        if questions is None:
            return {**out, f.val_table: None, f.val_refused: None, f.val_tagged: None, f.val_tagged_refused: None,
                    f.val_qa: None, f.val_qa_refused: why, f.val_upload: None, f.status: f"**Error:** {esc(why)}",
                    f.notices: f"**Error in the validation file:** {esc(why)}"}
        return {**out, f.val_qa: questions, f.val_qa_refused: None, f.status: gr.skip(),
                f.notices: reader.val_notes(questions)}

    @staticmethod
    def after_val_upload(task):
        """After each validation upload (page only): the reader's reading of the validation file kept only when it
        was read for the reader (a file read for another task has none; a Start as a reader then asks for it
        again)."""
        return (gr.skip(), gr.skip()) if task == reader.QUESTION else (None, None)

    @staticmethod
    def val_tagged_notes(tagged) -> str:
        notes = [f"Validation file **{esc(tagged.name)}**: {len(tagged.sentences):,} tagged sentences "
                 f"({esc(tagged.format)}, {esc(tagged.scheme)})."]
        return "  \n".join(notes + [f"Note: {esc(n)}" for n in tagged.notices])


def wire_intake(f: SimpleNamespace, h: UploadHandlers) -> None:
    """The training and validation uploads, the task control and the column fields."""
    # .upload and .clear, not .change: clearing a refused file (after_upload) must not run the handler again
    upload_outputs = [f.table, f.refused, f.notices, f.preview, f.text_col, f.label_col, f.pair_col, f.multi, f.report,
                      f.tagged, f.tagged_refused, f.task_now, f.qa, f.qa_refused]  # the API's: the visible ones
    task_outputs = [f.task, f.columns, f.mode, f.max_len]
    gr.on([f.upload.upload, f.upload.clear], guards.guard(h.on_upload),
          trigger_mode="always_last",  # a file put in while the last one's clear runs is read too
          inputs=[f.upload, f.upload_note, f.task_pick],
          outputs=upload_outputs, api_name="finetune_upload", api_visibility="undocumented",
          concurrency_limit=2).then(h.after_upload, inputs=[f.refused, f.upload_note, f.status, f.task_now,
                                                            f.tagged_refused, f.qa_refused],
                                    outputs=[*upload_outputs, *task_outputs, f.upload, f.status],
                                    api_visibility="private", queue=False, show_progress="hidden")
    f.task.input(h.on_task, inputs=[f.task, f.table, f.tagged, f.refused, f.tagged_refused, f.status, f.qa,
                                    f.qa_refused],
                 outputs=[*upload_outputs, *task_outputs, f.task_pick, f.status], api_visibility="private",
                 queue=False, show_progress="hidden")
    gr.on([f.text_col.input, f.label_col.input, f.pair_col.input, f.multi.input], guards.guard(h.on_mapping),
          inputs=[f.table, f.text_col, f.label_col, f.pair_col, f.multi], outputs=f.report,
          api_name="finetune_report", api_visibility="undocumented", trigger_mode="always_last",
          show_progress="minimal")
    gr.on([f.val_upload.upload, f.val_upload.clear], guards.guard(h.on_val_upload),
          trigger_mode="always_last",  # a file put in while the last one's clear runs is read too
          inputs=[f.val_upload, f.task_now],
          outputs=[f.val_table, f.val_refused, f.notices, f.val_upload, f.status, f.val_tagged, f.val_tagged_refused,
                   f.val_qa, f.val_qa_refused],
          api_visibility="private", concurrency_limit=2).then(h.after_val_upload, inputs=[f.task_now],
                                                              outputs=[f.val_qa, f.val_qa_refused],
                                                              api_visibility="private", queue=False,
                                                              show_progress="hidden")
