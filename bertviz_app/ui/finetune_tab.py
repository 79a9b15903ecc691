"""Fine-tune tab: upload a labelled table, confirm the columns, train (full, probe or both),
watch the loss and validation curves live, then read the metrics, the verdict (did it learn?),
the confusion matrix and the misclassified rows, compare the new model with its base, and
download or push it. A tagged file trains a tagger and a SQuAD file a reader (question answering) the same way
(``finetune_tagger``, ``finetune_reader``); the intake, every head's upload and the task it sets, is
``finetune_uploads``'.

Layout and event wiring only: the fine-tune chain is the core service (``plan_finetune`` ->
``FinetuneJob``, the same one the CLI runs) and the rendering is ``finetune_view``'s. The job
trains in a worker thread, as the visitor's one job (``FinetuneJobs``: one training at a time, a
second visitor sees their queue position, the same visitor's second Start is refused): it is not
the page's, so a page that goes away leaves it training, and a page opened later follows it. The
streaming handler only reads its events and redraws at most twice a second; its event has its own
concurrency id so the explorer's analyses are not blocked by a long run. Cancel sets the job's
``threading.Event`` (the session's, kept in ``gr.State``, or found by the visitor) and writes
nothing itself; the run says "Cancelling…", stops within a step, still saves the best weights so
far and says "Cancelled".
Each event's handler is a method of ``Handlers``, which holds the tab's components and the
server's ``Settings``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace

import gradio as gr

import bertviz_app as core
from bertviz_app.models.catalog import folder_head
from bertviz_app.models.heads import SEQUENCE_CLASSIFICATION

from . import figures, guards, model_loading, plots, visitor
from . import finetune_reader as reader
from . import finetune_tagger as tagger
from .finetune_uploads import AUTO, EMPTY_PREVIEW, NONE, UploadHandlers, wire_intake
from .finetune_view import (
    COMPARE_STEPS,
    RUNS_WIDTHS,
    STOPPED_BY,
    Live,
    compare_side,
    core_train_help,
    load_base,
    metrics_md,
    per_class_frame,
    pick_row,
    plan_from_fields,
    progress_html,
    push_to_hub,
    refusal,
    report_md,
    run_choices,
    runs_frame,
    settings_line,
    shown_name,
    verdict_md,
    wrong_csv,
    wrong_frame,
    wrong_rows,
)
from .markup import esc
from .streaming import CancelFlag

__all__ = ["CSS", "COMPARE_STEPS", "STOPPED_BY", "Handlers", "Live", "build", "compare_side", "load_base",
           "metrics_md", "pick_row", "plan_from_fields", "progress_html", "push_to_hub", "refusal", "report_md",
           "shown_name", "wire", "wrong_csv"]

MODE_CHOICES = [("full: train every weight", "full"), ("probe: frozen encoder + logistic regression", "probe"),
                ("both: probe, then full, on the same split", "both")]
UPDATE_EVERY = 0.5  # seconds between streamed redraws (at most ~2 a second)


# --------------------------------------------------------------------------- layout
def build(default: str, *, settings: core.Settings | None = None) -> SimpleNamespace:
    """The tab's components; ``settings`` (the server's; default ``Settings()``): whether a base may be
    a folder, public mode, the models folder the runs list comes from."""
    settings = settings if settings is not None else core.Settings()
    gr.Markdown("Fine-tune a classifier on your own labelled texts: upload a table with a text column and a label "
                "column (.csv, .tsv or .txt with a header row), check the columns, and press **Start training**. "
                "Or train a tagger (token classification, e.g. named entities) on tagged words: a CoNLL file, JSON "
                "lines with tokens and tags, or a CSV with tokens and tags columns. Or a reader (question answering: "
                "an answer span from a context) on SQuAD JSON (1.1 or 2.0) or a CSV with question, context, "
                "answer_text and answer_start columns. "
                "The new model is saved under `runs/` and opens in the explorer tabs.")
    return SimpleNamespace(**_states(), **_data_fields(), **_training_fields(default, settings), **_results_fields(),
                           **_runs_fields(settings), **_compare_fields(), **_hub_fields(), **_runs_table(settings))


def _components(scope: dict) -> dict:
    """The gradio components and blocks among a layout step's local names (what ``build`` returns)."""
    return {k: v for k, v in scope.items() if isinstance(v, (gr.components.Component, gr.blocks.BlockContext))}


def _states() -> dict:
    """The tab's per-session states (no visible element)."""
    flag = gr.State(CancelFlag())
    table = gr.State(None, time_to_live=3600)
    val_table = gr.State(None, time_to_live=3600)
    refused = gr.State(None)  # why the training file shown was refused (Start says so instead of "upload one")
    upload_note = gr.State(guards.Refusal())  # why the last training upload was refused with an error (after_upload)
    val_refused = gr.State(None)  # the same for the validation file
    results = gr.State(None, time_to_live=3600)  # misclassified rows of the last run(s), for "send to explorer"
    selected = gr.State(None, time_to_live=3600)
    # the tagger (token classification): the upload read as tagged sentences, or why not; the task the tab is
    # set to (None: a file both readers take, waiting for the user's choice) and the one the user picked by hand
    tagged = gr.State(None, time_to_live=3600)
    val_tagged = gr.State(None, time_to_live=3600)
    tagged_refused = gr.State(None)
    val_tagged_refused = gr.State(None)
    task_now = gr.State(tagger.SEQUENCE)
    task_pick = gr.State(None)
    sample = gr.State(None, time_to_live=3600)  # a tagger's or a reader's run and a text, for "send to explorer"
    # the reader (question answering): the upload read as questions with their contexts and answers, or why not
    qa = gr.State(None, time_to_live=3600)
    val_qa = gr.State(None, time_to_live=3600)
    qa_refused = gr.State(None)
    val_qa_refused = gr.State(None)
    return _components(locals())


def _data_fields() -> dict:
    """The training and validation uploads, their column mapping, the read report and the preview."""
    with gr.Row():
        with gr.Column(scale=1):
            upload = gr.File(label="Training data (.csv, .tsv, .txt; tagged words: .conll, .jsonl; questions: SQuAD "
                             ".json)", file_types=reader.FILE_TYPES, type="filepath", elem_id="bv-ft-upload")
            val_upload = gr.File(label="Validation data (optional; else 20% of the training data is held out)",
                                 file_types=reader.FILE_TYPES, type="filepath", elem_id="bv-ft-val-upload")
        with gr.Column(scale=2):
            task = gr.Radio(reader.TASK_CHOICES, value=tagger.SEQUENCE, label="Task", elem_id="bv-ft-task",
                            info="set from the file when only one task can read it")
            notices = gr.Markdown(elem_id="bv-ft-notices")
            with gr.Row(elem_id="bv-ft-columns") as columns:  # the classifier's fields (hidden for the others)
                text_col = gr.Dropdown(choices=[], label="Text column", elem_id="bv-ft-text-col")
                label_col = gr.Dropdown(choices=[], label="Label column", elem_id="bv-ft-label-col")
                pair_col = gr.Dropdown(choices=[("(none)", NONE)], value=NONE, label="Second text (optional)",
                                       elem_id="bv-ft-pair-col")
                multi = gr.Checkbox(value=False, label="Multi-label", info="labels like a|b: a row can have several")
            report = gr.Markdown(elem_id="bv-ft-report")
    # Its columns are the file's: until one is read only "row" (an empty table would show placeholder headers).
    preview = gr.Dataframe(value=EMPTY_PREVIEW, label="Preview (first rows as read; row = spreadsheet row)",
                           interactive=False, wrap=True, max_height=300, elem_id="bv-ft-preview")
    return _components(locals())


def _training_fields(default: str, settings: core.Settings) -> dict:
    """Base model, mode and run name; the advanced hyper-parameters (blank = automatic)."""
    with gr.Row():
        base_choices = model_loading.model_choices(default, settings, first=(core.DEFAULT_BASE,))
        base = gr.Dropdown(choices=base_choices, value=core.DEFAULT_BASE, allow_custom_value=True, label="Base model",
                           info="encoder = the bare MiniLM-L6 encoder; or a registered model, or a Hub id (owner/name)"
                           + (" or a folder" if settings.allow_local_paths else ""), elem_id="bv-ft-base")
        mode = gr.Radio(MODE_CHOICES, value="full", label="Mode", elem_id="bv-ft-mode")
        name = gr.Textbox(label="Run name (optional)", placeholder="e.g. reviews-v1", max_lines=1,
                          info="letters, digits, . _ -; blank = automatic", elem_id="bv-ft-name")
    with gr.Accordion("Advanced", open=False):
        help_ = {f: core_train_help(f) for f in ("epochs", "learning_rate", "batch_size", "max_length", "seed",
                                                 "early_stopping_patience", "warmup_ratio", "freeze_layers")}
        gr.Markdown("Leave epochs, learning rate, batch size, warm-up and patience blank to have them chosen from "
                    "the data size (small data gets more epochs, with early stopping when the validation macro-F1 "
                    "stops "
                    "rising or the validation loss stops falling).")
        with gr.Row():
            # Text boxes, not gr.Number: gradio's Number shows a blank value as 0 and sends 0, which
            # would turn "automatic" into a bad value (0 epochs) or a different one (no warm-up).
            epochs = gr.Textbox(placeholder="auto", label="Epochs", info=f"{help_['epochs']} {AUTO}",
                                elem_id="bv-ft-epochs")
            lr = gr.Textbox(placeholder="auto", label="Learning rate", info=f"{help_['learning_rate']} {AUTO}",
                            elem_id="bv-ft-lr")
            batch = gr.Textbox(placeholder="auto", label="Batch size", info=f"{help_['batch_size']} {AUTO}",
                               elem_id="bv-ft-batch")
            warmup = gr.Textbox(placeholder="auto", label="Warm-up fraction", info=f"{help_['warmup_ratio']} {AUTO}",
                                elem_id="bv-ft-warmup")
        with gr.Row():
            max_len = gr.Textbox(placeholder="auto", label="Max length", info=f"{help_['max_length']} {AUTO}",
                                 elem_id="bv-ft-maxlen")
            seed = gr.Number(value=42, precision=0, label="Seed", info=help_["seed"], elem_id="bv-ft-seed")
            patience = gr.Textbox(placeholder="auto", label="Early-stopping patience",
                                  info=f"{help_['early_stopping_patience']} {AUTO}", elem_id="bv-ft-patience")
            val_fraction = gr.Slider(0.05, 0.5, value=0.2, step=0.05, label="Validation fraction",
                                     info="held out when no validation file is given", elem_id="bv-ft-valfrac")
            freeze = gr.Textbox(placeholder="0", label="Frozen layers",
                                info=f"{help_['freeze_layers']} Usually a lower score (docs/tagging.md).",
                                elem_id="bv-ft-freeze")
    return _components(locals())


def _results_fields() -> dict:
    """Start and Cancel, the live status and progress, then the finished run's verdict, curves and metrics."""
    with gr.Row():
        start = gr.Button("Start training", variant="primary", elem_id="bv-ft-start")
        cancel = gr.Button("Cancel", variant="stop", elem_id="bv-ft-cancel")
    status = gr.Markdown(elem_id="bv-ft-status")
    bar = gr.HTML(elem_id="bv-ft-progress")
    verdict = gr.Markdown(elem_id="bv-ft-verdict")
    curves = figures.plot(label="Training curves", elem_id="bv-ft-curves")
    metrics = gr.Markdown(elem_id="bv-ft-metrics")
    with gr.Row():
        per_class = gr.Dataframe(value=per_class_frame([]), label="Per-class metrics (validation)", interactive=False,
                                 elem_id="bv-ft-per-class")
        confusion = figures.plot(label="Confusion matrix", elem_id="bv-ft-confusion")
    wrong = gr.Dataframe(value=wrong_frame([]), label="Misclassified validation rows (most confident first): select a "
                                                      "row to send it to the "
                         "explorer or compare", interactive=False, wrap=True, max_height=400, elem_id="bv-ft-wrong")
    with gr.Row():
        selected_md = gr.Markdown(elem_id="bv-ft-selected")
        send = gr.Button("Send to explorer", elem_id="bv-ft-send", scale=0)
        wrong_csv = gr.File(label="Misclassified rows (.csv)", interactive=False, height=90, elem_id="bv-ft-wrong-csv")
    return _components(locals())


def _runs_fields(settings: core.Settings) -> dict:
    """The saved runs: the one chosen, its zip download and (public mode) deleting it or everything."""
    gr.Markdown("### Your runs")
    with gr.Row():
        # Filled on page load (runs saved by other sessions or before a restart); nothing chosen until the
        # user picks a run or a training here selects its new one. The buttons that need a run wait for it.
        # Public mode: no visitor is known while the page is built, so it lists no run (the page load
        # fills in the visitor's own); gradio also checks API calls against these choices.
        owned = not settings.public
        # wide enough for the longest run name (runs/ + 64 characters): it ran under the arrow and was cut
        run = gr.Dropdown(choices=run_choices(settings.models_dir) if owned else [], value=None, label="Run",
                          allow_custom_value=False, elem_id="bv-ft-run", scale=5)
        zip_btn = gr.Button("Download model (.zip)", interactive=False, elem_id="bv-ft-zip", scale=1, min_width=232)
        zip_file = gr.File(label="Model folder (.zip)", interactive=False, height=90, elem_id="bv-ft-zip-file", scale=2)
    with gr.Row(visible=settings.public):  # public mode: a visitor's runs are theirs to delete
        delete_btn = gr.Button("Delete this run", variant="stop", size="sm", interactive=False, elem_id="bv-ft-delete")
        delete_all = gr.Button("Delete my data (every run and file of this browser)", variant="stop", size="sm",
                               elem_id="bv-ft-delete-all")
    delete_md = gr.Markdown(elem_id="bv-ft-delete-md")
    return _components(locals())


def _compare_fields() -> dict:
    """The chosen run and its base model side by side on one text."""
    with gr.Accordion("Compare with the base model", open=False, elem_id="bv-ft-compare-acc") as compare_acc:
        with gr.Row():
            cmp_text = gr.Textbox(label="Text", lines=2, elem_id="bv-ft-cmp-text")
            cmp_pair = gr.Textbox(label="Second text (optional)", lines=2, elem_id="bv-ft-cmp-pair")
        cmp_btn = gr.Button("Compare", interactive=False, elem_id="bv-ft-cmp")
        cmp_md = gr.Markdown(elem_id="bv-ft-cmp-md")
        with gr.Row():
            cmp_base_bar = figures.plot(label="Base model", elem_id="bv-ft-cmp-base-bar")
            cmp_tuned_bar = figures.plot(label="Fine-tuned model", elem_id="bv-ft-cmp-tuned-bar")
        with gr.Row():
            cmp_base_tokens = gr.HTML(elem_id="bv-ft-cmp-base-tokens")
            cmp_tuned_tokens = gr.HTML(elem_id="bv-ft-cmp-tuned-tokens")
    return _components(locals())


def _hub_fields() -> dict:
    """Pushing the chosen run to the Hugging Face Hub."""
    with gr.Accordion("Push to the Hugging Face Hub (optional)", open=False):
        gr.Markdown("Uploads the chosen run's model folder to a Hub repository with your write token. The token is "
                    "used for this upload only: it is not stored, logged or written into the model card. `run.json` "
                    "(it holds validation texts) is left out.")
        with gr.Row():
            hub_repo = gr.Textbox(label="Repository id", placeholder="your-name/my-classifier", max_lines=1,
                                  elem_id="bv-ft-hub-repo")
            hub_token = gr.Textbox(label="Write token", type="password", max_lines=1, elem_id="bv-ft-hub-token")
            hub_private = gr.Checkbox(value=True, label="Private repository")
        hub_btn = gr.Button("Push to the Hub", interactive=False, elem_id="bv-ft-hub-push")
        hub_md = gr.Markdown(elem_id="bv-ft-hub-md")
    return _components(locals())


def _runs_table(settings: core.Settings) -> dict:
    """Every past run in a table, and its refresh button."""
    owned = not settings.public  # public mode: filled on page load with the visitor's own runs (_runs_fields)
    runs_table = gr.Dataframe(value=runs_frame(settings.models_dir if owned else None),
                              label="Past runs (probe and full side by side when trained on the same data)",
                              interactive=False, wrap=True, elem_id="bv-ft-runs", column_widths=RUNS_WIDTHS,
                              elem_classes=["bv-table"])
    refresh = gr.Button("Refresh the runs list", size="sm", elem_id="bv-ft-refresh")
    return _components(locals())


# --------------------------------------------------------------------------- events
class Handlers(UploadHandlers):
    """The tab's event handlers, one method per event (the intake's are ``UploadHandlers``'), with what they
    share: the components ``f``, the server's ``settings``, the app's default model and the explorer's
    components a finished run updates (``model_dd``) or a misclassified row is sent to (``predict_text``,
    ``predict_pair``, ``tabs``)."""

    def __init__(self, f: SimpleNamespace, *, settings: core.Settings, default: str, model_dd: gr.Dropdown,
                 predict_text: gr.Textbox, predict_pair: gr.Textbox, tabs: gr.Tabs):
        self.f, self.settings, self.default = f, settings, default
        self.model_dd, self.predict_text, self.predict_pair, self.tabs = model_dd, predict_text, predict_pair, tabs
        # each visitor's one fine-tune, as a job that outlives its page; one trains at a time, others wait
        self.jobs = core.FinetuneJobs(max_waiting=settings.finetune_queue if settings.public else 0)

    # ---------------------------------------------------------------- training (streamed)
    @staticmethod
    def arm(flag: CancelFlag):
        flag.arm()

    def train(self, flag: CancelFlag, table, val_table, text_col, label_col, pair_col, multi_label, base, mode, name,
              epochs, lr, batch, max_len, seed, patience, val_fraction, warmup=None, refused=None, val_refused=None,
              task=tagger.SEQUENCE, tagged=None, val_tagged=None, tagged_refused=None, val_tagged_refused=None,
              qa=None, val_qa=None, qa_refused=None, val_qa_refused=None, freeze=None):
        """Start the visitor's fine-tune as a job and stream its progress; the final yield shows the results
        and the verdict. The job is not this event: a page that goes away (its event cancelled, this
        generator closed) leaves it training; only Cancel stops it. A visitor with a fine-tune queued or
        running (another tab, or this page before a reload) is refused in the status line."""
        f, cancel = self.f, flag.event
        if cancel.is_set():  # cancelled while waiting in the queue
            flag.arm()
            yield {f.status: "**Cancelled** before training started.", f.bar: ""}
            return
        key = self.visitor_key()
        try:
            self.jobs.check(key)  # before reading anything: theirs is still queued or running
            visitor.check_model(base, self.default)  # public mode: another visitor's run is no base
            if task == tagger.TOKEN:  # a tagger: the tagged files, no columns, every weight trained unless frozen
                plan = tagger.plan_from_fields(tagged, val_tagged, base, name, epochs, lr, batch, seed, patience,
                                               val_fraction, warmup, tagged_refused, val_tagged_refused,
                                               settings=self.settings, freeze=freeze)
            elif task == reader.QUESTION:  # a reader: the question answering files
                val_other = any(v is not None for v in (val_table, val_refused, val_tagged, val_tagged_refused))
                plan = reader.plan_from_fields(qa, val_qa, base, name, epochs, lr, batch, seed, patience, val_fraction,
                                               warmup, qa_refused, val_qa_refused, val_other, settings=self.settings,
                                               freeze=freeze)
            elif task is None and table is not None:
                raise core.InputError(tagger.CHOOSE.replace("**", ""))
            else:
                plan = plan_from_fields(table, val_table, text_col, label_col, pair_col, multi_label, base, mode,
                                        name, epochs, lr, batch, max_len, seed, patience, val_fraction, warmup,
                                        refused, val_refused, settings=self.settings, freeze=freeze)
            plan = visitor.claim(plan)  # public mode: quota checked, the runs saved as this visitor's
            job = self.jobs.submit(key, plan, cancel=cancel)  # refused: theirs runs, or the queue is full
        except core.LimitError as exc:
            out = {f.status: f"**{esc(exc)}**"}
            if exc.oldest:  # past the visitor's run limit: their oldest run, beside Delete this run
                out[f.run] = gr.update(value=exc.oldest)
            yield out
            return
        yield self.started(plan)
        try:
            yield from self.follow(job, Live())
        finally:  # the job goes on if this page went away; this page's next Start gets a fresh event
            if flag.event is cancel:
                flag.arm()

    def resume(self):
        """On page load: the visitor's fine-tune still queued or running (started on a page since closed or
        reloaded, or in another tab) followed here from its start, results and all. None: the runs list
        again (one that ended after the page-load refresh read it is listed too)."""
        f = self.f
        job = self.jobs.current(self.visitor_key()) if visitor.ready() else None
        if job is None:
            yield {f.runs_table: runs_frame(self.settings.models_dir) if visitor.ready() else gr.skip()}
            return
        out = self.started(job.plan)
        out[f.status] = "**Following your fine-tune**, started earlier…"
        yield out
        yield from self.follow(job, Live())

    def visitor_key(self) -> str:
        """Whose fine-tune: the visitor's owner hash in public mode; a local app has one visitor."""
        if not visitor.ready():
            raise core.InputError("This page has no owner token yet: reload the page, then start again.")
        return visitor.owner() or "local"

    def started(self, plan) -> dict:
        """The page as a run starts: the settings chosen, every result of an earlier run cleared."""
        f = self.f
        return {f.status: "**Starting…** loading the base model", f.bar: progress_html(0, 1, None, "starting"),
                f.verdict: settings_line(plan),
                f.curves: plots.empty_figure("The curves appear after the first logged steps."), f.metrics: "",
                f.per_class: per_class_frame([]),
                f.confusion: plots.empty_figure("The confusion matrix appears at the end."),
                f.wrong: wrong_frame([]), f.wrong_csv: None, f.results: None, f.selected: None, f.selected_md: "",
                f.sample: None}

    def follow(self, job, live: Live):
        """The job's events as page updates, at most one every UPDATE_EVERY seconds, then its outcome. Once
        Cancel is pressed the next update (within a tick) says "cancelling…": the run, not the Cancel
        button, writes the status, so its last word ("Cancelled") is the one that stays."""
        f, cancel = self.f, job.cancel_event
        last, dirty, told, waiting = 0.0, False, False, None
        for event in job.events(timeout=0.2):
            if event is not None:
                if event.get("kind") == "waiting":
                    waiting, dirty = event["position"], True
                elif live.add(event):
                    waiting, dirty = None, True
            now = time.monotonic()
            tell = cancel.is_set() and not told
            if (dirty and now - last >= UPDATE_EVERY) or tell:
                last, dirty, told = now, False, told or tell
                note = "  \n**Cancelling…** the run stops within a step and saves the best weights so far." \
                    if cancel.is_set() else ""
                if waiting is not None:
                    yield {f.status: f"**Waiting:** {waiting} fine-tune(s) ahead of yours; it starts when they "
                                     "finish (one fine-tune runs at a time on this app)." + note}
                    continue
                yield {f.status: live.status() + note,
                       f.bar: progress_html(live.step, live.max_steps, live.eta, live.what, live.timed),
                       f.curves: live.figure()}
        if job.error is not None:
            if isinstance(job.error, core.CancelledError):
                yield {f.status: f"**Cancelled:** {esc(job.error)}", f.bar: ""}
                return
            raise guards.user_error(job.error)
        yield self.finished(job.plan, job.results, live)

    def finished(self, plan, results: list, live: Live) -> dict:
        """The page after a run: verdict, metrics, curves, confusion, misclassified rows, the new run chosen."""
        f = self.f
        if isinstance(plan, core.TaggerPlan):
            return self.finished_tagger(plan, results[-1], live)
        if isinstance(plan, core.ReaderPlan):
            return self.finished_reader(plan, results[-1], live)
        out = {
            f.status: ("**Cancelled.** " if any(r.cancelled for r in results) else "**Done.** ")
            + ", ".join(f"{esc(r.name)} saved" for r in results) + ".",
            f.bar: progress_html(live.max_steps, live.max_steps, None, live.mode + ", done"),
            f.verdict: verdict_md(results) + "  \n" + settings_line(plan),
            f.metrics: metrics_md(results) + "".join(f"  \nNote: {esc(n)}" for n in plan.notices),
            f.per_class: per_class_frame(results),
            f.curves: live.figure() if live.train or live.evals else
            plots.empty_figure("Probe mode has no training curve: features, then a logistic regression."),
        }
        cms = [(f"{r.mode}: {r.name}", r.metrics["confusion_matrix"]) for r in results
               if r.metrics.get("confusion_matrix") is not None]
        out[f.confusion] = (plots.confusion_matrices(cms, results[-1].labels) if cms else
                            plots.empty_figure("No confusion matrix for multi-label data (see the per-class table)."))
        rows = wrong_rows(results)
        out[f.wrong] = wrong_frame(rows)
        out[f.wrong_csv] = visitor.own_file(wrong_csv(rows))  # public mode: validation texts, for this visitor only
        out[f.results] = rows
        out[f.sample] = None
        return {**out, **self.new_run(results[-1].name)}

    def finished_tagger(self, plan, r, live: Live) -> dict:
        """The page after a tagger run: the verdict against tagging every word O, entity F1 per type, the curves,
        the validation sentences with a wrong tag, the new run chosen (and one sentence to open it on)."""
        f = self.f
        rows = tagger.wrong_rows(r)
        out = {
            f.status: ("**Cancelled.** " if r.cancelled else "**Done.** ") + f"{esc(r.name)} saved.",
            f.bar: progress_html(live.max_steps, live.max_steps, None, live.mode + ", done"),
            f.verdict: tagger.verdict_md(r) + "  \n" + settings_line(plan),
            f.metrics: tagger.metrics_md(r, plan.notices), f.per_class: tagger.per_type_frame(r),
            f.curves: live.figure(),
            f.confusion: plots.empty_figure("A tagger has no confusion matrix here: see the entity scores per type."),
            f.wrong: tagger.wrong_frame(rows), f.wrong_csv: None, f.results: rows,
            f.sample: {"run": r.name, "text": tagger.sample_text(r, plan.train)},
        }
        return {**out, **self.new_run(r.name)}

    def finished_reader(self, plan, r, live: Live) -> dict:
        """The page after a reader run: held-out exact match and F1 against always "no answer" and the fixed-position
        guess, the verdict, the curves, the questions not answered exactly, the new run chosen (and a question with
        its context to open it on)."""
        f = self.f
        rows = reader.wrong_rows(r)
        out = {
            f.status: ("**Cancelled.** " if r.cancelled else "**Done.** ") + f"{esc(r.name)} saved.",
            f.bar: progress_html(live.max_steps, live.max_steps, None, live.mode + ", done"),
            f.verdict: reader.verdict_md(r) + "  \n" + settings_line(plan),
            f.metrics: reader.metrics_md(r, plan.notices), f.per_class: per_class_frame([]), f.curves: live.figure(),
            f.confusion: plots.empty_figure("A reader has no confusion matrix: see exact match and F1 against the "
                                            "two guesses."),
            f.wrong: reader.wrong_frame(rows), f.wrong_csv: None, f.results: rows,
            f.sample: reader.sample(r, plan.train),
        }
        return {**out, **self.new_run(r.name)}

    def new_run(self, newest: str) -> dict:
        """The new run chosen in the explorer's model list and the runs list; the lists and the bases again."""
        f, out = self.f, {}
        runs = run_choices(self.settings.models_dir)
        out[self.model_dd] = gr.update(choices=model_loading.model_choices(self.default, self.settings), value=newest)
        out[f.run] = gr.update(choices=runs, value=newest)
        out[f.runs_table] = runs_frame(self.settings.models_dir)
        base_choices = model_loading.model_choices(self.default, self.settings, first=(core.DEFAULT_BASE,))
        out[f.base] = gr.update(choices=base_choices)
        return out

    def on_cancel(self, flag: CancelFlag) -> None:
        """Ask the visitor's training to stop, whichever of their pages started it (this page's flag: a
        Start still waiting for its event). The run says so itself (its next update: "Cancelling…",
        then "Cancelled"): a status written here could arrive after a run that stopped at once had
        said "Cancelled", and left the page saying "Cancelling…" for good (as on the Explain-a-file tab)."""
        flag.event.set()
        if visitor.ready():
            self.jobs.cancel(visitor.owner() or "local")

    # ---------------------------------------------------------------- after a run
    def on_select(self, rows, evt: gr.SelectData):
        """A misclassified row chosen: remembered, shown, and put in the comparison's text boxes."""
        w = pick_row(rows, evt.row_value)
        if w is None:
            return None, "", gr.update(), gr.update(), gr.update()
        what = f"Selected row {w['row']} ({esc(w['mode'])}): true **{esc(w['true'])}**, predicted " \
               f"**{esc(w['predicted'])}**."
        return w, what, w["text"], w.get("pair") or "", gr.update(value=w["run"])

    def send_to_explorer(self, w, sample=None):
        """The selected row's text (a tagger run: else one of its sentences; a reader run: a question and its context,
        the selected one's or the one it answered worst) and its run, on the Predict tab."""
        w = w or sample
        if not w:
            raise core.InputError("Select a row of the misclassified table first.")
        return {self.predict_text: w["text"], self.predict_pair: w.get("pair") or "",
                self.tabs: gr.Tabs(selected="predict"), self.model_dd: gr.update(value=w["run"])}

    def download(self, run):
        visitor.check(run)  # public mode: another visitor's run answers as an unknown one
        return visitor.keep_zip(core.zip_run(run, self.settings.models_dir))

    def compare(self, run, text, pair):
        """The run and its base side by side: each one's prediction and attributions for the text."""
        f = self.f
        visitor.check(run)
        info = core.load_run_info(core.run_folder(run, self.settings.models_dir)) or {}
        base = info.get("base")
        if not base:
            raise core.InputError(f"The run {run!r} does not say which base model it started from.")
        pair = pair if pair and pair.strip() else None
        lm_b = load_base(base, self.default, self.settings)
        lm_t = model_loading.load(run, self.default, self.settings)
        pb, _, bar_b, html_b = compare_side(lm_b, text, pair, "Base", shown_name(base))
        pt, _, bar_t, html_t = compare_side(lm_t, text, pair, "Fine-tuned", run)
        md = (f"**Base** {esc(shown_name(base))} predicts **{esc(pb.label)}** ({max(pb.probs):.1%}); "
              f"**fine-tuned** {esc(run)} predicts **{esc(pt.label)}** ({max(pt.probs):.1%}). "
              f"Each model's attributions are to its own predicted class (Integrated Gradients, {COMPARE_STEPS} "
              f"steps).")
        if lm_b.warnings:
            md += "  \n" + model_loading.warnings_md(lm_b)
        return {f.cmp_md: md, f.cmp_base_bar: bar_b, f.cmp_tuned_bar: bar_t, f.cmp_base_tokens: html_b,
                f.cmp_tuned_tokens: html_t}

    def push(self, run, repo_id, token, private):
        visitor.check(run)
        return push_to_hub(run, repo_id, token, private, models_dir=self.settings.models_dir)

    def refresh_runs(self, chosen=None):
        """The runs list and the model chooser again (runs saved by other sessions or before a restart)."""
        f = self.f
        if not visitor.ready():  # public mode, owner not known yet: the page-load refresh after it fills these
            return {f.runs_table: gr.skip(), f.run: gr.skip(), self.model_dd: gr.skip()}
        runs = run_choices(self.settings.models_dir)
        return {f.runs_table: runs_frame(self.settings.models_dir),
                f.run: gr.update(choices=runs, value=chosen if chosen in runs else None),
                self.model_dd: gr.update(choices=model_loading.model_choices(self.default, self.settings))}

    def on_run(self, run):
        """Download, compare, push and delete need a run: enabled once one is chosen; Compare (a classifier's class
        probabilities and attributions beside its base's) only for a sequence classifier's run, the line under it
        saying why for a run of another head (a tagger: Send to explorer shows its entities)."""
        on = gr.update(interactive=bool(run))
        try:
            if run:
                visitor.check(run)  # public mode: another visitor's run says nothing of its head
            head = folder_head(core.run_folder(run, self.settings.models_dir)) if run else None
        except core.BertvizError:  # not a saved run (any more), or not this visitor's: the buttons say so when pressed
            head = None
        if head is SEQUENCE_CLASSIFICATION:  # its base may have another head: then it has no classes to compare
            return self.base_compare(run, on)
        if head is None:
            return on, on, on, on, ""
        return (on, gr.update(interactive=False), on, on,
                f"**{esc(run)} is a {esc(head.name)} run:** Compare shows a sequence classifier's class probabilities "
                "beside its base's. Open the run with Send to explorer to see what it answers.")

    def base_compare(self, run: str, on) -> tuple:
        """``on_run``'s buttons for a sequence classifier's run: Compare greyed, with why, when its base is a model
        of another head (a tagger, a question answering model: a classifier fine-tuned from its encoder), whose
        class probabilities there are none to show beside the run's; else every button ``on``."""
        base = (core.load_run_info(core.run_folder(run, self.settings.models_dir)) or {}).get("base")
        head = model_loading.listed_head(base, self.settings) if base else None
        if head is None or head is SEQUENCE_CLASSIFICATION:
            return on, on, on, on, ""
        return (on, gr.update(interactive=False), on, on,
                f"**The base of {esc(run)}, {esc(shown_name(base))}, is a {esc(head.name)} model:** Compare shows a "
                "run's class probabilities beside its base's, and this base has none. Open the run with Send to "
                "explorer to see what it predicts.")

    # ---------------------------------------------------------------- public mode: delete runs and data
    def delete_one(self, run):
        msg = visitor.delete_run(run)
        out = self.refresh_runs()
        runs = run_choices(self.settings.models_dir)
        out.update({self.f.delete_md: msg, self.f.run: gr.update(choices=runs, value=runs[0] if runs else None)})
        return out

    def delete_everything(self):
        msg = visitor.delete_my_data()
        out = self.refresh_runs()
        out.update({self.f.delete_md: msg, self.f.zip_file: None, self.f.run: gr.update(choices=[], value=None)})
        return out


def wire(f: SimpleNamespace, *, demo: gr.Blocks | None = None, default: str, model_dd: gr.Dropdown,
         predict_text: gr.Textbox, predict_pair: gr.Textbox, tabs: gr.Tabs, heavy: dict,
         after_run: tuple[Callable, list, object] | None = None, settings: core.Settings | None = None) -> Handlers:
    """Connect the tab's events to ``Handlers``' methods. ``after_run`` = (fn, inputs, outputs) run
    after a successful training (the app's "load model" handler, so the Model tab shows the new
    model); ``settings``: the server's (default ``Settings()``)."""
    h = Handlers(f, settings=settings if settings is not None else core.Settings(), default=default,
                 model_dd=model_dd, predict_text=predict_text, predict_pair=predict_pair, tabs=tabs)
    wire_intake(f, h)
    _wire_training(f, h, heavy, after_run, demo)
    _wire_results(f, h, heavy, model_dd, predict_text, predict_pair, tabs)
    _wire_runs(f, h, demo, model_dd)
    return h


def _wire_training(f: SimpleNamespace, h: Handlers, heavy: dict, after_run, demo: gr.Blocks | None = None) -> None:
    # a stable API order
    train_outputs = [f.status, f.bar, f.verdict, f.curves, f.metrics, f.per_class, f.confusion, f.wrong, f.wrong_csv,
                     f.results, f.selected, f.selected_md, h.model_dd, f.run, f.runs_table, f.base, f.sample]
    train_inputs = [f.flag, f.table, f.val_table, f.text_col, f.label_col, f.pair_col, f.multi, f.base, f.mode, f.name,
                    f.epochs, f.lr, f.batch, f.max_len, f.seed, f.patience, f.val_fraction, f.warmup, f.refused,
                    f.val_refused, f.task_now, f.tagged, f.val_tagged, f.tagged_refused,
                    f.val_tagged_refused, f.qa, f.val_qa, f.qa_refused, f.val_qa_refused, f.freeze]  # states: not API
    # Start is greyed while this page's fine-tune runs: a second one would only be refused (one per visitor)
    quick = dict(queue=False, api_visibility="private", show_progress="hidden")
    f.start.click(lambda: gr.update(interactive=False), outputs=[f.start], **quick)
    armed = f.start.click(h.arm, inputs=[f.flag], outputs=None, queue=False, api_visibility="private")
    started = armed.then(
        guards.guard_stream(h.train), inputs=train_inputs,
        outputs=train_outputs, api_name="finetune_start", api_visibility="undocumented",
        concurrency_limit=visitor.finetune_concurrency(h.settings), concurrency_id="finetune",
        show_progress_on=[f.status],
    )
    if demo is not None:  # a page opened while the visitor's fine-tune runs follows it
        visitor.on_page_load(demo, guards.guard_stream(h.resume), outputs=train_outputs, queue=True,
                             concurrency_id="finetune", show_progress="hidden")
    started.then(lambda: gr.update(interactive=True), outputs=[f.start], **quick)  # ended, refused or cancelled
    if after_run is not None:
        fn, ins, outs = after_run
        started.success(fn, inputs=ins, outputs=outs, api_visibility="private", **heavy)
    f.cancel.click(h.on_cancel, inputs=[f.flag], outputs=None, api_name="finetune_cancel",
                   api_visibility="undocumented", queue=False)


def _wire_results(f: SimpleNamespace, h: Handlers, heavy: dict, model_dd, predict_text, predict_pair, tabs) -> None:
    f.wrong.select(h.on_select, inputs=[f.results], outputs=[f.selected, f.selected_md, f.cmp_text, f.cmp_pair, f.run],
                   api_visibility="private", queue=False)
    f.send.click(guards.guard(h.send_to_explorer), inputs=[f.selected, f.sample],
                 outputs={predict_text, predict_pair, tabs, model_dd}, api_visibility="private", queue=False)
    f.zip_btn.click(guards.guard(h.download), inputs=[f.run], outputs=[f.zip_file], api_name="finetune_zip",
                    api_visibility="undocumented", concurrency_limit=1, concurrency_id="zip")
    f.cmp_btn.click(guards.guard(h.compare), inputs=[f.run, f.cmp_text, f.cmp_pair],
                    outputs=[f.cmp_md, f.cmp_base_bar, f.cmp_tuned_bar, f.cmp_base_tokens, f.cmp_tuned_tokens],
                    api_name="finetune_compare", api_visibility="undocumented", **heavy)
    f.hub_btn.click(guards.guard(h.push), inputs=[f.run, f.hub_repo, f.hub_token, f.hub_private], outputs=[f.hub_md],
                    api_visibility="private", concurrency_limit=1, concurrency_id="hub")


def _wire_runs(f: SimpleNamespace, h: Handlers, demo: gr.Blocks | None, model_dd) -> None:
    f.refresh.click(h.refresh_runs, inputs=[f.run], outputs={f.runs_table, f.run, model_dd}, api_visibility="private",
                    queue=False)
    if demo is not None:  # runs saved by other sessions (or before a restart) appear on page load
        visitor.on_page_load(demo, h.refresh_runs, inputs=[f.run], outputs={f.runs_table, f.run, model_dd})
    f.run.change(h.on_run, inputs=[f.run], outputs=[f.zip_btn, f.cmp_btn, f.hub_btn, f.delete_btn, f.cmp_md],
                 api_visibility="private", queue=False, show_progress="hidden")
    f.delete_btn.click(guards.guard(h.delete_one), inputs=[f.run], outputs={f.runs_table, f.run, model_dd, f.delete_md},
                       api_name="delete_run", api_visibility="undocumented", concurrency_limit=1,
                       concurrency_id="delete")
    f.delete_all.click(guards.guard(h.delete_everything),
                       outputs={f.runs_table, f.run, model_dd, f.delete_md, f.zip_file},
                       api_name="delete_my_data", api_visibility="undocumented", concurrency_limit=1,
                       concurrency_id="delete")


CSS = """
.bv-ft-bar { height: 12px; background: var(--neutral-200, #e5e7eb); border-radius: 6px; overflow: hidden; }
.bv-ft-bar > div { height: 100%; background: var(--color-accent, #f97316); transition: width 0.4s ease; }
.bv-ft-bar-text { font-size: 0.9em; margin-top: 4px; }
"""
