"""An evaluation's run folder: written whole, read back.

    write_evaluation(ev, "eval-run/")     # metrics.json, predictions.csv, reliability.json (+ layers, comparison)
    read_evaluation("eval-run/")          # {"metrics", "reliability", "layers", "comparison", "projections"}

What ``evaluation.evaluate_file`` found, as files a person or a page opens later: ``metrics.json``
(``Evaluation.to_dict`` with every misclassified row), ``predictions.csv`` (the file's rows and
columns as given, then the prediction's columns, every cell spreadsheet-safe), ``reliability.json``,
and with the geometry and a second model their files too. Each file is written whole or not at all;
nothing is ever unpickled.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path

from ..errors import InputError
from ..interpret.export import write_text
from ..models.calibration import N_BINS
from ..train.data import safe_csv_cell
from .evaluation import Evaluation
from .geometry import VECTOR_KINDS, load_projections, save_projections

__all__ = ["write_evaluation", "read_evaluation", "predictions_csv"]


def write_evaluation(ev: Evaluation, folder: str | os.PathLike) -> Path:
    """Write an evaluation's run folder (created if missing; its parent must exist): ``metrics.json``
    (``to_dict`` with every misclassified row), ``predictions.csv`` (every row of the file as given,
    then ``bv_row``, ``bv_true``, ``bv_predicted``, ``bv_p_<class>``..., ``bv_correct``,
    ``bv_calibration_part``, ``bv_status``, and with a comparison ``bv_other_predicted``,
    ``bv_other_p_<class>``..., ``bv_other_correct``; each cell spreadsheet-safe: ``safe_csv_cell``) and
    ``reliability.json`` (the reliability bins before/after the temperature). With ``layers``:
    ``layers.json`` (the probes) and the PCA projections of every depth and vector
    (``geometry.save_projections``: ``projections.json`` and ``cls_layerNN.npy``/``mean_layerNN.npy``;
    none under 3 rows). With a comparison: ``comparison.json`` (every disagreeing row). Each file is
    written whole or not at all. Returns the folder; ``read_evaluation`` reads it back."""
    out = Path(folder).expanduser()
    if out.exists() and not out.is_dir():
        raise InputError(f"Cannot write the evaluation into {out}: it is a file; give a folder.")
    if not out.parent.is_dir():
        raise InputError(f"Cannot write the evaluation into {out}: the folder {out.parent} does not exist.")
    try:
        out.mkdir(exist_ok=True)
    except OSError as exc:
        raise InputError(f"Cannot create {out}: {exc.strerror or exc}. Choose a folder you can write to.") from None
    write_text(out / "metrics.json", json.dumps(ev.to_dict(misclassified=None), ensure_ascii=False, indent=1))
    write_text(out / "reliability.json", json.dumps({"bins": N_BINS, **ev.reliability,
                                                     "temperature": ev.calibration.get("temperature")}, indent=1))
    write_text(out / "predictions.csv", predictions_csv(ev))
    if ev.geometry is not None:
        write_text(out / "layers.json", json.dumps({"layers": ev.probes, "model": ev.model, "rows": ev.rows,
                                                   "kinds": list(VECTOR_KINDS)}, ensure_ascii=False, indent=1))
        if ev.rows >= 3:  # a 3-D PCA needs 3 rows
            save_projections(out, ev.geometry)
    if ev.comparison is not None:
        write_text(out / "comparison.json", json.dumps(ev.comparison.to_dict(rows=None), ensure_ascii=False,
                                                       indent=1))
    return out


def read_evaluation(folder: str | os.PathLike) -> dict:
    """An evaluation's run folder (``write_evaluation``) read back: ``{"metrics", "reliability",
    "layers" (None: not asked), "comparison" (None: none), "projections" ({(layer, "cls"/"mean"):
    Projection}; None: none)}``. InputError for a folder that is not an evaluation's."""
    folder = Path(folder).expanduser()
    if not (folder / "metrics.json").is_file():
        raise InputError(f"{folder} is not an evaluation's run folder (it has no metrics.json); choose a folder "
                         "written by `evaluate --out` or write_evaluation.")

    def read(name: str, required: bool = True) -> dict | None:
        path = folder / name
        if not required and not path.is_file():
            return None
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{path} cannot be read ({exc}); write the evaluation again.") from None
        if not isinstance(value, dict):
            raise InputError(f"{path} is not what an evaluation writes; write the evaluation again.")
        return value

    return {"metrics": read("metrics.json"), "reliability": read("reliability.json"),
            "layers": read("layers.json", required=False), "comparison": read("comparison.json", required=False),
            "projections": load_projections(folder) if (folder / "projections.json").is_file() else None}


def predictions_csv(ev: Evaluation) -> str:
    table = ev.table
    header = list(table.header or table.columns)
    taken = set(header)
    added = []
    other = [] if ev.other is None else ["other_predicted", *[f"other_p_{c}" for c in ev.labels], "other_correct"]
    for base in ["row", "true", "predicted", *[f"p_{c}" for c in ev.labels], "correct", "calibration_part", "status",
                 *other]:
        name, k = f"bv_{base}", 2
        while name in taken:
            name, k = f"bv_{base}_{k}", k + 1
        taken.add(name)
        added.append(name)
    at = {r: i for i, r in enumerate(ev.source_rows)}
    why = dict(ev.skipped)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([safe_csv_cell(c) for c in header + added])
    for row, values in zip(table.df.index, table.df.itertuples(index=False, name=None)):
        row = int(row)
        cells = ["" if isinstance(v, float) and math.isnan(v) else str(v) for v in values]
        i = at.get(row)
        if i is None:
            extra = [str(row), "", "", *[""] * len(ev.labels), "", "", f"skipped: {why.get(row, 'not evaluated')}",
                     *[""] * len(other)]
        else:
            extra = [str(row), ev.labels[ev.true[i]], ev.labels[ev.predicted[i]],
                     *[f"{p:.6f}" for p in ev.probs[i]], str(bool(ev.true[i] == ev.predicted[i])).lower(),
                     ev.calibration_part[i], "ok", *_other_cells(ev, i)]
        w.writerow([safe_csv_cell(c) for c in cells + extra])
    return buf.getvalue()


def _other_cells(ev: Evaluation, i: int) -> list[str]:
    """Row ``i``'s cells of the compared model: its prediction, its probabilities in this model's class
    order (matched by name), whether it is right; none without a comparison."""
    o = ev.other
    if o is None:
        return []
    at = {n: j for j, n in enumerate(o.labels)}
    return [o.labels[o.predicted[i]], *[f"{o.probs[i, at[c]]:.6f}" for c in ev.labels],
            str(bool(o.true[i] == o.predicted[i])).lower()]
