"""The Evaluate tab's pure helpers: a stored evaluation read back from its folder (``load_run``) and
drawn: summary, per-class and slice tables, confusion matrix, reliability diagram, [CLS] geometry and
the comparison with another model. Nothing here runs a model: every table and figure is made from
the run folder's files (metrics.json, predictions.csv, reliability.json, slices.json, and when the
evaluation has them layers.json, projections/ and comparison.json), so a reopened evaluation draws
the same page, and the geometry's layer, dimensions and colouring change without model work.

No event wiring here (that is ``evaluate_tab``), so each helper is called and tested alone.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

import bertviz_app as core
from bertviz_app.models.catalog import RUN_INFO

from . import plots
from .finetune_view import shown_name
from .markup import esc

__all__ = ["COLOURINGS", "DIMENSIONS", "RunView", "VECTORS", "calibration_md", "comparison_frame", "comparison_md",
           "confusion_figure", "disagreement_frame", "DISAGREEMENT_WIDTHS", "load_run", "per_class_frame", "pick_row",
           "pick_slice", "probes_figure", "range_text", "reliability_figure", "rows_frame", "rows_widths",
           "scatter_figure", "score_text", "slice_rows", "slices_frame", "stored_choices", "summary_md",
           "temperature_judgement", "wrong_rows", "MAX_LISTED", "MAX_POINTS", "shown_points", "SLICE_COLUMNS"]

COLOURINGS = [("true label", "true"), ("prediction", "predicted"), ("correct or not", "correct"),
              ("confidence", "confidence")]
DIMENSIONS = [("2-D", 2), ("3-D", 3)]
VECTORS = [("[CLS] vector", "cls"), ("mean of the word vectors", "mean")]
SLICE_COLUMNS = ["kind", "slice", "size", "accuracy", "95% interval", "misclassified"]
HOVER_CHARS = 80  # a point's text in its hover, cut here
MAX_POINTS = 5000  # points the scatter draws (a fixed random sample beyond it: the page stays quick to redraw)
MAX_LISTED = 1000  # rows a table lists (the most confident first); predictions.csv holds every row
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]
RIGHT, WRONG = "#2ca02c", "#d62728"


@dataclass(frozen=True, eq=False)
class RunView:
    """A stored evaluation as read from its folder. ``rows``: the evaluated rows in the file's order
    (each: index, row, text, pair, true, predicted, confidence, correct); ``slices``: metrics.json's
    slices worst first, each with its spreadsheet ``rows``; ``projections``: {(layer, "cls"|"mean"):
    (N, 3) float32} in the order of ``rows`` (None without geometry)."""

    name: str
    metrics: dict
    rows: list[dict]
    slices: list[dict]
    reliability: dict
    probes: list[dict] | None = None
    projections: dict | None = None
    comparison: dict | None = None
    hover: list[str] = field(default_factory=list)
    by_row: dict = field(default_factory=dict)  # spreadsheet row -> index into rows

    @property
    def labels(self) -> list[str]:
        return list(self.metrics.get("labels", []))

    @property
    def layers(self) -> list[int]:
        return sorted({layer for layer, _ in (self.projections or {})})

    @property
    def pairs(self) -> bool:
        return any(r["pair"] for r in self.rows)


# --------------------------------------------------------------------------- reading a run folder
def _json(path: Path, name: str, required: bool = True):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if not required:
            return None
        raise core.DataError(f"The evaluation {name} has no {path.name}: it was not written whole; evaluate the file "
                             "again.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise core.DataError(f"The evaluation {name}'s {path.name} cannot be read ({type(exc).__name__}); evaluate "
                             "the file again.") from None


def _unquote(cell: str) -> str:
    """A predictions.csv cell as the file gave it: ``safe_csv_cell`` put a ' before text starting with
    = + - @ (a spreadsheet would run it), taken off again here."""
    return cell[1:] if len(cell) > 1 and cell[0] == "'" and cell[1] in "=+-@\t\r" else cell


def _predictions(folder: Path, name: str, metrics: dict, info: dict) -> list[dict]:
    labels = list(metrics.get("labels", []))
    at = info.get("column_index") if isinstance(info.get("column_index"), dict) else {}
    exact = {w["row"]: w for w in metrics.get("misclassified", []) if isinstance(w, dict) and "row" in w}
    try:
        with (folder / "predictions.csv").open(encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader)
            n_added = 6 + len(labels) + (2 + len(labels) if metrics.get("comparison") else 0)  # + the other model's
            base = len(header) - n_added
            status_at = base + 5 + len(labels)
            if base < 1:
                raise core.DataError(f"The evaluation {name}'s predictions.csv has fewer columns than it should.")
            text_at = at.get("text")
            if not isinstance(text_at, int):  # a folder written elsewhere: the text column by its name
                cols = [c.strip() for c in header[:base]]
                wanted = (metrics.get("columns") or {}).get("text")
                text_at = cols.index(wanted) if wanted in cols else 0
            pair_at = at.get("pair")
            if pair_at is None and "column_index" not in info and (metrics.get("columns") or {}).get("pair"):
                cols = [c.strip() for c in header[:base]]
                pair_at = cols.index(metrics["columns"]["pair"]) if metrics["columns"]["pair"] in cols else None
            rows = []
            for cells in reader:
                if len(cells) != len(header) or cells[status_at] != "ok":
                    continue
                added = cells[base:]
                row = int(added[0])
                probs = [float(x) for x in added[3:3 + len(labels)]]
                pred = added[2]
                w = exact.get(row)
                text = w["text"] if w else _unquote(cells[text_at])
                pair = (w.get("pair") if w else _unquote(cells[pair_at])) if pair_at is not None else None
                rows.append({"index": len(rows), "row": row, "text": text, "pair": pair or None, "true": added[1],
                             "predicted": pred, "confidence": probs[labels.index(pred)] if pred in labels else
                             float("nan"), "correct": added[3 + len(labels)] == "true"})
    except FileNotFoundError:
        raise core.DataError(f"The evaluation {name} has no predictions.csv: evaluate the file again.") from None
    except (OSError, UnicodeDecodeError, csv.Error, ValueError, IndexError, StopIteration) as exc:
        raise core.DataError(f"The evaluation {name}'s predictions.csv cannot be read ({type(exc).__name__}); "
                             "evaluate the file again.") from None
    return rows


def _projections(folder: Path, n_rows: int) -> dict | None:
    for sub in (folder / "projections", folder):
        if (sub / "projections.json").is_file():
            found = core.load_projections(sub)
            out = {key: np.asarray(p.coords, dtype=np.float32) for key, p in found.items()}
            if any(c.shape[0] != n_rows for c in out.values()):
                raise core.DataError(f"The projections in {folder.name} do not have one point per evaluated row; "
                                     "evaluate the file again.")
            return out or None
    return None


def _hover(r: dict) -> str:
    text = plots.escape(r["text"].replace("\n", " "), HOVER_CHARS)
    pair = f"<br>second: {plots.escape(r['pair'].replace(chr(10), ' '), HOVER_CHARS)}" if r["pair"] else ""
    mark = "right" if r["correct"] else "WRONG"
    return (f"row {r['row']}: {text}{pair}<br>true {plots.escape(r['true'])} · predicted "
            f"{plots.escape(r['predicted'])} ({r['confidence']:.0%}, {mark})")


def load_run(folder: str | Path, name: str | None = None) -> RunView:
    """A stored evaluation's folder read back (DataError saying which file, when one is missing or
    damaged)."""
    folder = Path(folder)
    name = name or folder.name
    metrics = _json(folder / "metrics.json", name)
    if not isinstance(metrics, dict) or "accuracy" not in metrics or "labels" not in metrics:
        raise core.DataError(f"The evaluation {name}'s metrics.json is not an evaluation's; evaluate the file again.")
    info = _json(folder / RUN_INFO, name, required=False) or {}
    rows = _predictions(folder, name, metrics, info if isinstance(info, dict) else {})
    by_row = {r["row"]: r["index"] for r in rows}
    stored = _json(folder / "slices.json", name, required=False) or []
    members = {(s.get("kind"), s.get("name")): s.get("rows", []) for s in stored if isinstance(s, dict)}
    slices = [dict(s, rows=[int(r) for r in members.get((s.get("kind"), s.get("name")), [])])
              for s in metrics.get("slices", [])]
    reliability = _json(folder / "reliability.json", name, required=False) or {}
    layers = _json(folder / "layers.json", name, required=False)
    probes = layers.get("layers") if isinstance(layers, dict) else None  # the probes; None: impossible
    probes = [p for p in probes if isinstance(p, dict) and "layer" in p] if isinstance(probes, list) else None
    comparison = _json(folder / "comparison.json", name, required=False)
    return RunView(name=name, metrics=metrics, rows=rows, slices=slices, reliability=reliability, probes=probes,
                   projections=_projections(folder, len(rows)),
                   comparison=comparison if isinstance(comparison, dict) else None,
                   hover=[_hover(r) for r in rows], by_row=by_row)


# --------------------------------------------------------------------------- text and tables
def _pct(x) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1%}"


def score_text(x, fmt: str = ".3f") -> str:
    """A score as the Evaluate tab's tables write it ("0.812"; "–" for none). Shared by the classifier's view and
    the question answering view (``evaluate_reader``)."""
    return "–" if x is None else format(x, fmt)


def range_text(interval, fmt: str = ".3f") -> str:
    """An interval (lo, hi) as a table cell ("0.512–0.834"; "–" for none), as the tagger's view writes one."""
    return "–" if interval is None else f"{format(interval[0], fmt)}–{format(interval[1], fmt)}"


def _interval(iv) -> str:
    return "–" if not iv else f"{iv[0]:.1%} – {iv[1]:.1%}"


def summary_md(view: RunView) -> str:
    m = view.metrics
    cols = m.get("columns") or {}
    used = f"text {esc(cols.get('text'))}, label {esc(cols.get('label'))}" + (
        f", second text {esc(cols['pair'])}" if cols.get("pair") else "")
    lines = [f"### {esc(view.name)}",
             f"**{m['rows']:,} rows** of {esc(m.get('source'))} evaluated with "
             f"**{esc(shown_name(m.get('model')))}** ({used}).",
             f"**Accuracy {_pct(m['accuracy'])}** (95% interval {_interval(m.get('accuracy_interval'))}) · "
             f"**macro-F1 {score_text(m.get('macro_f1'))}** · {m.get('misclassified_rows', 0):,} misclassified"
             + (f" · {m['skipped_rows']:,} rows skipped" if m.get("skipped_rows") else "")
             + (f" (the {MAX_LISTED:,} most confident are listed below)" if m.get("misclassified_rows", 0) > MAX_LISTED
                else "")]
    lines += [f"Note: {esc(n)}" for n in m.get("notices", [])]
    return "  \n".join(lines)


def per_class_frame(view: RunView | None) -> pd.DataFrame:
    cols = ["class", "precision", "recall", "F1", "support"]
    if view is None:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame([[c, round(v["precision"], 3), round(v["recall"], 3), round(v["f1"], 3), v["support"]]
                         for c, v in view.metrics.get("per_class", {}).items()], columns=cols)


def confusion_figure(view: RunView) -> go.Figure:
    conf = view.metrics.get("confusion") or {}
    return plots.confusion_matrices([(shown_name(view.metrics.get("model", "")), conf.get("matrix", []))], view.labels,
                                    title="Confusion matrix")


def _wrong_in(view: RunView, rows) -> int:
    return sum(1 for r in rows if r in view.by_row and not view.rows[view.by_row[r]]["correct"])


def slices_frame(view: RunView | None) -> pd.DataFrame:
    """Slices worst first: kind, name, size, accuracy, 95% interval and how many rows it gets wrong."""
    if view is None:
        return pd.DataFrame(columns=SLICE_COLUMNS)
    return pd.DataFrame([[s["kind"], s["name"], s["size"], _pct(s.get("accuracy")), _interval(s.get("interval")),
                          _wrong_in(view, s["rows"])] for s in view.slices], columns=SLICE_COLUMNS)


def pick_slice(view: RunView | None, row_value) -> int | None:
    """The slice a selection of the slices table points at (by kind and name), its index in ``view.slices``."""
    if view is None or not row_value or len(row_value) < 2:
        return None
    kind, name = str(row_value[0]), str(row_value[1])
    return next((i for i, s in enumerate(view.slices) if s["kind"] == kind and s["name"] == name), None)


def slice_rows(view: RunView, index: int) -> list[dict]:
    """The misclassified rows of slice ``index``, most confident first."""
    s = view.slices[index]
    rows = [view.rows[view.by_row[r]] for r in s["rows"] if r in view.by_row]
    return sorted((r for r in rows if not r["correct"]), key=lambda r: -r["confidence"])


def wrong_rows(view: RunView) -> list[dict]:
    """Every misclassified row, most confident first."""
    return sorted((r for r in view.rows if not r["correct"]), key=lambda r: -r["confidence"])


def rows_frame(rows: list[dict], pairs: bool = False) -> pd.DataFrame:
    """The rows as a table (at most ``MAX_LISTED``: the first, most confident, ones): the row, its true label,
    the prediction and its confidence first, the text (as given) last, so a long text wraps in the room left
    instead of pushing the verdict out of the table's view."""
    rows = rows[:MAX_LISTED]
    cols = ["row", "true", "predicted", "confidence", "text", *(["second text"] if pairs else [])]
    return pd.DataFrame([[r["row"], r["true"], r["predicted"], round(float(r["confidence"]), 3), r["text"],
                          *([r["pair"] or ""] if pairs else [])] for r in rows], columns=cols)


def rows_widths(pairs: bool = False) -> list[str]:
    """The column widths of ``rows_frame``'s table (shares of the table's width, adding up to all of it): the
    row, labels and confidence in narrow columns, the text (or each of the two texts) in the rest, wrapped there.
    Left to gradio, a text column takes the table's whole width and the columns after it fall out of view."""
    return ["6%", "13%", "13%", "9%", *(["29.5%", "29.5%"] if pairs else ["59%"])]


DISAGREEMENT_WIDTHS = ["6%", "13%", "15%", "15%", "51%"]  # disagreement_frame's columns (as ``rows_widths``)


def pick_row(view: RunView | None, row_value) -> dict | None:
    """The evaluated row a table selection points at (its first cell is the spreadsheet row)."""
    if view is None or not row_value:
        return None
    try:
        row = int(row_value[0])
    except (TypeError, ValueError):
        return None
    i = view.by_row.get(row)
    return None if i is None else view.rows[i]


def temperature_judgement(view: RunView) -> tuple[bool, str]:
    """Whether the shown evaluation's temperature helped on the rows it was measured on (NLL lower, ECE
    not higher: ``calibration.evaluated_judgement``, recomputed from the stored numbers) and why. Only a
    temperature that helped is offered for saving."""
    return core.evaluated_judgement(view.metrics.get("calibration") or {})


def calibration_md(view: RunView) -> str:
    c = view.metrics.get("calibration") or {}
    t = c.get("temperature")
    after = f"after (T = {t:.3f})" if isinstance(t, (int, float)) else "after (no temperature)"
    lines = ["| | before | " + after + " |", "|---|---|---|"]
    for key, what in (("ece", "ECE (15 bins)"), ("nll", "NLL"), ("brier", "Brier")):
        lines.append(f"| {what} | {score_text(c.get(key))} | {score_text(c.get(key + '_after'))} |")
    note = c.get("note")
    text = "\n".join(lines) + (f"\n\n{esc(note)} Lower is better for all three." if note else "")
    if isinstance(t, (int, float)):
        helps, why = temperature_judgement(view)
        text += (f"\n\n**Worth keeping:** {esc(why)} **Save this temperature to the model** keeps it for predict."
                 if helps else
                 f"\n\n**Not worth keeping:** {esc(why)} It is not offered for saving: the model's raw softmax is "
                 "the better one here.")
    return text


def reliability_figure(view: RunView) -> go.Figure:
    """Confidence bins against their accuracy, before and (when fitted) after the temperature, with
    the diagonal of a perfectly calibrated model."""
    fig = plots.new_figure(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfectly calibrated",
                                      line=dict(color="#9e9e9e", dash="dash"), hoverinfo="skip"))
    t = view.reliability.get("temperature")
    for key, name, colour in (("before", "before (raw softmax)", "#1f77b4"),
                              ("after", f"after (T = {t:.3f})" if isinstance(t, (int, float)) else "after", "#ff7f0e")):
        bins = [b for b in (view.reliability.get(key) or []) if b.get("count")]
        if not bins:
            continue
        fig.add_trace(go.Scatter(
            x=[b["confidence"] for b in bins], y=[b["accuracy"] for b in bins], mode="lines+markers", name=name,
            marker=dict(size=[6 + 10 * math.sqrt(b["count"] / max(x["count"] for x in bins)) for b in bins],
                        color=colour), line=dict(color=colour), customdata=[b["count"] for b in bins],
            hovertemplate="confidence %{x:.2f}: accuracy %{y:.1%} (%{customdata} rows)<extra>" + name + "</extra>"))
    fig.update_xaxes(title_text="confidence (top probability)", range=[0, 1.02])
    fig.update_yaxes(title_text="accuracy", range=[0, 1.02], tickformat=".0%")
    return plots.finish(fig, "Reliability diagram", 380, download="reliability_diagram",
                        legend=dict(orientation="h", y=-0.2))


# --------------------------------------------------------------------------- geometry
def shown_points(n: int) -> np.ndarray:
    """The rows the scatter draws: all of them up to ``MAX_POINTS``, else a fixed random sample (seed
    0, in row order), the same for every layer and colouring."""
    if n <= MAX_POINTS:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, MAX_POINTS, replace=False))


def _groups(view: RunView, colour: str, shown: np.ndarray) -> list[tuple[str, np.ndarray, str]]:
    """(name, row indices among ``shown``, colour) of each trace of the scatter."""
    if colour == "correct":
        ok = np.array([view.rows[i]["correct"] for i in shown], dtype=bool)
        return [("right", shown[ok], RIGHT), ("wrong", shown[~ok], WRONG)]
    key = "predicted" if colour == "predicted" else "true"
    values = np.array([view.rows[i][key] for i in shown], dtype=object)
    return [((("predicted " if key == "predicted" else "") + lab), shown[values == lab],
             PALETTE[i % len(PALETTE)]) for i, lab in enumerate(view.labels)]


def scatter_figure(view: RunView, layer: int, dims: int = 2, colour: str = "true", kind: str = "cls") -> go.Figure:
    """The PCA projection of every evaluated row's ``kind`` vector at depth ``layer`` (0 = embeddings),
    2-D (WebGL) or 3-D, coloured by true label, prediction, correct or not, or confidence; a point's
    ``customdata`` is its index in ``view.rows`` (a click opens that row)."""
    if not view.projections:
        return plots.empty_figure("No geometry in this evaluation: tick \u201c[CLS] geometry by layer\u201d and "
                                  "evaluate again.")
    layers = view.layers
    layer = min(layers, key=lambda x: abs(x - int(layer or 0)))
    coords = view.projections.get((layer, kind))
    if coords is None:
        return plots.empty_figure(f"No {kind} projection at layer {layer} in this evaluation.")
    dims = 3 if int(dims or 2) == 3 and coords.shape[1] >= 3 else 2
    hover = np.array(view.hover, dtype=object)
    scatter = go.Scatter3d if dims == 3 else go.Scattergl
    size = 3 if dims == 3 else 6
    traces = []
    shown = shown_points(len(view.rows))
    conf = np.array([r["confidence"] for r in view.rows], dtype=np.float32)  # (N,)
    groups = [("confidence", shown, None)] if colour == "confidence" else _groups(view, colour, shown)
    for name, idx, col in groups:
        if not len(idx):
            continue
        xyz = dict(x=coords[idx, 0], y=coords[idx, 1], **({"z": coords[idx, 2]} if dims == 3 else {}))
        marker = dict(size=size, color=col, opacity=0.8) if col else dict(
            size=size, color=conf[idx], colorscale="Viridis", cmin=0, cmax=1, opacity=0.8,
            colorbar=dict(title=dict(text="confidence"), thickness=12))
        traces.append(scatter(mode="markers", name=plots.escape(name), marker=marker, customdata=idx,
                              hovertext=hover[idx], hoverinfo="text", **xyz))
    fig = plots.new_figure(*traces)
    what = "[CLS]" if kind == "cls" else "mean word"
    depth = "embeddings" if layer == 0 else f"layer {layer}"
    sample = f" ({len(shown):,} of {len(view.rows):,} rows, a random sample)" if len(shown) < len(view.rows) else ""
    title = f"{what} vectors at {depth}: PCA, {dims}-D{sample} · click a point to open it in Predict"
    if dims == 3:
        fig.update_layout(scene=dict(xaxis_title="PC 1", yaxis_title="PC 2", zaxis_title="PC 3"))
    else:
        fig.update_xaxes(title_text="PC 1", zeroline=False)
        fig.update_yaxes(title_text="PC 2", zeroline=False)
    return plots.finish(fig, title, 520, download=f"geometry_{kind}_layer{layer}_{dims}d",
                        legend=dict(orientation="h", y=-0.12), clickmode="event")


def probes_figure(view: RunView, layer: int | None = None) -> go.Figure:
    """Cross-validated linear-probe accuracy per depth, on the [CLS] vector and on the mean vector;
    a dotted line marks ``layer`` (the scatter's)."""
    probes = view.probes or []
    if not probes:
        return plots.empty_figure("No probe per layer in this evaluation: a probe needs rows of at least two classes, "
                                  "two of each.")
    xs = [int(p["layer"]) for p in probes]
    fig = plots.new_figure()
    for key, name, colour in (("cls_probe_accuracy", "[CLS] vector", "#1f77b4"),
                              ("mean_probe_accuracy", "mean word vector", "#ff7f0e")):
        ys = [p.get(key) for p in probes]
        if any(y is not None for y in ys):
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=name, line=dict(color=colour),
                                     hovertemplate="layer %{x}: %{y:.1%}<extra>" + name + "</extra>"))
    if layer is not None:
        fig.add_vline(x=int(layer), line=dict(color="#9e9e9e", dash="dot"))
    fig.update_xaxes(title_text="layer (0 = embeddings)", tickmode="array", tickvals=xs)
    fig.update_yaxes(title_text="probe accuracy (cross-validated)", range=[0, 1.02], tickformat=".0%")
    return plots.finish(fig, "Linear probe accuracy by layer", 520, download="probe_accuracy_by_layer",
                        legend=dict(orientation="h", y=-0.2))


# --------------------------------------------------------------------------- comparison
def _models(c: dict) -> tuple[str, str]:
    m = c.get("models") or {}
    return shown_name(m.get("a", "A")), shown_name(m.get("b", "B"))


def comparison_md(view: RunView) -> str:
    """Both models' accuracy and macro-F1 side by side, the four counts and McNemar's p with its reading."""
    c = view.comparison
    if not c:
        return ""
    a, b = _models(c)
    acc, f1 = c.get("accuracy") or {}, c.get("macro_f1") or {}
    reading = str(c.get("reading", ""))
    for full in sorted({str(v) for v in (c.get("models") or {}).values()}, key=len, reverse=True):
        reading = reading.replace(full, shown_name(full))  # a model folder by its last part: no server path
    return "\n".join([
        f"### {esc(a)} (A) vs {esc(b)} (B), on the same {c.get('rows', 0):,} rows",
        f"| | A: {esc(a)} | B: {esc(b)} |", "|---|---|---|",
        f"| accuracy | {_pct(acc.get('a'))} | {_pct(acc.get('b'))} |",
        f"| macro-F1 | {score_text(f1.get('a'))} | {score_text(f1.get('b'))} |", "",
        f"Both right **{c.get('both_correct', 0):,}** · only A right **{c.get('only_a_correct', 0):,}** · only B right "
        f"**{c.get('only_b_correct', 0):,}** · both wrong **{c.get('both_wrong', 0):,}** · the predictions differ on "
        f"**{c.get('disagreements', 0):,}** rows.", "",
        f"McNemar's exact test: **p = {score_text(c.get('mcnemar_p'), '.3g')}**. {esc(reading)}"])


def comparison_frame(view: RunView) -> pd.DataFrame:
    """Per slice of A's evaluation: A's and B's accuracy and the difference B - A, largest first."""
    c = view.comparison or {}
    a, b = _models(c) if c else ("A", "B")
    rows = [[s.get("kind", ""), s.get("name", ""), s.get("size", ""), _pct(s.get("accuracy_a")),
             _pct(s.get("accuracy_b")), "–" if s.get("difference") is None else f"{s['difference'] * 100:+.1f} points"]
            for s in c.get("slices") or [] if isinstance(s, dict)]
    return pd.DataFrame(rows, columns=["kind", "slice", "size", f"A: {a}", f"B: {b}", "B - A"])


def disagreement_frame(view: RunView) -> pd.DataFrame:
    """The rows where the two predictions differ, most confident first (at most ``MAX_LISTED``): the labels
    first, the text last (as ``rows_frame``)."""
    c = view.comparison or {}
    a, b = _models(c) if c else ("A", "B")
    rows = [[d.get("row"), d.get("true", ""), d.get("predicted_a", ""), d.get("predicted_b", ""), d.get("text", "")]
            for d in (c.get("disagreeing_rows") or [])[:MAX_LISTED] if isinstance(d, dict)]
    return pd.DataFrame(rows, columns=["row", "true", f"A: {a} predicts", f"B: {b} predicts", "text"])


# --------------------------------------------------------------------------- the stored list
def stored_choices(entries: list[dict]) -> list[tuple[str, str]]:
    """(label, name) of each stored evaluation for a dropdown: name, model, file, rows, accuracy (a model
    folder by its last part: no server path reaches the page)."""
    out = []
    for e in entries:
        bits = [e["name"], shown_name(e.get("model") or "?"), str(e.get("source") or "?"),
                f"{e.get('rows') or 0:,} rows", f"accuracy {_pct(e.get('accuracy'))}"]
        out.append((" · ".join(bits), e["name"]))
    return out
