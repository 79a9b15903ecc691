"""The Fine-tune tab's pure helpers: reading an upload and its report, the tab's fields to a plan,
the results (verdict, metrics, per-class and misclassified tables, runs), the base-vs-fine-tuned
comparison and the live progress. No event wiring here (that is ``finetune_tab``), so each helper
is called and tested alone."""

from __future__ import annotations

import csv
import math
import os
import tempfile
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

import bertviz_app as core

from . import guards, model_loading, plots, visitor
from .markup import esc

COMPARE_STEPS = 32  # Integrated Gradients steps for the base-vs-fine-tuned comparison
STOPPED_BY = {  # which validation signal ended a run early (RunResult.stopped_by)
    "metric": "the validation macro-F1 stopped rising",
    "loss": "the validation loss stopped falling (the model was starting to memorise the training rows)",
    None: "the validation scores stopped improving",
}


def core_train_help(field: str) -> str:
    return core.TrainConfig.__dataclass_fields__[field].metadata["help"]


# --------------------------------------------------------------------------- data intake (pure helpers)
def read_upload(path: str | None, settings: core.Settings | None = None):
    """-> (Table | None, ColumnGuess | None, notices Markdown, refusal | None). A DataError gives an
    **Error:** line and the refusal a later Start repeats (``refusal``). ``settings``: the upload limits."""
    if not path:
        return None, None, "", None
    settings = settings if settings is not None else core.Settings()
    try:
        table = core.read_table(path, max_upload_mb=settings.max_upload_mb, max_rows=settings.max_rows)
    except core.DataError as exc:
        return None, None, f"**Error:** {esc(exc)}", refusal(path, exc)
    guess = core.guess_columns(table)
    return table, guess, table_notes(table, guess), None


def table_notes(table, guess) -> str:
    """The notices line of a table read for the classifier: its size, what the reader did, the columns guessed."""
    lines = [f"**{esc(table.name)}**: {table.n_rows:,} rows, {len(table.columns)} columns."]
    lines += [f"Note: {esc(n)}" for n in table.notices]
    if guess.reasons:
        lines.append("Guessed columns: " + "; ".join(esc(r) for r in guess.reasons)
                     + ". Change them below if they are wrong.")
    return "  \n".join(lines)


def refusal(path: str | None, exc: Exception, what: str = "training file") -> str:
    """Why an uploaded training (or ``what``) file was refused, for a later Start (``guards.refused_file``)."""
    return guards.refused_file(path, exc, what)


def no_text(table) -> str | None:
    """Why no column of ``table`` can be the text column (every one is numbers, empty or the label: an
    ``id,label`` file), naming the columns found; None when one can."""
    if core.guess_columns(table).text is not None:
        return None
    return core.no_text_message(table, "choose the column that holds them as the text column")


def report_md(table, text_col, label_col, pair_col, multi_label, settings: core.Settings | None = None) -> str:
    """The validation report for the chosen columns: errors (block training) then warnings, with the
    limits of ``settings`` (default: ``Settings()``). No text column chosen in a table without one:
    says so (``no_text``) instead of "choose the text column"."""
    if table is None:
        return ""
    if not text_col and (why := no_text(table)):
        return f"**Error:** {esc(why)}  \n**Fix the errors above before training.**"
    try:
        rep = core.review_columns(table, text_col, label_col, pair_col or None, bool(multi_label), settings=settings)
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


def setting_number(v, name: str, whole: bool = False, example: str = "2",
                   blank: str = "to have it chosen from the data size"):
    """A setting typed in a text box (or given as a number by an API caller): None when blank or
    "auto"; else the number, or InputError saying what to type (``blank``: what a blank box does). Ranges are the
    core's to check."""
    v = _blank(v)
    if isinstance(v, str):
        t = v.strip()
        if not t or t.lower() == "auto":
            return None
        try:
            v = float(t)
        except ValueError:
            raise core.InputError(f"{name}: {t!r} is not a number; type one such as {example}, or leave the box "
                                  f"blank {blank}.") from None
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        if v is None:
            return None
        raise core.InputError(f"{name}: {v!r} is not a number; type one such as {example}, or leave it blank.")
    if whole:
        if not float(v).is_integer():
            raise core.InputError(f"{name} must be a whole number, got {v:g}.")
        return int(v)
    return float(v)


def frozen_layers(v) -> int | None:
    """The Frozen layers box: None when blank (every layer trains), else a whole number (the core checks its range)."""
    return setting_number(v, "Frozen layers", whole=True, example="2", blank="to train every layer")


def head_settings(epochs, lr, batch, seed, patience, val_fraction, warmup=None, freeze=None, *,
                  epochs_example: str = "2", patience_example: str = "2") -> dict:
    """A tagger's or a reader's training fields (text boxes; blank = automatic) as ``plan_tagger`` /
    ``plan_reader``'s keyword arguments; InputError naming the field and an example for one that is not a number."""
    seed = setting_number(seed, "Seed", whole=True, example="42")
    return dict(epochs=setting_number(epochs, "Epochs", example=epochs_example),
                learning_rate=setting_number(lr, "Learning rate", example="5e-5"),
                batch_size=setting_number(batch, "Batch size", whole=True, example="16"),
                warmup_ratio=setting_number(warmup, "Warm-up fraction", example="0.1"),
                seed=42 if seed is None else seed,
                patience=setting_number(patience, "Early-stopping patience", whole=True, example=patience_example),
                val_fraction=float(val_fraction or 0.2), freeze_layers=frozen_layers(freeze))


def plan_from_fields(table, val_table, text_col, label_col, pair_col, multi_label, base, mode, name, epochs, lr, batch,
                     max_len, seed, patience, val_fraction, warmup=None, refused=None, val_refused=None,
                     settings: core.Settings | None = None, freeze=None):
    """The tab's fields -> ``core.plan_finetune`` (blank numbers = automatic). Raises the core's
    clear errors (DataError, InputError, ModelNotFoundError...). ``refused``/``val_refused``: why
    the uploaded training/validation file was refused (the file is still shown: say why, not "upload one").
    ``settings``: the server's (models folder, limits, whether a base may be a folder)."""
    if table is None:
        raise core.DataError(refused or "Upload a training file first (.csv, .tsv or .txt with a header row).")
    if val_refused and val_table is None:
        raise core.DataError(val_refused.replace("Fix the file and upload it again.", "Fix the file and upload it "
                             "again, or remove it to hold out part of the training data instead."))
    if not text_col and (why := no_text(table)):
        raise core.DataError(why)
    if not text_col or not label_col:
        raise core.DataError("Choose two different columns for the text and the label.")
    seed = setting_number(seed, "Seed", whole=True, example="42")
    max_len = setting_number(max_len, "Max length", whole=True, example="128")
    return core.plan_finetune(
        table, text_column=text_col, label_column=label_col, pair_column=pair_col or None,
        multi_label=bool(multi_label),
        val_table=val_table, base=base, mode=mode or "full", name=name,
        epochs=setting_number(epochs, "Epochs", example="3"),
        learning_rate=setting_number(lr, "Learning rate", example="5e-5"),
        batch_size=setting_number(batch, "Batch size", whole=True, example="16"),
        warmup_ratio=setting_number(warmup, "Warm-up fraction", example="0.1"),
        max_length=max_len or None, seed=42 if seed is None else seed,
        patience=setting_number(patience, "Early-stopping patience", whole=True, example="3"),
        val_fraction=float(val_fraction or 0.2), settings=settings, freeze_layers=frozen_layers(freeze),
    )


# --------------------------------------------------------------------------- results (pure helpers)
def run_choices(models_dir: Path = core.Settings.models_dir) -> list[str]:
    """The saved runs of ``models_dir`` this visitor may choose (public mode: their own)."""
    try:
        return [r["name"] for r in visitor.visible(core.list_runs(models_dir))]
    except Exception:  # noqa: BLE001 - an unreadable models folder must not break the page
        return []


def runs_frame(models_dir: Path | None = core.Settings.models_dir) -> pd.DataFrame:
    """One row per data set (data_hash): the newest probe and full runs of ``models_dir`` side by side
    (None: no runs, the table's columns only)."""
    cols = ["data", "classes", "train/val rows", "probe run", "probe accuracy", "probe macro-F1", "full run",
            "full accuracy", "full macro-F1"]
    try:
        runs = [] if models_dir is None else visitor.visible(core.list_runs(models_dir))
    except Exception:  # noqa: BLE001
        runs = []
    groups: dict[str, dict[str, list[dict]]] = {}
    taggers = [tagger_runs_row(r) for r in runs if tagger_run(r)]  # a row each (entity F1, not accuracy)
    taggers += [reader_runs_row(r) for r in runs if reader_run(r)]  # ... and a reader's (exact match and F1)
    runs = [r for r in runs if not tagger_run(r) and not reader_run(r)]
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
    return pd.DataFrame(rows + taggers, columns=cols)


def tagger_run(info: dict) -> bool:
    """A token classifier's run (``run.json``'s task)."""
    return info.get("task") == "token-classification"


def tagger_runs_row(info: dict) -> list[str]:
    """A tagger run as a row of the past-runs table: its entity F1 beside its name (the accuracy and macro-F1
    columns are a classifier's: left blank)."""
    f1 = (info.get("metrics") or {}).get("entity_f1")
    what = "tagger" + (f", entity F1 {f1:.3f}" if isinstance(f1, (int, float)) else "")
    name = f"{info.get('name', '?')} ({what})" + (" (cancelled)" if info.get("cancelled") else "")
    types = dict.fromkeys(t[2:] if t[:2] in ("B-", "I-") else t for t in info.get("labels") or [] if t != "O")
    return [f"{info.get('source') or 'data'} · {str(info.get('data_hash', '?'))[:8]}", ", ".join(types),
            f"{info.get('train_sentences', '?')}/{info.get('val_sentences', '?')} sentences", "", "", "", name, "", ""]


def reader_run(info: dict) -> bool:
    """A question answering model's run (``run.json``'s task)."""
    return info.get("task") == "question-answering"


def reader_runs_row(info: dict) -> list[str]:
    """A reader run as a row of the past-runs table: its held-out exact match and F1 beside its name (the classes,
    accuracy and macro-F1 columns are a classifier's: left blank)."""
    m = info.get("metrics") or {}
    em, f1 = m.get("exact"), m.get("f1")
    scores = f", exact match {em:.1%}, F1 {f1:.3f}" if isinstance(em, (int, float)) and isinstance(f1, (int, float)) \
        else ""
    name = f"{info.get('name', '?')} (reader{scores})" + (" (cancelled)" if info.get("cancelled") else "")
    return [f"{info.get('source') or 'data'} · {str(info.get('data_hash', '?'))[:8]}", "",
            f"{info.get('train_questions', '?')}/{info.get('val_questions', '?')} questions", "", "", "", name, "", ""]


# runs_frame's column widths (shares of the table's width, adding up to all of it): each header fits on one line
# in a 1280-px page (the longest, "train/val rows", "probe accuracy", "probe macro-F1": 14 characters, ~140 px);
# the data set and run names wrap in theirs. Left to gradio, the columns took their cells' unwrapped widths (a
# 42-character data set, 29-character run names), the table ran past its box and the headers broke inside words
# ("accura|cy": three lines, 79 px).
RUNS_WIDTHS = ["12%", "9%", "11.5%", "11.5%", "11.5%", "11.5%", "11%", "11%", "11%"]


def _pct(x) -> str:
    return "" if x is None else f"{x:.1%}"


def settings_line(plan) -> str:
    """How the settings were chosen, one line."""
    c = plan.config
    chosen = (f"Settings: {c.epochs:g} epochs at most, learning rate {c.learning_rate:g}, batch {c.batch_size}, "
              f"warm-up {c.warmup_ratio:.0%}, early-stopping patience {c.early_stopping_patience}"
              + (f", embeddings and layers 0-{c.freeze_layers - 1} frozen" if c.freeze_layers else ""))
    return chosen + (f" (automatic: {esc('; '.join(plan.auto))})." if plan.auto else ".")


VERDICT_HEAD = {"learned": "Learned.", "weak": "Weak.", "not_learned": "Not learned.",
                "cancelled": "Cancelled: not judged."}  # records without a heading


def verdict_md(results: list) -> str:
    """Each run's verdict (did it learn? against the majority class and the probe) with what to change."""
    lines = []
    for r in results:
        v = r.verdict
        if v is None:
            continue
        who = f"{esc(r.name)} ({r.mode})"
        head = v.heading or VERDICT_HEAD.get(v.status, v.status)  # what decided it (verdict.HEADINGS)
        lines.append(f"**{esc(head)}** {who}: {esc(v.message)}")
        lines += [f"- Try: {esc(tip)}" for tip in v.suggestions]
    return "  \n".join(lines)


def _num(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def calibration_md(r, named: bool = False) -> str:
    """One line: the temperature the run fitted on half its validation split and judged on the other half
    (``metrics["calibration"]``): T, ECE/NLL/Brier before and after on the judging half, whether it helped
    there and so was saved as calibration.json (predict applies it) or not, and why; "" for a run without
    one (multi-label). A run from before the judging (no ``helps``) saved T fitted on every validation row."""
    c = r.metrics.get("calibration")
    if not isinstance(c, dict) or not c:
        return ""
    who = f" ({esc(r.name)})" if named else ""
    t = c.get("temperature")
    if "helps" not in c:  # an older run: T fitted on every validation row, saved, "after" measured there too
        if not isinstance(t, (int, float)):
            return ""
        rows = f"the {c['rows']:,} validation rows" if isinstance(c.get("rows"), int) else "the validation rows"
        return (f"Temperature scaling{who}: **T = {t:.3f}** (saved as calibration.json; predict applies it) · "
                f"ECE {_num(c.get('ece_before'))} \u2192 {_num(c.get('ece_after'))} · NLL {_num(c.get('nll_before'))} "
                f"\u2192 {_num(c.get('nll_after'))}; \u201cafter\u201d is measured on {rows} T was fitted on, so it "
                "is optimistic")
    if not isinstance(t, (int, float)):
        return (f"Temperature scaling{who}: {esc(c.get('judgement') or 'no temperature fitted.')} Predict reports the "
                "model's raw softmax")
    judged = int(c.get("judged_on_rows") or 0)
    verdict = ("it **helps** there, so it is **saved** as calibration.json and predict applies it" if c.get("helps")
               else "it does **not help** there (it must lower the NLL without raising the ECE), so it is **not "
                    "saved**: predict reports the model's raw softmax")
    return (f"Temperature scaling{who}: **T = {t:.3f}**, fitted on {int(c.get('fitted_on_rows') or 0):,} validation "
            f"rows and judged on the other {judged:,}: ECE {_num(c.get('ece_before'))} \u2192 "
            f"{_num(c.get('ece_after'))} · NLL {_num(c.get('nll_before'))} \u2192 {_num(c.get('nll_after'))} · "
            f"Brier {_num(c.get('brier_before'))} \u2192 {_num(c.get('brier_after'))} on those {judged:,}; {verdict}")


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
        if calibration := calibration_md(r):
            lines.append(calibration)
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
        lines += [line for r in results if (line := calibration_md(r, named=True))]
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
    """The misclassified rows as a table: mode, row, the true label, the prediction and its confidence first, the
    text (as given) last, so a long text wraps in the room left instead of pushing the verdict out of view."""
    pairs = any(w.get("pair") for w in rows)
    cols = ["mode", "row", "true", "predicted", "confidence", "text", *(["second text"] if pairs else [])]
    data = [[w["mode"], w["row"], w["true"], w["predicted"], round(float(w["confidence"]), 3), w["text"],
             *([w.get("pair") or ""] if pairs else [])] for w in rows]
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


def push_to_hub(run: str | None, repo_id: str | None, token: str | None, private: bool = True,
                models_dir: Path = core.Settings.models_dir) -> str:
    """Upload a run folder to a Hub model repository (``core.push_run``); the token is never shown."""
    url = core.push_run(run, repo_id, token, private, models_dir=models_dir)
    return f"Pushed **{esc(run)}** to [{esc((repo_id or '').strip())}]({url})."


def load_base(base: str, default: str, settings: core.Settings) -> core.LoadedModel:
    if base == core.ENCODER:  # by its name: loading it by its folder made the folder its name (the chart's title)
        return core.load_model(core.ENCODER, settings=settings)
    return model_loading.load(base, default, settings)


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
    html_ = core.attribution_tokens_html(attr, merge=True, min_change=lm.settings.min_change,
                                         title=f"{who}: words coloured by their attribution to “{attr.target}”")
    # a run's calibration.json: its probabilities are temperature-scaled (the other side's may be raw): say so
    scaled = f" (temperature-scaled, T = {pred.temperature:.3g})" if pred.temperature != 1.0 else ""
    bar = plots.prob_bar(pred.labels, pred.probs, title=f"{who}: {name or shown_name(lm.name)}{scaled}")
    return pred, attr, bar, html_


# --------------------------------------------------------------------------- progress rendering
def progress_html(step: int, max_steps: int, eta: float | None, what: str, measuring: bool = False) -> str:
    """The bar and its line; ``measuring``: say so while there is no ETA yet (training, not a probe)."""
    frac = min(1.0, step / max(1, max_steps))
    eta_s = (f" · about {_duration(eta)} left" if eta is not None
             else f" · time left: {core.MEASURING}" if measuring else "")
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
            if e.get("eval_entity_f1") is not None:  # a tagger's
                bits.append(f"validation entity F1 {e['eval_entity_f1']:.3f}")
            if e.get("eval_exact") is not None:  # a reader's
                bits.append(f"held-out exact match {e['eval_exact']:.1%}")
            if e.get("eval_f1") is not None:
                bits.append(f"F1 {e['eval_f1']:.3f}")
        return " · ".join(bits)

    def figure(self):
        if self.mode == "probe" and not self.train:
            return plots.empty_figure("Probe mode has no training curve: features, then a logistic regression.")
        fig = plots.training_curves(self.train, self.evals, self.max_steps, title=f"Training curves: {self.mode}")
        return answer_curves(fig, self.evals)


ANSWER_CURVES = (("eval_exact", "exact match", "#2ca02c"), ("eval_f1", "F1", "#9467bd"))  # a reader's evaluations


def answer_curves(fig, evals: list[dict]):
    """A reader's held-out exact match and F1 by step added to ``plots.training_curves``' validation panel (which
    draws the classifier's and the tagger's metrics); ``fig`` unchanged for a run without them."""
    for key, name, color in ANSWER_CURVES:
        pts = [(e["step"], e[key]) for e in evals if e.get(key) is not None]
        if pts:
            xs, ys = zip(*pts)
            fig.add_trace(go.Scatter(x=list(xs), y=list(ys), mode="lines+markers", name=name, line=dict(color=color),
                                     marker=dict(size=7),
                                     hovertemplate=f"step %{{x}}: %{{y:.3f}}<extra>{name}</extra>"), row=1, col=2)
    return fig


