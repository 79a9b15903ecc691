"""Explain-a-file tab: upload a table, pick its text column and the attribution methods, explain
every row (``core.explain_csv`` in a worker thread, progress streamed, cancel), download the
results, read each method's mean faithfulness and seconds per text, and the per-class table of the
words with the largest mean attribution. Event wiring and rendering only: each event's handler is
a method of ``Handlers``, which holds the tab's components and the server's ``Settings``.

It reads sequence classifiers: for a tagger chosen in the Model tab, Start is greyed with a line saying why and
where a tagger's entities are explained (``Handlers.model_state``, run when the model changes and on page load)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pandas as pd

import bertviz_app as core
from bertviz_app.interpret.export import prune
from bertviz_app.models.heads import SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION

from . import attribution_tab, guards, model_loading, streaming, visitor
from .control_values import METHOD_LABELS
from .finetune_view import shown_name
from .markup import esc
from .streaming import CancelFlag

NONE = "(none)"
# (label, value) of the methods a table can be explained with (core.explain_csv's short names)
METHOD_CHOICES = [(METHOD_LABELS["integrated_gradients" if m == "ig" else m], m) for m in core.BATCH_METHODS]


def build(*, settings: core.Settings | None = None) -> SimpleNamespace:
    """The tab's components (``settings`` is accepted like the other tabs' builders; the layout needs none)."""
    gr.Markdown("Explain every row of a table: the prediction, each chosen method's attribution of every word "
                "(Integrated Gradients: steps chosen for a relative delta of at most 5%), its faithfulness "
                "(comprehensiveness: how much the probability drops without the top-ranked words, higher is better; "
                "sufficiency: how much it drops with only them, lower is better) and seconds, and per class the words "
                "with the largest mean attribution. Rows whose text cannot be analysed are kept in the results with "
                "the reason; a row too long for occlusion, KernelSHAP or LIME gets the reason in that method's cells. "
                "The results file keeps every column of the table as given, in order, and adds its own columns after "
                "them, named `bv_…` (`bv_prediction`, `bv_p_<class>`, `bv_ig_top_words`…; "
                "`_2` is appended when the "
                "table already has that name). "
                "The same as `python -m bertviz_app explain-csv FILE --out results.csv --methods ig,occlusion`.")
    with gr.Row():
        upload = gr.File(label="Table (.csv, .tsv, .txt) with a header row", file_types=[".csv", ".tsv", ".txt"],
                         type="filepath", elem_id="bv-bx-upload", scale=2)
        with gr.Column(scale=2):
            text_col = gr.Dropdown(choices=[], label="Text column", elem_id="bv-bx-text-col")
            pair_col = gr.Dropdown(choices=[NONE], value=NONE, label="Second text column (sentence pairs)")
            fmt = gr.Radio(["csv", "jsonl"], value="csv", label="Results file",
                           info="csv: one row per input row; jsonl: every word's score")
            raw = gr.Checkbox(False, label="Raw CSV (no ' before cells starting with = + - @)", elem_id="bv-bx-raw",
                              info="the CSV shows such cells with a leading ' so a spreadsheet does not run them as "
                                   "formulas (the status lists them); raw writes them exactly as given. The JSONL is "
                                   "always as given")
    methods = gr.CheckboxGroup(METHOD_CHOICES, value=["ig"], label="Methods", elem_id="bv-bx-methods",
                               info="occlusion, KernelSHAP and LIME run many passes per row: slower")
    with gr.Row():
        start = gr.Button("Explain every row", variant="primary", elem_id="bv-bx-start")
        cancel = gr.Button("Cancel", variant="stop", elem_id="bv-bx-cancel")
    model_note = gr.Markdown(elem_id="bv-bx-model-note")  # why Start is greyed for the chosen model
    status = gr.Markdown(elem_id="bv-bx-status")
    result = gr.File(label="Results", interactive=False, elem_id="bv-bx-file", height=90)
    words = gr.Dataframe(value=words_frame(None), label="Words with the largest mean attribution towards each class "
                                                        "(at least 2 occurrences)",
                         interactive=False, elem_id="bv-bx-words")
    return SimpleNamespace(upload=upload, text_col=text_col, pair_col=pair_col, fmt=fmt, raw=raw, methods=methods,
                           start=start, cancel=cancel, model_note=model_note, status=status, result=result, words=words,
                           flag=gr.State(CancelFlag()))


def on_upload(path: str | None, settings: core.Settings | None = None):
    """Column choices from the uploaded table, the text column guessed; a bad file says why.
    ``settings``: the upload limits (default ``Settings()``)."""
    if not path:
        return gr.update(choices=[], value=None), gr.update(choices=[NONE], value=NONE), ""
    settings = settings if settings is not None else core.Settings()
    visitor.upload(path)  # public mode: counted (the file is deleted once explained)
    table = core.read_table(path, min_columns=1, max_upload_mb=settings.max_upload_mb, max_rows=settings.max_rows)
    guess = core.guess_columns(table)
    cols = list(table.columns)
    msg = f"**{esc(table.name)}**: {table.n_rows:,} rows, {len(cols)} columns. Check the text column, then start."
    msg += "".join(f"  \nNote: {esc(n)}" for n in table.notices)
    return (gr.update(choices=cols, value=guess.text), gr.update(choices=[NONE, *cols], value=guess.pair or NONE), msg)


def words_frame(res: core.BatchExplanation | None) -> pd.DataFrame:
    """Per class (and per method, when there are several) the words with the largest mean attribution;
    no result: the table's headers alone (an empty gradio table would show placeholder headers)."""
    tables = {} if res is None else res.method_top_words or {res.methods[0]: res.top_words}
    rows = [{"method": method, "class": c, "word": w, "mean attribution": round(m, 4), "rows": n}
            for method, table in tables.items() for c, ws in table.items() for w, m, n in ws]
    cols = ["method", "class", "word", "mean attribution", "rows"]
    frame = pd.DataFrame(rows, columns=cols)
    return frame if len(tables) > 1 else frame.drop(columns="method")


def methods_md(res: core.BatchExplanation) -> str:
    """Each method's mean faithfulness and cost, as a Markdown table."""
    names = dict((v, k) for k, v in METHOD_CHOICES)
    lines = ["| method | rows | mean comprehensiveness (higher: more faithful) | mean sufficiency (lower: more "
             "faithful) | seconds per text | + faithfulness |", "|---|---|---|---|---|---|"]
    num = lambda x, f: "–" if x is None else format(x, f)  # noqa: E731
    for m, st in res.method_stats.items():
        rows = f"{st['explained']:,}" + (f" ({st['refused']:,} refused)" if st["refused"] else "")
        lines.append(f"| {names.get(m, m)} | {rows} | {num(st['mean_comprehensiveness'], '+.3f')} | "
                     f"{num(st['mean_sufficiency'], '+.3f')} | {num(st['seconds_per_text'], '.3f')} | "
                     f"{num(st['faithfulness_seconds_per_text'], '.3f')} |")
    return "\n".join(lines)


def summary_md(res: core.BatchExplanation) -> str:
    lines = [f"**Done:** {res.explained:,} of {res.rows:,} rows explained in {res.seconds:.1f} s "
             f"({res.texts_per_s:.2f} texts/s)."]
    if res.mean_relative_delta is not None:
        lines.append(f"Mean relative delta {res.mean_relative_delta:.3f} (the attributions account for the change "
                     "within that share).")
    if res.skipped:
        shown = "; ".join(f"row {r}: {esc(why)}" for r, why in res.skipped[:5])
        more = f" (and {len(res.skipped) - 5} more)" if len(res.skipped) > 5 else ""
        lines.append(f"**Skipped {len(res.skipped)} rows**, listed in the file: {shown}{more}.")
    lines += [f"Note: {esc(n)}" for n in res.notes]  # what the reader did; which cells the spreadsheet guard changed
    refused = {m: st["refused"] for m, st in res.method_stats.items() if st["refused"]}
    if refused:
        lines.append("Refused as too slow (the reason is in the method's cells; BERTVIZ_MAX_METHOD_SECONDS): "
                     + ", ".join(f"{m} on {n:,} rows" for m, n in refused.items()) + ".")
    out = "  \n".join(lines)
    return out + "\n\n" + methods_md(res) if res.method_stats else out


def _run_folder() -> Path:
    """A fresh folder under the export folder gradio serves from; run folders older than an hour go."""
    root = attribution_tab.export_folder()
    root.mkdir(parents=True, exist_ok=True)
    prune(root, attribution_tab.EXPORT_KEEP_S, "batch-*")
    return Path(tempfile.mkdtemp(prefix="batch-", dir=root))


class Handlers:
    """The tab's event handlers, with what they share: the components ``ui``, the app's default model
    and the server's ``settings``."""

    def __init__(self, ui: SimpleNamespace, *, default: str, settings: core.Settings):
        self.ui, self.default, self.settings = ui, default, settings

    def on_upload(self, path):
        """A refused file (unreadable, too big, a zip renamed .csv...) is cleared from the File component, so
        it does not look uploaded, and the status line says why and what to fix (no toast, no badge)."""
        ui = self.ui
        try:
            return dict(zip((ui.text_col, ui.pair_col, ui.status), on_upload(path, self.settings)))
        except Exception as exc:  # noqa: BLE001 - this is the translation edge (upload_refused logs the unexpected)
            return {ui.upload: None, ui.text_col: gr.update(choices=[], value=None),
                    ui.pair_col: gr.update(choices=[NONE], value=NONE), ui.status: guards.upload_refused(path, exc)}

    def model_state(self, model_name) -> dict:
        """Start for the chosen model: offered for a sequence classifier; greyed for a tagger (a token classifier),
        with the line under it saying why and where the page explains a tagger's entities, and for any other head.
        A model that does not open leaves Start offered (the Model tab says why; a run would say it too)."""
        ui = self.ui
        try:
            lm = model_loading.load(model_name, self.default, self.settings)
        except core.BertvizError:
            lm = None
        if lm is None or lm.head is SEQUENCE_CLASSIFICATION:
            return {ui.start: gr.update(interactive=True), ui.model_note: ""}
        shown = esc(shown_name((model_name or "").strip() or self.default))
        if lm.head is not TOKEN_CLASSIFICATION:  # another head (question answering): no file explanation either
            return {ui.start: gr.update(interactive=False),
                    ui.model_note: f"**{shown} is a {esc(lm.head.name)} model:** Explain a file reads sequence "
                                   "classifiers (each row's class and the words behind it). Choose a sequence "
                                   "classifier in the Model tab to explain a file."}
        return {ui.start: gr.update(interactive=False),
                ui.model_note: f"**{shown} is a tagger (token classification):** Explain a file reads sequence "
                               "classifiers (each row's class and the words behind it). A tagger's entities are "
                               "explained one text at a time: type it in the Predict tab and press Analyze, then "
                               "open Attributions and choose an entity or a word. Choose a sequence classifier in the "
                               "Model tab to explain a file."}

    @staticmethod
    def arm(flag: CancelFlag):
        flag.arm()

    def run(self, flag: CancelFlag, model_name, path, text_col, pair_col, fmt, raw, methods):
        """A refusal (bad file, unknown column, no method...) is the status's message, not a gradio error
        badge: the run is this tab's only output that says what happened."""
        ui = self.ui
        try:
            yield from self.explain(flag, model_name, path, text_col, pair_col, fmt, raw, methods)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge (user_error logs the unexpected)
            yield {ui.status: f"**Error:** {esc(guards.user_error(exc).message)}  \nNo file was written.",
                   ui.result: None, ui.words: words_frame(None)}

    def explain(self, flag: CancelFlag, model_name, path, text_col, pair_col, fmt, raw, methods):
        """Explain every row in a worker thread, the progress streamed; the summary and the file at the end."""
        ui, cancel = self.ui, flag.event
        if not path:
            raise core.InputError("Upload a table first (.csv, .tsv or .txt with a header row).")
        if not methods:
            raise core.InputError("Choose at least one method.")
        yield {ui.status: "**Starting…** opening the model", ui.result: None, ui.words: words_frame(None)}
        lm = model_loading.load(model_name, self.default, self.settings)
        out = _run_folder() / f"explained-{Path(path).stem[:60] or 'table'}.{fmt if fmt in ('csv', 'jsonl') else 'csv'}"
        done = {"n": 0, "total": 0}

        def work():
            return core.explain_csv(
                lm, path, out, text_column=text_col or None, pair_column=None if pair_col in (None, NONE) else pair_col,
                progress=lambda d, n: done.update(n=d, total=n), cancel=cancel, methods=list(methods), raw=bool(raw))

        yield {ui.status: "**Starting…**", ui.result: None, ui.words: words_frame(None)}
        try:  # the page going away (the generator closed) cancels the run; the work is waited for either way
            res = yield from streaming.stream_work(work, lambda: self.progress(done, cancel), on_abandon=cancel.set)
        except core.CancelledError as exc:
            yield {ui.status: f"**Cancelled:** {esc(exc)}"}
            return
        finally:
            visitor.discard(path)  # public mode: the upload is deleted once read
            if flag.event is cancel:
                flag.arm()
        yield {ui.status: summary_md(res), ui.result: visitor.own_file(res.path), ui.words: words_frame(res)}

    def progress(self, done: dict, cancel) -> dict:
        """The status line while rows are explained (``done``: rows so far and in all)."""
        if not done["total"]:
            return {self.ui.status: "**Starting…**"}
        note = " · cancelling after this chunk…" if cancel.is_set() else ""
        return {self.ui.status: f"**Explaining:** {done['n']:,} of {done['total']:,} rows{note}"}

    @staticmethod
    def on_cancel(flag: CancelFlag) -> None:
        """Ask the running explain to stop. It says so itself (its next progress line: "cancelling after
        this chunk", then "Cancelled"): a status written here arrived after a run that stopped at once
        had said "Cancelled", and left the page saying "Cancelling…" for good."""
        flag.event.set()


def wire(ui: SimpleNamespace, model_dd, default: str, *, settings: core.Settings | None = None,
         demo: gr.Blocks | None = None) -> Handlers:
    """Connect the tab's events to ``Handlers``' methods; ``settings``: the server's (default ``Settings()``);
    ``demo``: the page, whose load sets Start for the model it opens with."""
    h = Handlers(ui, default=default, settings=settings if settings is not None else core.Settings())
    # Start follows the chosen model's head (a tagger is greyed, with why): on each model change and page load
    state = dict(inputs=[model_dd], outputs=[ui.start, ui.model_note], api_visibility="private", concurrency_limit=1,
                 concurrency_id="explain-file-model", show_progress="hidden")
    model_dd.change(guards.guard(h.model_state), **state)
    if demo is not None:
        demo.load(guards.guard(h.model_state), **state)
    # .upload and .clear, not .change: clearing a refused file (on_upload) must not run the handler again
    # and wipe the status line that says why
    gr.on([ui.upload.upload, ui.upload.clear], h.on_upload,
          trigger_mode="always_last",  # a file put in while the last one's clear runs is read too
          inputs=[ui.upload],
          outputs=[ui.upload, ui.text_col, ui.pair_col, ui.status], api_visibility="private", concurrency_limit=2)
    ui.start.click(h.arm, inputs=[ui.flag], outputs=None, queue=False, api_visibility="private").then(
        guards.guard_stream(h.run), inputs=[ui.flag, model_dd, ui.upload, ui.text_col, ui.pair_col, ui.fmt, ui.raw,
                                            ui.methods],
        outputs=[ui.status, ui.result, ui.words], api_visibility="private", concurrency_limit=1,
        concurrency_id="explain-file", show_progress_on=[ui.status])
    ui.cancel.click(h.on_cancel, inputs=[ui.flag], outputs=None, api_visibility="private", queue=False)
    return h
