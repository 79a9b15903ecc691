"""What a saved run says about itself: its record (``run.json``: data, metrics, misclassified rows,
settings, verdict, owner) and its model card (README.md); a tagger's or a reader's record (``head_run_record``)."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timezone

from ...models.calibration import CALIBRATION_FILE, calibration_outcome, calibration_record
from ..classifier_metrics import ECE_BINS, metrics_tables
from ..data import Dataset
from .records import Verdict

__all__ = ["calibration_file", "calibration_line", "head_run_record", "run_card", "run_record"]


def run_record(name: str, *, mode: str, base: str, source: str, data_hash: str, train: Dataset, val: Dataset,
               metrics: dict, misclassified: list[dict], info: dict, seconds: float, notices: list[str],
               verdict: Verdict, owner: str | None = None) -> dict:
    """The run.json of a run named ``name`` ("runs/<name>"): ``info`` is what training returned
    (settings, steps, log, how it ended); ``owner`` (public mode) a visitor's hash, else left out."""
    record = {
        "name": name,
        "mode": mode,
        "base": base,
        "source": source,
        "data_hash": data_hash,
        "train_rows": len(train),
        "val_rows": len(val),
        "labels": list(train.label_names),
        "multi_label": train.multi_label,
        # trained with a second text column (sentence pairs): registry.trained_on_pairs reads it, and predict
        # notes a pair given to a run trained on single texts (registry.pair_notice)
        "pairs": train.pairs is not None,
        "metrics": metrics,
        "misclassified": misclassified,
        "hyperparameters": info["config"],
        "seconds": seconds,
        "examples_per_second": info.get("examples_per_second"),
        "cancelled": bool(info.get("cancelled")),
        "stopped_early": bool(info.get("stopped_early")),
        "steps": info.get("steps"),
        "max_steps": info.get("max_steps"),
        "best_step": info.get("best_step"),
        "stopped_by": info.get("stopped_by"),  # metric or loss: which signal ended it early
        "world_size": info.get("world_size", 1),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "notices": notices,
        "verdict": asdict(verdict) | {"learned": verdict.learned},
    }
    if owner is not None:  # public mode: whose run this is (a hash; see visitors.py)
        record["owner"] = owner
    return record


def head_run_record(name: str, *, task: str, base: str, source: str, data: dict, metrics: dict, wrong: list[dict],
                    info: dict, seconds: float, notices: list[str], owner: str | None = None) -> dict:
    """The run.json of a tagger's or a reader's run named ``name`` ("runs/<name>"): ``data`` (what it was trained
    and judged on) between its source and its ``metrics`` (the head's report, with its ``learned`` and
    ``verdict``), ``wrong`` (the held-out examples it got wrong, as many as are kept), then how training went
    (``info``). A cancelled run is not judged: its verdict says so. ``owner`` (public mode) a visitor's hash."""
    cancelled = bool(info.get("cancelled"))
    message = (f"Cancelled at step {info.get('steps')} of {info.get('max_steps')}, so not judged: the metrics are "
               "those of the best weights before the cancel." if cancelled else metrics["verdict"])
    record = {"name": name, "task": task, "mode": "full", "base": base, "source": source, **data,
              "metrics": metrics, "wrong": wrong, "hyperparameters": info["config"], "seconds": seconds,
              "cancelled": cancelled, "stopped_early": bool(info.get("stopped_early")), "steps": info.get("steps"),
              "best_step": info.get("best_step"), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "notices": notices, "verdict": {"learned": metrics["learned"] and not cancelled, "message": message}}
    if owner is not None:
        record["owner"] = owner
    return record


def calibration_file(metrics: dict) -> dict[str, str]:
    """A run's calibration file (saved beside its weights) when its temperature helped on the judging half of the
    validation rows (a classifier's) or words (a tagger's), else none."""
    if (metrics.get("calibration") or {}).get("helps"):
        return {CALIBRATION_FILE: json.dumps(calibration_record(metrics["calibration"], "fine-tune validation split"),
                                             indent=2)}
    return {}


def calibration_line(m: dict) -> str:
    if m.get("val_nll") is None or m.get("ece") is None:
        return ""
    line = (f"\nValidation loss (NLL, mean cross-entropy of the true labels) {m['val_nll']:.4f}; expected calibration "
            f"error of the top probability ({ECE_BINS} equal-width bins) {m['ece']:.4f}.\n")
    if outcome := calibration_outcome(m.get("calibration")):
        line += f"\n{outcome}\n"
    return line


def run_card(r: dict) -> str:
    m = r["metrics"]
    hp = "\n".join(f"- `{k}`: {v}" for k, v in r["hyperparameters"].items())
    status = ("cancelled; best weights so far" if r["cancelled"]
              else ("stopped early; best weights" if r["stopped_early"] else "complete"))
    return f"""---
library_name: transformers
pipeline_tag: text-classification
---
# {r['name']}

Fine-tuned with bertviz-app ({r['mode']} mode) from `{r['base']}` on `{r['source'] or 'uploaded data'}`
(data sha256 prefix `{r['data_hash']}`), {r['train_rows']:,} training / {r['val_rows']:,} validation rows.
Classes: {', '.join(r['labels'])}{' (multi-label)' if r['multi_label'] else ''}. Run: {status}, {r['seconds']:.0f} s.

## Validation metrics
{metrics_tables(m['accuracy'], m['macro_f1'], m['per_class'])}
{calibration_line(m)}
## Hyperparameters
{hp}

The training log is in `training_log.json`, the misclassified validation rows in `run.json`.
"""
