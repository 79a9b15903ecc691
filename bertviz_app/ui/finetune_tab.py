"""Fine-tune tab: upload a labelled table, confirm the columns, train (full, probe or both),
watch the loss and validation curves live, then read the metrics, the verdict (did it learn?),
the confusion matrix and the misclassified rows, compare the new model with its base, and
download or push it.

Event wiring and rendering only: the fine-tune chain is the core service
(``plan_finetune`` -> ``FinetuneJob``, the same one the CLI runs). The job trains in a worker
thread; the streaming handler reads its events and redraws at most twice a second. The event has
its own concurrency id (one training at a time, a second user sees their queue position) so the
explorer's analyses are not blocked by a long run. Cancel sets the session's ``threading.Event``
(kept in ``gr.State``); the run stops within a step and still saves the best weights so far.
"""

from __future__ import annotations

import csv
import math
import os
import tempfile
import time
from collections.abc import Callable
from types import SimpleNamespace

import gradio as gr
import pandas as pd

import bertviz_app as core

from . import common, plots, visitor
from .common import CancelFlag, esc

NONE = ""  # the "no second text" choice of the pair dropdown
MODE_CHOICES = [("full: train every weight", "full"), ("probe: frozen encoder + logistic regression", "probe"),
                ("both: probe, then full, on the same split", "both")]
UPDATE_EVERY = 0.5  # seconds between streamed redraws (at most ~2 a second)
PREVIEW_ROWS = 10
COMPARE_STEPS = 32  # Integrated Gradients steps for the base-vs-fine-tuned comparison
AUTO = "blank = automatic (from the data size)"
EMPTY_PREVIEW = pd.DataFrame(columns=["row"])  # the preview before a file is read
STOPPED_BY = {  # which validation signal ended a run early (RunResult.stopped_by)
    "metric": "the validation macro-F1 stopped rising",
    "loss": "the validation loss stopped falling (the model was starting to memorise the training rows)",
    None: "the validation scores stopped improving",
}


# --------------------------------------------------------------------------- layout
def build(default: str, settings=None) -> SimpleNamespace:
    gr.Markdown("Fine-tune a classifier on your own labelled texts: upload a table with a text column and a label "
                "column (.csv, .tsv or .txt with a header row), check the columns, and press **Start training**. "
                "The new model is saved under `runs/` and opens in the explorer tabs.")
    flag = gr.State(CancelFlag())
    table = gr.State(None, time_to_live=3600)
    val_table = gr.State(None, time_to_live=3600)
    refused = gr.State(None)  # why the training file shown was refused (Start says so instead of "upload one")
    val_refused = gr.State(None)  # the same for the validation file
    results = gr.State(None, time_to_live=3600)  # misclassified rows of the last run(s), for "send to explorer"
    selected = gr.State(None, time_to_live=3600)
    with gr.Row():
        with gr.Column(scale=1):
            upload = gr.File(label="Training data (.csv, .tsv, .txt)", file_types=[".csv", ".tsv", ".txt"],
                             type="filepath", elem_id="bv-ft-upload")
            val_upload = gr.File(label="Validation data (optional; else 20% of the training data is held out)",
                                 file_types=[".csv", ".tsv", ".txt"], type="filepath", elem_id="bv-ft-val-upload")
        with gr.Column(scale=2):
            notices = gr.Markdown(elem_id="bv-ft-notices")
            with gr.Row():
                text_col = gr.Dropdown(choices=[], label="Text column", elem_id="bv-ft-text-col")
                label_col = gr.Dropdown(choices=[], label="Label column", elem_id="bv-ft-label-col")
                pair_col = gr.Dropdown(choices=[("(none)", NONE)], value=NONE, label="Second text (optional)",
                                       elem_id="bv-ft-pair-col")
                multi = gr.Checkbox(value=False, label="Multi-label", info="labels like a|b: a row can have several")
            report = gr.Markdown(elem_id="bv-ft-report")
    # Its columns are the file's: until one is read only "row" (an empty table would show placeholder headers).
    preview = gr.Dataframe(value=EMPTY_PREVIEW, label="Preview (first rows as read; row = spreadsheet row)",
                           interactive=False, wrap=True, max_height=300, elem_id="bv-ft-preview")
    with gr.Row():
        base_choices = common.model_choices(default, first=(core.DEFAULT_BASE,))
        base = gr.Dropdown(choices=base_choices, value=core.DEFAULT_BASE, allow_custom_value=True, label="Base model",
                           info="encoder = the bare MiniLM-L6 encoder; or a registered model, or a Hub id (owner/name)"
                           + (" or a folder" if core.get_settings().allow_local_paths else ""), elem_id="bv-ft-base")
        mode = gr.Radio(MODE_CHOICES, value="full", label="Mode", elem_id="bv-ft-mode")
        name = gr.Textbox(label="Run name (optional)", placeholder="e.g. reviews-v1", max_lines=1,
                          info="letters, digits, . _ -; blank = automatic", elem_id="bv-ft-name")
    with gr.Accordion("Advanced", open=False):
        help_ = {f: core_train_help(f) for f in ("epochs", "learning_rate", "batch_size", "max_length", "seed",
                                                 "early_stopping_patience", "warmup_ratio")}
        gr.Markdown("Leave epochs, learning rate, batch size, warm-up and patience blank to have them chosen from "
                    "the data size (small data gets more epochs, with early stopping when the validation macro-F1 stops "
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
    with gr.Row():
        start = gr.Button("Start training", variant="primary", elem_id="bv-ft-start")
        cancel = gr.Button("Cancel", variant="stop", elem_id="bv-ft-cancel")
    status = gr.Markdown(elem_id="bv-ft-status")
    bar = gr.HTML(elem_id="bv-ft-progress")
    verdict = gr.Markdown(elem_id="bv-ft-verdict")
    curves = gr.Plot(label="Training curves", elem_id="bv-ft-curves")
    metrics = gr.Markdown(elem_id="bv-ft-metrics")
    with gr.Row():
        per_class = gr.Dataframe(value=per_class_frame([]), label="Per-class metrics (validation)", interactive=False,
                                 elem_id="bv-ft-per-class")
        confusion = gr.Plot(label="Confusion matrix", elem_id="bv-ft-confusion")
    wrong = gr.Dataframe(value=wrong_frame([]), label="Misclassified validation rows (most confident first): select a row to send it to the "
                         "explorer or compare", interactive=False, wrap=True, max_height=400, elem_id="bv-ft-wrong")
    with gr.Row():
        selected_md = gr.Markdown(elem_id="bv-ft-selected")
        send = gr.Button("Send to explorer", elem_id="bv-ft-send", scale=0)
        wrong_csv = gr.File(label="Misclassified rows (.csv)", interactive=False, height=90, elem_id="bv-ft-wrong-csv")
    gr.Markdown("### Your runs")
    with gr.Row():
        # Filled on page load (runs saved by other sessions or before a restart); nothing chosen until the
        # user picks a run or a training here selects its new one. The buttons that need a run wait for it.
        run = gr.Dropdown(choices=run_choices(), value=None, label="Run", allow_custom_value=False,
                          elem_id="bv-ft-run", scale=3)
        zip_btn = gr.Button("Download model (.zip)", interactive=False, elem_id="bv-ft-zip", scale=1)
        zip_file = gr.File(label="Model folder (.zip)", interactive=False, height=90, elem_id="bv-ft-zip-file", scale=2)
    with gr.Row(visible=core.get_settings().public):  # public mode: a visitor's runs are theirs to delete
        delete_btn = gr.Button("Delete this run", variant="stop", size="sm", interactive=False, elem_id="bv-ft-delete")
        delete_all = gr.Button("Delete my data (every run and file of this browser)", variant="stop", size="sm",
                               elem_id="bv-ft-delete-all")
    delete_md = gr.Markdown(elem_id="bv-ft-delete-md")
    with gr.Accordion("Compare with the base model", open=False, elem_id="bv-ft-compare-acc") as compare_acc:
        with gr.Row():
            cmp_text = gr.Textbox(label="Text", lines=2, elem_id="bv-ft-cmp-text")
            cmp_pair = gr.Textbox(label="Second text (optional)", lines=2, elem_id="bv-ft-cmp-pair")
        cmp_btn = gr.Button("Compare", interactive=False, elem_id="bv-ft-cmp")
        cmp_md = gr.Markdown(elem_id="bv-ft-cmp-md")
        with gr.Row():
            cmp_base_bar = gr.Plot(label="Base model", elem_id="bv-ft-cmp-base-bar")
            cmp_tuned_bar = gr.Plot(label="Fine-tuned model", elem_id="bv-ft-cmp-tuned-bar")
        with gr.Row():
            cmp_base_tokens = gr.HTML(elem_id="bv-ft-cmp-base-tokens")
            cmp_tuned_tokens = gr.HTML(elem_id="bv-ft-cmp-tuned-tokens")
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
    runs_table = gr.Dataframe(value=runs_frame(), label="Past runs (probe and full side by side when trained on the "
                              "same data)", interactive=False, wrap=True, elem_id="bv-ft-runs")
    refresh = gr.Button("Refresh the runs list", size="sm", elem_id="bv-ft-refresh")
    return SimpleNamespace(**{k: v for k, v in locals().items() if isinstance(v, (gr.components.Component,
                                                                                  gr.blocks.BlockContext))})


def core_train_help(field: str) -> str:
    return core.TrainConfig.__dataclass_fields__[field].metadata["help"]


# --------------------------------------------------------------------------- data intake (pure helpers)
def read_upload(path: str | None):
    """-> (Table | None, ColumnGuess | None, notices Markdown, refusal | None). A DataError gives an
    **Error:** line and the refusal a later Start repeats (``refusal``)."""
    if not path:
        return None, None, "", None
    try:
        table = core.read_table(path)
    except core.DataError as exc:
        return None, None, f"**Error:** {esc(exc)}", refusal(path, exc)
    guess = core.guess_columns(table)
    lines = [f"**{esc(table.name)}**: {table.n_rows:,} rows, {len(table.columns)} columns."]
    lines += [f"Note: {esc(n)}" for n in table.notices]
    if guess.reasons:
        lines.append("Guessed columns: " + "; ".join(esc(r) for r in guess.reasons)
                     + ". Change them below if they are wrong.")
    return table, guess, "  \n".join(lines), None


def refusal(path: str | None, exc: Exception, what: str = "training file") -> str:
    """Why an uploaded file was refused, for a later Start: names the file and says the fix."""
    name = os.path.basename(path or "") or "the file"
    return f"The {what} {name} was refused: {exc} Fix the file and upload it again."


def report_md(table, text_col, label_col, pair_col, multi_label) -> str:
    """The validation report for the chosen columns: errors (block training) then warnings."""
    if table is None:
        return ""
    try:
        rep = core.review_columns(table, text_col, label_col, pair_col or None, bool(multi_label))
    except (core.DataError, core.InputError) as exc:
        return f"**Error:** {esc(exc)}"
    s = rep.summary
    counts = ", ".join(f"{esc(k)} ({v:,})" for k, v in list(s["class_counts"].items())[:20])
    more = f" and {len(s['class_counts']) - 20} more" if len(s["class_counts"]) > 20 else ""
    lines = [f"**{s['n_used']:,} of {s['n_rows']:,} rows usable**, {s['n_classes']} classes"
             + (" (multi-label)" if s["multi_label"] else "") + (f": {counts}{more}" if counts else "") + "."]
    lines += [f"**Error:** {esc(p.message)}" for p in rep.errors]
    lines += [f"Warning: {esc(p.message)}" for p in rep.warnings]
    lines.append("**Fix the errors above before training.**" if rep.errors else "Ready to train.")
    return "  \n".join(lines)


def _blank(v):
    """A Number field's value, None when blank (gr.Number gives None or NaN for an empty box)."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def _number(v, name: str, whole: bool = False, example: str = "2"):
    """A setting typed in a text box (or given as a number by an API caller): None when blank or
    "auto"; else the number, or InputError saying what to type. Ranges are the core's to check."""
    v = _blank(v)
    if isinstance(v, str):
        t = v.strip()
        if not t or t.lower() == "auto":
            return None
        try:
            v = float(t)
        except ValueError:
            raise core.InputError(f"{name}: {t!r} is not a number; type one such as {example}, or leave the box "
                                  "blank to have it chosen from the data size.") from None
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        if v is None:
            return None
        raise core.InputError(f"{name}: {v!r} is not a number; type one such as {example}, or leave it blank.")
    if whole:
        if not float(v).is_integer():
            raise core.InputError(f"{name} must be a whole number, got {v:g}.")
        return int(v)
    return float(v)


def plan_from_fields(table, val_table, text_col, label_col, pair_col, multi_label, base, mode, name, epochs, lr, batch,
                     max_len, seed, patience, val_fraction, warmup=None, refused=None, val_refused=None):
    """The tab's fields -> ``core.plan_finetune`` (blank numbers = automatic). Raises the core's
    clear errors (DataError, InputError, ModelNotFoundError...). ``refused``/``val_refused``: why
    the uploaded training/validation file was refused (the file is still shown: say why, not "upload one")."""
    if table is None:
        raise core.DataError(refused or "Upload a training file first (.csv, .tsv or .txt with a header row).")
    if val_refused and val_table is None:
        raise core.DataError(val_refused.replace("Fix the file and upload it again.", "Fix the file and upload it "
                             "again, or remove it to hold out part of the training data instead."))
    if not text_col or not label_col:
        raise core.DataError("Choose two different columns for the text and the label.")
    seed = _number(seed, "Seed", whole=True, example="42")
    max_len = _number(max_len, "Max length", whole=True, example="128")
    return core.plan_finetune(
        table, text_column=text_col, label_column=label_col, pair_column=pair_col or None, multi_label=bool(multi_label),
        val_table=val_table, base=base, mode=mode or "full", name=name, epochs=_number(epochs, "Epochs", example="3"),
        learning_rate=_number(lr, "Learning rate", example="5e-5"),
        batch_size=_number(batch, "Batch size", whole=True, example="16"),
        warmup_ratio=_number(warmup, "Warm-up fraction", example="0.1"),
        max_length=max_len or None, seed=42 if seed is None else seed,
        patience=_number(patience, "Early-stopping patience", whole=True, example="3"),
        val_fraction=float(val_fraction or 0.2),
    )


# --------------------------------------------------------------------------- results (pure helpers)
def run_choices() -> list[str]:
    try:
        return [r["name"] for r in visitor.visible(core.list_runs())]  # public mode: this visitor's own
    except Exception:  # noqa: BLE001 - an unreadable models folder must not break the page
        return []


def runs_frame() -> pd.DataFrame:
    """One row per data set (data_hash): the newest probe and full runs side by side."""
    cols = ["data", "classes", "train/val rows", "probe run", "probe accuracy", "probe macro-F1", "full run",
            "full accuracy", "full macro-F1"]
    try:
        runs = visitor.visible(core.list_runs())
    except Exception:  # noqa: BLE001
        runs = []
    groups: dict[str, dict[str, list[dict]]] = {}
    for r in runs:  # newest first
        groups.setdefault(r.get("data_hash", "?"), {}).setdefault(r.get("mode", "?"), []).append(r)
    rows = []
    for h, by_mode in groups.items():
        n = max(len(v) for v in by_mode.values())
        for i in range(n):
            pr = by_mode.get("probe", [])[i] if i < len(by_mode.get("probe", [])) else None
            fu = by_mode.get("full", [])[i] if i < len(by_mode.get("full", [])) else None
            any_r = pr or fu
            row = [f"{any_r.get('source') or 'data'} · {h[:8]}", ", ".join(map(str, any_r.get("labels", []))),
                   f"{any_r.get('train_rows', '?')}/{any_r.get('val_rows', '?')}"]
            for r in (pr, fu):
                m = (r or {}).get("metrics") or {}
                tag = " (cancelled)" if r and r.get("cancelled") else ""
                row += [(r["name"] + tag) if r else "", _pct(m.get("accuracy")), _pct(m.get("macro_f1"))]
            rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def _pct(x) -> str:
    return "" if x is None else f"{x:.1%}"


def settings_line(plan) -> str:
    """How the settings were chosen, one line."""
    c = plan.config
    chosen = (f"Settings: {c.epochs:g} epochs at most, learning rate {c.learning_rate:g}, batch {c.batch_size}, "
              f"warm-up {c.warmup_ratio:.0%}, early-stopping patience {c.early_stopping_patience}")
    return chosen + (f" (automatic: {esc('; '.join(plan.auto))})." if plan.auto else ".")


VERDICT_HEAD = {"learned": "**Learned.**", "weak": "**Weak: barely better.**", "not_learned": "**Not learned.**"}


def verdict_md(results: list) -> str:
    """Each run's verdict (did it learn? against the majority class and the probe) with what to change."""
    lines = []
    for r in results:
        v = r.verdict
        if v is None:
            continue
        who = f"{esc(r.name)} ({r.mode})"
        lines.append(f"{VERDICT_HEAD.get(v.status, v.status)} {who}: {esc(v.message)}")
        lines += [f"- Try: {esc(tip)}" for tip in v.suggestions]
    return "  \n".join(lines)


def _num(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def metrics_md(results: list) -> str:
    if not results:
        return ""
    lines = []
    if len(results) == 1:
        r = results[0]
        m = r.metrics
        lines.append(f"### {esc(r.name)} ({r.mode})")
        lines.append(f"**Accuracy {m['accuracy']:.1%}** · **macro-F1 {m['macro_f1']:.3f}** on {m.get('n', '?')} "
                     f"validation rows · {len(r.misclassified)} misclassified · {r.seconds:.0f} s")
        lines.append(f"Validation loss (NLL) {_num(m.get('val_nll'))} · calibration error (ECE, 15 bins) "
                     f"{_num(m.get('ece'))}: lower is better for both")
    else:
        lines.append("### Probe vs full fine-tuning (same split)")
        lines.append("| | " + " | ".join(f"{esc(r.name)} ({r.mode})" for r in results) + " |")
        lines.append("|---|" + "---|" * len(results))
        lines.append("| accuracy | " + " | ".join(f"{r.metrics['accuracy']:.1%}" for r in results) + " |")
        lines.append("| macro-F1 | " + " | ".join(f"{r.metrics['macro_f1']:.3f}" for r in results) + " |")
        lines.append("| validation loss (NLL) | " + " | ".join(_num(r.metrics.get("val_nll")) for r in results) + " |")
        lines.append("| calibration error (ECE) | " + " | ".join(_num(r.metrics.get("ece")) for r in results) + " |")
        lines.append("| misclassified | " + " | ".join(str(len(r.misclassified)) for r in results) + " |")
        lines.append("| time | " + " | ".join(f"{r.seconds:.0f} s" for r in results) + " |")
        lines.append("")
    for r in results:
        if r.cancelled:
            lines.append(f"**Cancelled:** {esc(r.name)} holds the best weights found before the cancel.")
        elif r.stopped_early:
            lines.append(f"**Stopped early:** {esc(r.name)}: {STOPPED_BY.get(r.stopped_by, STOPPED_BY[None])}; "
                         "the weights with the best validation macro-F1 were kept.")
    notices = dict.fromkeys(n for r in results for n in r.notices)
    lines += [f"Note: {esc(n)}" for n in notices]
    lines.append(f"The model is selected in the explorer tabs as **{esc(results[-1].name)}**.")
    return "  \n".join(lines)


def per_class_frame(results: list) -> pd.DataFrame:
    rows = []
    for r in results:
        for lab, v in r.metrics["per_class"].items():
            rows.append([r.mode, lab, round(v["precision"], 3), round(v["recall"], 3), round(v["f1"], 3), v["support"]])
    return pd.DataFrame(rows, columns=["mode", "class", "precision", "recall", "F1", "support"])


def wrong_rows(results: list) -> list[dict]:
    return [dict(w, run=r.name, mode=r.mode) for r in results for w in r.misclassified]


def wrong_frame(rows: list[dict]) -> pd.DataFrame:
    pairs = any(w.get("pair") for w in rows)
    cols = ["mode", "row", "text", *(["second text"] if pairs else []), "true", "predicted", "confidence"]
    data = [[w["mode"], w["row"], w["text"], *([w.get("pair") or ""] if pairs else []), w["true"], w["predicted"],
             round(float(w["confidence"]), 3)] for w in rows]
    return pd.DataFrame(data, columns=cols)


def wrong_csv(rows: list[dict]) -> str | None:
    """The misclassified rows as a CSV safe to open in a spreadsheet (no formula injection)."""
    safe_csv_cell = core.safe_csv_cell
    if not rows:
        return None
    d = tempfile.mkdtemp(prefix="bertviz-wrong-")
    path = os.path.join(d, "misclassified.csv")
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["run", "mode", "row", "text", "second_text", "true", "predicted", "confidence"])
        for r in rows:
            w.writerow([safe_csv_cell(r[k]) for k in ("run", "mode", "row", "text")]
                       + [safe_csv_cell(r.get("pair")), safe_csv_cell(r["true"]), safe_csv_cell(r["predicted"]),
                          f"{float(r['confidence']):.4f}"])
    return path


def pick_row(rows: list[dict] | None, row_value) -> dict | None:
    """The misclassified row a table selection points at (by mode and spreadsheet row)."""
    if not rows or not row_value or len(row_value) < 2:
        return None
    mode, row = str(row_value[0]), row_value[1]
    for w in rows:
        if w["mode"] == mode and str(w["row"]) == str(row):
            return w
    return None


def push_to_hub(run: str | None, repo_id: str | None, token: str | None, private: bool = True) -> str:
    """Upload a run folder to a Hub model repository (``core.push_run``); the token is never shown."""
    url = core.push_run(run, repo_id, token, private)
    return f"Pushed **{esc(run)}** to [{esc((repo_id or '').strip())}]({url})."


def load_base(base: str, default: str) -> core.LoadedModel:
    if base == core.ENCODER:  # by its name: loading it by its folder made the folder its name (the chart's title)
        return core.load_model(core.ENCODER)
    return common.load(base, default)


def shown_name(name: str) -> str:
    """A model's name as the page shows it: a folder (a run's base may be one) by its last part, so
    no server path reaches the page; registered names and Hub ids as they are."""
    name = str(name or "").strip()
    if os.path.isabs(name) or name.startswith(("./", "../", "~")):
        return f"folder {os.path.basename(os.path.normpath(name)) or name}"
    return name


def compare_side(lm: core.LoadedModel, text: str, pair: str | None, who: str, name: str | None = None):
    """Prediction, attributions, bar chart and coloured tokens of one side; ``name``: the model as the
    page names it (default: ``shown_name(lm.name)``)."""
    pred = core.predict(lm, text, pairs=pair)[0]
    attr = core.attribute(lm, text, target=None, n_steps=COMPARE_STEPS, pair=pair)
    html_ = core.attribution_tokens_html(attr, merge=True,
                                         title=f"{who}: words coloured by their attribution to “{attr.target}”")
    bar = plots.prob_bar(pred.labels, pred.probs, title=f"{who}: {name or shown_name(lm.name)}")
    return pred, attr, bar, html_


# --------------------------------------------------------------------------- progress rendering
def progress_html(step: int, max_steps: int, eta: float | None, what: str, measuring: bool = False) -> str:
    """The bar and its line; ``measuring``: say so while there is no ETA yet (training, not a probe)."""
    frac = min(1.0, step / max(1, max_steps))
    eta_s = f" · about {_duration(eta)} left" if eta is not None else f" · time left: {core.MEASURING}" if measuring else ""
    return (f'<div class="bv-ft-bar" role="progressbar" aria-valuenow="{step}" aria-valuemax="{max_steps}">'
            f'<div style="width:{frac * 100:.1f}%"></div></div>'
            f'<div class="bv-ft-bar-text">{esc(what)}: step {step} of {max_steps} ({frac:.0%}){eta_s}</div>')


def _duration(s: float) -> str:
    s = max(0.0, float(s))
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.1f} min"


class Live:
    """What the streaming handler has seen of the current run."""

    def __init__(self):
        self.mode = ""
        self.k, self.n = 0, 1
        self.step, self.max_steps, self.eta = 0, 1, None
        self.stage = "starting"
        self.train: list[tuple[float, float]] = []
        self.evals: list[dict] = []

    def new_mode(self, mode: str, k: int, n: int) -> None:
        self.mode, self.k, self.n = mode, k, n
        self.step, self.max_steps, self.eta, self.stage = 0, 1, None, "loading the base model"
        self.train, self.evals = [], []

    def add(self, event: dict) -> bool:
        """Take one job event; True when the page should be redrawn."""
        kind = event.get("kind")
        if kind == "mode":
            self.new_mode(event["mode"], event["index"], event["of"])
            return True
        if kind != "progress":
            return False
        self._progress(event)
        return True

    def _progress(self, ev: dict) -> None:
        self.step, self.max_steps = int(ev.get("step", 0)), int(ev.get("max_steps") or 1)
        self.eta = ev.get("eta")
        logs = ev.get("logs") or {}
        if "loss" in logs:
            self.train.append((self.step, float(logs["loss"])))
        if any(k.startswith("eval_") for k in logs):
            self.evals.append({"step": self.step, **{k: v for k, v in logs.items() if k.startswith("eval_")}})
            self.stage = "training"
        elif "stage" in logs:
            self.stage = str(logs["stage"])
        elif "loss" in logs:
            self.stage = "training"

    @property
    def timed(self) -> bool:
        """A run whose ETA comes from its measured step rate (a probe has none: it has two steps)."""
        return self.mode != "probe" and self.step < self.max_steps

    @property
    def what(self) -> str:
        lead = f"{self.mode} ({self.k} of {self.n})" if self.n > 1 else self.mode
        return f"{lead}, {self.stage}"

    def status(self) -> str:
        bits = [f"**Training {esc(self.what)}**"]
        if self.train:
            bits.append(f"loss {self.train[-1][1]:.4f}")
        if self.evals:
            e = self.evals[-1]
            if e.get("eval_accuracy") is not None:
                bits.append(f"validation accuracy {e['eval_accuracy']:.1%}")
            if e.get("eval_macro_f1") is not None:
                bits.append(f"macro-F1 {e['eval_macro_f1']:.3f}")
        return " · ".join(bits)

    def figure(self):
        if self.mode == "probe" and not self.train:
            return plots.empty_figure("Probe mode has no training curve: features, then a logistic regression.")
        return plots.training_curves(self.train, self.evals, self.max_steps, title=f"Training curves: {self.mode}")


# --------------------------------------------------------------------------- events
def wire(f: SimpleNamespace, *, demo: gr.Blocks | None = None, default: str, model_dd: gr.Dropdown, predict_text: gr.Textbox,
         predict_pair: gr.Textbox, tabs: gr.Tabs, heavy: dict,
         after_run: tuple[Callable, list, object] | None = None, settings=None) -> None:
    """Connect the tab's events. ``after_run`` = (fn, inputs, outputs) run after a successful
    training (the app's "load model" handler, so the Model tab shows the new model)."""

    # ---------------------------------------------------------------- upload + mapping
    @common.guard
    def on_upload(path):
        visitor.upload(path)  # public mode: counted, and deleted once read
        table, guess, notes, refused = read_upload(path)
        visitor.discard(path)
        if table is None:
            empty = gr.update(choices=[], value=None)
            return {f.table: None, f.refused: refused, f.notices: notes,
                    f.preview: EMPTY_PREVIEW, f.text_col: empty,
                    f.label_col: empty, f.pair_col: gr.update(choices=[("(none)", NONE)], value=NONE),
                    f.multi: False, f.report: ""}
        cols = list(table.columns)
        return {
            f.table: table, f.refused: None, f.notices: notes,
            f.preview: table.preview(PREVIEW_ROWS),
            f.text_col: gr.update(choices=cols, value=guess.text),
            f.label_col: gr.update(choices=cols, value=guess.label),
            f.pair_col: gr.update(choices=[("(none)", NONE), *[(c, c) for c in cols]], value=guess.pair or NONE),
            f.multi: False,
            f.report: report_md(table, guess.text, guess.label, guess.pair, False),
        }

    f.upload.change(on_upload, inputs=[f.upload],
                    outputs=[f.table, f.refused, f.notices, f.preview, f.text_col, f.label_col, f.pair_col, f.multi,
                             f.report],
                    api_name="finetune_upload", api_visibility="undocumented", concurrency_limit=2)

    @common.guard
    def on_mapping(table, text_col, label_col, pair_col, multi_label):
        return report_md(table, text_col, label_col, pair_col, multi_label)

    gr.on([f.text_col.input, f.label_col.input, f.pair_col.input, f.multi.input], on_mapping,
          inputs=[f.table, f.text_col, f.label_col, f.pair_col, f.multi], outputs=f.report,
          api_name="finetune_report", api_visibility="undocumented", trigger_mode="always_last",
          show_progress="minimal")

    @common.guard
    def on_val_upload(path):
        if not path:
            return None, None, ""
        visitor.upload(path)
        try:
            t = core.read_table(path)
        except core.DataError as exc:
            return None, refusal(path, exc, "validation file"), f"**Error in the validation file:** {esc(exc)}"
        finally:
            visitor.discard(path)
        notes = [f"Validation file **{esc(t.name)}**: {t.n_rows:,} rows."]
        notes += [f"Note: {esc(n)}" for n in t.notices]
        return t, None, "  \n".join(notes)

    f.val_upload.change(on_val_upload, inputs=[f.val_upload], outputs=[f.val_table, f.val_refused, f.notices],
                        api_visibility="private", concurrency_limit=2)

    # ---------------------------------------------------------------- training (streamed)
    def arm(flag: CancelFlag):
        flag.arm()

    def train(flag: CancelFlag, table, val_table, text_col, label_col, pair_col, multi_label, base, mode, name,
              epochs, lr, batch, max_len, seed, patience, val_fraction, warmup=None, refused=None, val_refused=None):
        """Stream the job's progress; the final yield shows the results and the verdict."""
        cancel = flag.event
        if cancel.is_set():  # cancelled while waiting in the queue
            flag.arm()
            yield {f.status: "**Cancelled** before training started.", f.bar: ""}
            return
        visitor.check_model(base, default)  # public mode: another visitor's run is no base
        plan = plan_from_fields(table, val_table, text_col, label_col, pair_col, multi_label, base, mode, name,
                                epochs, lr, batch, max_len, seed, patience, val_fraction, warmup, refused, val_refused)
        plan = visitor.claim(plan)  # public mode: quota checked, the runs saved as this visitor's
        live = Live()
        settings_md = settings_line(plan)
        yield {f.status: "**Starting…** loading the base model", f.bar: progress_html(0, 1, None, "starting"),
               f.verdict: settings_md,
               f.curves: plots.empty_figure("The curves appear after the first logged steps."), f.metrics: "",
               f.per_class: per_class_frame([]), f.confusion: plots.empty_figure("The confusion matrix appears at the end."),
               f.wrong: wrong_frame([]), f.wrong_csv: None, f.results: None, f.selected: None, f.selected_md: ""}
        job = core.FinetuneJob(plan, cancel=cancel).start()
        last, dirty = 0.0, False
        try:
            for event in job.events(timeout=0.2):
                if event is not None:
                    dirty = live.add(event) or dirty
                now = time.monotonic()
                if dirty and now - last >= UPDATE_EVERY:
                    last, dirty = now, False
                    note = "  \nCancelling: saving the best weights so far…" if cancel.is_set() else ""
                    yield {f.status: live.status() + note,
                           f.bar: progress_html(live.step, live.max_steps, live.eta, live.what, live.timed),
                           f.curves: live.figure()}
        finally:
            if job.running:  # the page went away (or the event was cancelled): stop the orphan run
                job.cancel()
            if flag.event is cancel:
                flag.arm()
        results, error = job.results, job.error
        if error is not None:
            if isinstance(error, core.CancelledError):
                yield {f.status: f"**Cancelled:** {esc(error)}", f.bar: ""}
                return
            raise common.user_error(error)
        out = {
            f.status: ("**Cancelled.** " if any(r.cancelled for r in results) else "**Done.** ")
            + ", ".join(f"{esc(r.name)} saved" for r in results) + ".",
            f.bar: progress_html(live.max_steps, live.max_steps, None, live.mode + ", done"),
            f.verdict: verdict_md(results) + "  \n" + settings_md,
            f.metrics: metrics_md(results) + "".join(f"  \nNote: {esc(n)}" for n in plan.notices),
            f.per_class: per_class_frame(results),
        }
        if live.train or live.evals:
            out[f.curves] = live.figure()
        else:
            out[f.curves] = plots.empty_figure("Probe mode has no training curve: features, then a logistic regression.")
        cms = [(f"{r.mode}: {r.name}", r.metrics["confusion_matrix"]) for r in results
               if r.metrics.get("confusion_matrix") is not None]
        out[f.confusion] = (plots.confusion_matrices(cms, results[-1].labels) if cms else
                            plots.empty_figure("No confusion matrix for multi-label data (see the per-class table)."))
        rows = wrong_rows(results)
        out[f.wrong] = wrong_frame(rows)
        out[f.wrong_csv] = visitor.own_file(wrong_csv(rows))  # public mode: validation texts, for this visitor only
        out[f.results] = rows
        newest = results[-1].name
        out[model_dd] = gr.update(choices=common.model_choices(default), value=newest)
        runs = run_choices()
        out[f.run] = gr.update(choices=runs, value=newest)
        out[f.runs_table] = runs_frame()
        out[f.base] = gr.update(choices=common.model_choices(default, first=(core.DEFAULT_BASE,)))
        yield out

    train_outputs = [f.status, f.bar, f.verdict, f.curves, f.metrics, f.per_class, f.confusion, f.wrong, f.wrong_csv, f.results,
                     f.selected, f.selected_md, model_dd, f.run, f.runs_table, f.base]  # a list: a stable API order
    train_inputs = [f.flag, f.table, f.val_table, f.text_col, f.label_col, f.pair_col, f.multi, f.base, f.mode, f.name,
                    f.epochs, f.lr, f.batch, f.max_len, f.seed, f.patience, f.val_fraction, f.warmup, f.refused,
                    f.val_refused]  # the two states are not part of the API
    armed = f.start.click(arm, inputs=[f.flag], outputs=None, queue=False, api_visibility="private")
    started = armed.then(
        common.guard_stream(visitor.one_at_a_time(train, f.status, offer=f.run)), inputs=train_inputs, outputs=train_outputs,
        api_name="finetune_start", api_visibility="undocumented", concurrency_limit=visitor.finetune_concurrency(),
        concurrency_id="finetune",
        show_progress_on=[f.status],
    )
    if after_run is not None:
        fn, ins, outs = after_run
        started.success(fn, inputs=ins, outputs=outs, api_visibility="private", **heavy)

    def on_cancel(flag: CancelFlag):
        flag.event.set()
        return "**Cancelling…** the run stops within a step and saves the best weights so far."

    f.cancel.click(on_cancel, inputs=[f.flag], outputs=[f.status], api_name="finetune_cancel",
                   api_visibility="undocumented", queue=False)

    # ---------------------------------------------------------------- after a run
    def on_select(rows, evt: gr.SelectData):
        w = pick_row(rows, evt.row_value)
        if w is None:
            return None, "", gr.update(), gr.update(), gr.update()
        what = f"Selected row {w['row']} ({esc(w['mode'])}): true **{esc(w['true'])}**, predicted " \
               f"**{esc(w['predicted'])}**."
        return w, what, w["text"], w.get("pair") or "", gr.update(value=w["run"])

    f.wrong.select(on_select, inputs=[f.results], outputs=[f.selected, f.selected_md, f.cmp_text, f.cmp_pair, f.run],
                   api_visibility="private", queue=False)

    @common.guard
    def send_to_explorer(w):
        if not w:
            raise core.InputError("Select a row of the misclassified table first.")
        return {predict_text: w["text"], predict_pair: w.get("pair") or "", tabs: gr.Tabs(selected="predict"),
                model_dd: gr.update(value=w["run"])}

    f.send.click(send_to_explorer, inputs=[f.selected], outputs={predict_text, predict_pair, tabs, model_dd},
                 api_visibility="private", queue=False)

    @common.guard
    def download(run):
        visitor.check(run)  # public mode: another visitor's run answers as an unknown one
        return visitor.keep_zip(core.zip_run(run))

    f.zip_btn.click(download, inputs=[f.run], outputs=[f.zip_file], api_name="finetune_zip",
                    api_visibility="undocumented", concurrency_limit=1, concurrency_id="zip")

    @common.guard
    def compare(run, text, pair):
        visitor.check(run)
        info = core.load_run_info(core.run_folder(run)) or {}
        base = info.get("base")
        if not base:
            raise core.InputError(f"The run {run!r} does not say which base model it started from.")
        pair = pair if pair and pair.strip() else None
        lm_b = load_base(base, default)
        lm_t = common.load(run, default)
        pb, ab, bar_b, html_b = compare_side(lm_b, text, pair, "Base", shown_name(base))
        pt, at, bar_t, html_t = compare_side(lm_t, text, pair, "Fine-tuned", run)
        md = (f"**Base** {esc(shown_name(base))} predicts **{esc(pb.label)}** ({max(pb.probs):.1%}); "
              f"**fine-tuned** {esc(run)} predicts **{esc(pt.label)}** ({max(pt.probs):.1%}). "
              f"Each model's attributions are to its own predicted class (Integrated Gradients, {COMPARE_STEPS} steps).")
        if lm_b.warnings:
            md += "  \n" + common.warnings_md(lm_b)
        return {f.cmp_md: md, f.cmp_base_bar: bar_b, f.cmp_tuned_bar: bar_t, f.cmp_base_tokens: html_b,
                f.cmp_tuned_tokens: html_t}

    f.cmp_btn.click(compare, inputs=[f.run, f.cmp_text, f.cmp_pair],
                    outputs=[f.cmp_md, f.cmp_base_bar, f.cmp_tuned_bar, f.cmp_base_tokens, f.cmp_tuned_tokens],
                    api_name="finetune_compare", api_visibility="undocumented", **heavy)

    @common.guard
    def push(run, repo_id, token, private):
        visitor.check(run)
        return push_to_hub(run, repo_id, token, private)

    f.hub_btn.click(push, inputs=[f.run, f.hub_repo, f.hub_token, f.hub_private], outputs=[f.hub_md],
                    api_visibility="private", concurrency_limit=1, concurrency_id="hub")

    def refresh_runs(chosen=None):
        if not visitor.ready():  # public mode, owner not known yet: the page-load refresh after it fills these
            return {f.runs_table: gr.skip(), f.run: gr.skip(), model_dd: gr.skip()}
        runs = run_choices()
        return {f.runs_table: runs_frame(), f.run: gr.update(choices=runs, value=chosen if chosen in runs else None),
                model_dd: gr.update(choices=common.model_choices(default))}

    f.refresh.click(refresh_runs, inputs=[f.run], outputs={f.runs_table, f.run, model_dd}, api_visibility="private",
                    queue=False)
    if demo is not None:  # runs saved by other sessions (or before a restart) appear on page load
        visitor.on_page_load(demo, refresh_runs, inputs=[f.run], outputs={f.runs_table, f.run, model_dd})

    def on_run(run):
        """Download, compare, push and delete need a run: enabled once one is chosen."""
        on = gr.update(interactive=bool(run))
        return on, on, on, on

    f.run.change(on_run, inputs=[f.run], outputs=[f.zip_btn, f.cmp_btn, f.hub_btn, f.delete_btn], api_visibility="private",
                 queue=False, show_progress="hidden")

    # ---------------------------------------------------------------- public mode: delete runs and data
    @common.guard
    def delete_one(run):
        msg = visitor.delete_run(run)
        out = refresh_runs()
        runs = run_choices()
        out.update({f.delete_md: msg, f.run: gr.update(choices=runs, value=runs[0] if runs else None)})
        return out

    @common.guard
    def delete_everything():
        msg = visitor.delete_my_data()
        out = refresh_runs()
        out.update({f.delete_md: msg, f.zip_file: None, f.run: gr.update(choices=[], value=None)})
        return out

    f.delete_btn.click(delete_one, inputs=[f.run], outputs={f.runs_table, f.run, model_dd, f.delete_md},
                       api_name="delete_run", api_visibility="undocumented", concurrency_limit=1,
                       concurrency_id="delete")
    f.delete_all.click(delete_everything, outputs={f.runs_table, f.run, model_dd, f.delete_md, f.zip_file},
                       api_name="delete_my_data", api_visibility="undocumented", concurrency_limit=1,
                       concurrency_id="delete")


CSS = """
.bv-ft-bar { height: 12px; background: var(--neutral-200, #e5e7eb); border-radius: 6px; overflow: hidden; }
.bv-ft-bar > div { height: 100%; background: var(--color-accent, #f97316); transition: width 0.4s ease; }
.bv-ft-bar-text { font-size: 0.9em; margin-top: 4px; }
"""
