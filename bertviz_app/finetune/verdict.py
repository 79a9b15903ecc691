"""Did a run learn? The run against always answering the majority class, against the frozen-encoder
probe, and its training loss and confidence, said in plain words with what to change."""

from __future__ import annotations

import math

import numpy as np

from ..data import Dataset
from ..training import ECE_BINS, evaluate_predictions
from .records import Verdict

__all__ = ["LOSS_FLAT", "MAJORITY_MARGIN", "UNIFORM_MARGIN", "judge", "loss_ends", "majority_baseline"]

# Verdict thresholds: "clearly better" than always answering the majority class means this much
# macro-F1 above it; a loss that ends above LOSS_FLAT x its start "stayed flat".
MAJORITY_MARGIN = 0.10
LOSS_FLAT = 0.85
UNIFORM_MARGIN = 0.15  # mean top probability within this of 1/C: predictions are near uniform


def majority_baseline(train: Dataset, val: Dataset) -> dict:
    """Validation metrics of always answering the training set's most common class (multi-label:
    each class that more than half the training rows carry)."""
    if train.multi_label:
        prevalence = train.multi_hot().mean(axis=0)  # (C,)
        guess = (prevalence > 0.5).astype(int)
        truth = val.multi_hot()  # (N, C)
        m = evaluate_predictions(truth, np.tile(guess, (len(val), 1)), val.label_names)
        cls = "|".join(n for n, g in zip(train.label_names, guess) if g) or "(none)"
    else:
        counts = np.bincount(np.asarray(train.labels), minlength=len(train.label_names))
        k = int(counts.argmax())
        m = evaluate_predictions(np.asarray(val.labels), np.full(len(val), k), val.label_names)
        cls = train.label_names[k]
    return {"class": cls, "accuracy": m["accuracy"], "macro_f1": m["macro_f1"]}


def loss_ends(log_history) -> tuple[float | None, float | None]:
    """The first logged training loss and the mean of the last few (a third of the log, at most 3)."""
    losses = [float(e["loss"]) for e in log_history or () if "loss" in e and e.get("loss") is not None]
    if len(losses) < 2:
        return (losses[0] if losses else None), None
    tail = losses[-max(1, min(3, len(losses) // 3)):]
    return losses[0], float(np.mean(tail))


def judge(metrics: dict, majority: dict, *, mode: str, log_history=(), probe: dict | None = None,
          hyperparameters: dict | None = None, n_train: int = 0) -> Verdict:
    """Did the run learn? Compares the validation metrics with the majority-class baseline (beyond
    two standard errors of its accuracy on this many rows, at least MAJORITY_MARGIN), with the
    frozen-encoder probe (full runs), and looks at the training loss and the confidence."""
    hp = hyperparameters or {}
    n = max(1, int(metrics.get("n") or 0))
    acc, f1 = float(metrics["accuracy"]), float(metrics["macro_f1"])
    maj_acc = float(majority["accuracy"])
    band = max(MAJORITY_MARGIN, 2 * math.sqrt(maj_acc * (1 - maj_acc) / n))
    beats_majority = acc >= min(1.0, maj_acc + band) and f1 > float(majority["macro_f1"])
    loss_start, loss_end = loss_ends(log_history) if mode == "full" else (None, None)
    flat = loss_start is not None and loss_end is not None and loss_end > LOSS_FLAT * loss_start
    n_classes = len(metrics.get("per_class") or {}) or 2
    conf = metrics.get("mean_confidence")
    uniform = (mode == "full" and conf is not None and metrics.get("confusion_matrix") is not None
               and conf < 1 / n_classes + UNIFORM_MARGIN)
    beats_probe = None if probe is None else f1 >= float(probe["macro_f1"]) - 0.005
    lr, epochs = hp.get("learning_rate"), hp.get("epochs")
    loss_txt = (f" The training loss went from {loss_start:.3f} to {loss_end:.3f}"
                + (" (flat)." if flat else ".")) if loss_end is not None else ""
    nll, ece = metrics.get("val_nll"), metrics.get("ece")
    calib_txt = ""
    if nll is not None and ece is not None:  # how sure it is against how often it is right
        calib_txt = (f" Validation loss (NLL) {float(nll):.3f}; calibration error (ECE, {ECE_BINS} bins) "
                     f"{float(ece):.3f}"
                     + (f", mean top probability {float(conf):.0%}." if conf is not None else "."))
    base_txt = (f"validation accuracy {acc:.1%} (macro-F1 {f1:.3f}) against {maj_acc:.1%} for always answering "
                f"{majority['class']!r}")
    more_rows = (f"Add labelled rows: {n_train:,} training rows is little; aim for 100+ per class."
                 if n_train < 100 * n_classes else None)
    tune = []
    if mode == "full":
        tune.append("If you set epochs or the learning rate yourself, leave them blank: they are then chosen from the "
                    "data size.")
        if lr is not None:
            tune.append(f"Train longer or faster: more epochs (now {epochs}) or a larger learning rate (now {lr:g}; "
                        f"try {min(lr * 3, 3e-4):.0e}).")
    suggestions: list[str]
    if not beats_majority:
        status = "not_learned"
        message = (f"The model has not learned: {base_txt}, which is within what chance gives on {n} validation "
                   f"rows.{loss_txt}")
        suggestions = tune + ["Check the labels: do the texts really carry them, and are they consistent?"]
        probe_failed = probe is not None and float(probe["accuracy"]) < min(1.0, maj_acc + band)
        if probe_failed:
            message += " The frozen-encoder probe did not beat it either, so the labels may not follow from the texts."
        elif mode == "full":
            suggestions.append("Try probe mode (frozen encoder + logistic regression): it needs less data.")
    elif mode == "full" and (flat or uniform):
        status = "weak"
        why = []
        if flat:
            why.append(f"the training loss stayed flat ({loss_start:.3f} to {loss_end:.3f})")
        if uniform:
            why.append(f"its predictions are near uniform (mean top probability {conf:.0%} for {n_classes} classes)")
        message = f"The model barely learned: {' and '.join(why)}, although {base_txt}."
        suggestions = tune + ["Compare with the probe mode on the same data (mode: both)."]
    elif beats_probe is False:
        status = "weak"
        message = (f"Fine-tuning did not beat the frozen-encoder probe: macro-F1 {f1:.3f} against the probe's "
                   f"{float(probe['macro_f1']):.3f} on the same split.{loss_txt}")
        suggestions = ["Use the probe run for now (mode: probe or both).", *tune]
    else:
        status = "learned"
        vs_probe = f", and the frozen-encoder probe's macro-F1 {float(probe['macro_f1']):.3f}" if probe else ""
        message = f"The model learned: {base_txt}{vs_probe}.{loss_txt}"
        suggestions = []
    message += calib_txt
    if status != "learned" and more_rows:
        suggestions.append(more_rows)
    return Verdict(status=status, message=message, suggestions=tuple(suggestions), majority=dict(majority),
                   probe=None if probe is None else {k: float(probe[k]) for k in ("accuracy", "macro_f1")},
                   loss_start=loss_start, loss_end=loss_end, mean_confidence=conf,
                   val_nll=None if nll is None else float(nll), ece=None if ece is None else float(ece))
