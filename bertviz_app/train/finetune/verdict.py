"""Did a run learn? The run against always answering the majority class, against the frozen-encoder
probe, and its training loss and confidence, said in plain words with what to change.

The heading follows the numbers shown beside it: accuracy decides whether the run learned (beyond
chance against the majority class) and whether it is clearly better (a good share of the majority's
errors gone), the probe only counts when it is ahead beyond what the validation rows' noise allows,
and the loss and confidence only weaken a verdict together (a run that learned in its first logged
steps has a "flat" curve far below chance; an under-confident model that is right 90% of the time
learned). Advice about epochs or the learning rate is given only when the user set them, and "more
epochs" never when early stopping ended the run (more epochs would not have been used)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ...models.calibration import calibration_outcome
from ..classifier_metrics import ECE_BINS, evaluate_predictions
from ..data import Dataset
from .records import Verdict

__all__ = ["CLEAR_SHARE", "HEADINGS", "LOSS_FLAT", "MAJORITY_MARGIN", "PROBE_MARGIN", "UNIFORM_MARGIN", "judge",
           "loss_ends", "majority_baseline"]

# Verdict thresholds: "better" than always answering the majority class means this much accuracy
# above it (or two standard errors on the validation rows, whichever is larger); "clearly better"
# twice that, or CLEAR_SHARE of the majority's errors gone (90% against 50%: 80% of them gone).
MAJORITY_MARGIN = 0.10
CLEAR_SHARE = 0.5
# A loss that ends above LOSS_FLAT x where it started "stayed flat"; where it started is the first
# logged loss or the loss of a uniform guess (ln C), whichever is higher: the first logged loss is a
# mean over the first logging interval, already low when the run learns fast.
LOSS_FLAT = 0.85
UNIFORM_MARGIN = 0.15  # mean top probability within this of 1/C: predictions are near uniform
# Behind the probe "beyond noise": its macro-F1 ahead by more than this, or two standard errors of an
# accuracy like the probe's on the validation rows, whichever is larger.
PROBE_MARGIN = 0.02
HEADINGS = {  # Verdict.heading by what decided it
    "learned": "Learned.",
    "barely": "Weak: barely better.",
    "probe": "Weak: below the probe.",
    "unsure": "Weak: unsure.",
    "not_learned": "Not learned.",
}


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


def _tuning_advice(hp: Mapping, *, slow: bool, stopped_early: bool) -> list[str]:
    """What to change about the settings the user gave (``hp``: only those; blank ones were chosen
    from the data size, and advice about them would be advice about nothing the user did). ``slow``:
    the run learned too little to call it done; ``stopped_early``: early stopping ended it, so more
    epochs would not have been used."""
    epochs, lr = hp.get("epochs"), hp.get("learning_rate")
    given = [name for name, v in (("epochs", epochs), ("the learning rate", lr)) if v is not None]
    if not given:
        return []
    tips = [f"You set {' and '.join(given)} yourself: leave {'them' if len(given) > 1 else 'it'} blank and "
            f"{'they are' if len(given) > 1 else 'it is'} chosen from the data size."]
    if slow:
        longer = epochs is not None and not stopped_early
        if longer and lr is not None:
            tips.append(f"Or train longer or faster: more epochs (now {epochs:g}) or a larger learning rate "
                        f"(now {lr:g}; try {min(lr * 3, 3e-4):.0e}).")
        elif longer:
            tips.append(f"Or train longer: more epochs (now {epochs:g}).")
        elif lr is not None:
            tips.append(f"Or a larger learning rate (now {lr:g}; try {min(lr * 3, 3e-4):.0e})"
                        + (": early stopping ended this run before its last epoch, so a longer one would not help."
                           if stopped_early
                           else "."))
    return tips


def judge(metrics: dict, majority: dict, *, mode: str, log_history=(), probe: dict | None = None,
          hyperparameters: Mapping | None = None, n_train: int = 0, stopped_early: bool = False,
          multi_label: bool = False) -> Verdict:
    """Did the run learn? Compares the validation metrics with the majority-class baseline (beyond
    two standard errors of its accuracy on this many rows, at least MAJORITY_MARGIN; clearly better
    at twice that or CLEAR_SHARE of its errors gone), with the frozen-encoder probe (full runs;
    behind it only beyond PROBE_MARGIN or two standard errors), and looks at the training loss and
    the confidence (weak only when both say so).

    ``hyperparameters``: the training settings the user gave (blank, automatic ones left out): advice
    about epochs or the learning rate is given only for those. ``stopped_early``: early stopping
    ended the run (``info["stopped_early"]``), so "more epochs" is never advised. ``multi_label``:
    the loss is a per-class binary cross-entropy (a uniform guess: ln 2, not ln C)."""
    hp = hyperparameters or {}
    e = _evidence(metrics, majority, mode=mode, log_history=log_history, probe=probe, multi_label=multi_label)
    nll, ece = metrics.get("val_nll"), metrics.get("ece")
    calib_txt = _calibration_text(metrics, e.conf)
    more_rows = (f"Add labelled rows: {n_train:,} training rows is little; aim for 100+ per class."
                 if n_train < 100 * e.n_classes else None)
    kind, message, suggestions = _decide(e, majority, mode=mode, probe=probe, hp=hp, stopped_early=stopped_early)
    message += calib_txt
    if kind != "learned" and more_rows:
        suggestions.append(more_rows)
    status = {"learned": "learned", "not_learned": "not_learned"}.get(kind, "weak")
    return Verdict(status=status, message=message, suggestions=tuple(suggestions), majority=dict(majority),
                   probe=None if probe is None else {k: float(probe[k]) for k in ("accuracy", "macro_f1")},
                   loss_start=e.loss_start, loss_end=e.loss_end, mean_confidence=e.conf,
                   val_nll=None if nll is None else float(nll), ece=None if ece is None else float(ece),
                   heading=HEADINGS[kind])


@dataclass(frozen=True)
class _Evidence:
    """What a verdict weighs: the run against the majority class and the probe, its loss and confidence,
    and the phrases that say them."""

    n: int  # validation rows (at least 1)
    acc: float
    f1: float
    maj_acc: float
    band: float  # beyond chance against the majority class
    beats_majority: bool
    clearly: bool
    n_classes: int
    loss_start: float | None
    loss_end: float | None
    chance_loss: float  # the loss of a uniform guess
    flat: bool
    conf: float | None  # mean top probability
    uniform: bool
    probe_f1: float | None
    probe_band: float | None
    behind_probe: bool
    loss_txt: str
    unsure_txt: str
    base_txt: str


def _evidence(metrics: dict, majority: dict, *, mode: str, log_history, probe: dict | None,
              multi_label: bool) -> _Evidence:
    """The numbers ``judge`` weighs, each against its noise band, and the phrases that say them."""
    n = max(1, int(metrics.get("n") or 0))
    acc, f1 = float(metrics["accuracy"]), float(metrics["macro_f1"])
    maj_acc = float(majority["accuracy"])
    band = max(MAJORITY_MARGIN, 2 * math.sqrt(maj_acc * (1 - maj_acc) / n))
    beats_majority = acc >= min(1.0, maj_acc + band) and f1 > float(majority["macro_f1"])
    clearly = acc >= min(maj_acc + 2 * band, maj_acc + CLEAR_SHARE * (1 - maj_acc))
    n_classes = len(metrics.get("per_class") or {}) or 2
    loss_start, loss_end = loss_ends(log_history) if mode == "full" else (None, None)
    chance_loss = math.log(2 if multi_label else n_classes)
    flat = (loss_start is not None and loss_end is not None
            and loss_end > LOSS_FLAT * max(loss_start, chance_loss))
    conf = metrics.get("mean_confidence")
    uniform = (mode == "full" and conf is not None and metrics.get("confusion_matrix") is not None
               and conf < 1 / n_classes + UNIFORM_MARGIN)
    probe_f1 = None if probe is None else float(probe["macro_f1"])
    probe_band = None
    if probe is not None:
        p = min(1.0, max(0.0, float(probe["accuracy"])))
        probe_band = max(PROBE_MARGIN, 2 * math.sqrt(p * (1 - p) / n))
    behind_probe = probe_f1 is not None and probe_f1 - f1 > probe_band
    loss_txt = (f" The training loss went from {loss_start:.3f} to {loss_end:.3f}"
                + (" (flat)." if flat else ".")) if loss_end is not None else ""
    unsure_txt = f"mean top probability {conf:.0%} for {n_classes} classes" if conf is not None else ""
    base_txt = (f"validation accuracy {acc:.1%} (macro-F1 {f1:.3f}) against {maj_acc:.1%} for always answering "
                f"{majority['class']!r}")
    return _Evidence(n=n, acc=acc, f1=f1, maj_acc=maj_acc, band=band, beats_majority=beats_majority,
                     clearly=clearly, n_classes=n_classes, loss_start=loss_start, loss_end=loss_end,
                     chance_loss=chance_loss, flat=flat, conf=conf, uniform=uniform, probe_f1=probe_f1,
                     probe_band=probe_band, behind_probe=behind_probe, loss_txt=loss_txt, unsure_txt=unsure_txt,
                     base_txt=base_txt)


def _calibration_text(metrics: dict, conf: float | None) -> str:
    """The message's closing sentences: validation loss and calibration error, and what became of the temperature."""
    nll, ece = metrics.get("val_nll"), metrics.get("ece")
    calib_txt = ""
    if nll is not None and ece is not None:  # how sure it is against how often it is right
        calib_txt = (f" Validation loss (NLL) {float(nll):.3f}; calibration error (ECE, {ECE_BINS} bins) "
                     f"{float(ece):.3f}"
                     + (f", mean top probability {float(conf):.0%}." if conf is not None else "."))
    if outcome := calibration_outcome(metrics.get("calibration")):  # whether predict applies a temperature
        calib_txt += " " + outcome
    return calib_txt


def _decide(e: _Evidence, majority: dict, *, mode: str, probe: dict | None, hp: Mapping,
            stopped_early: bool) -> tuple[str, str, list[str]]:
    """(kind, message, suggestions): the first that holds of not learned, barely better, below the probe,
    unsure and learned."""
    n, f1, probe_f1 = e.n, e.f1, e.probe_f1
    suggestions: list[str]
    if not e.beats_majority:
        kind = "not_learned"
        message = (f"The model has not learned: {e.base_txt}, which is within what chance gives on {n} validation "
                   f"rows.{e.loss_txt}")
        suggestions = (_tuning_advice(hp, slow=True, stopped_early=stopped_early)
                       + ["Check the labels: do the texts really carry them, and are they consistent?"])
        probe_failed = probe is not None and float(probe["accuracy"]) < min(1.0, e.maj_acc + e.band)
        if probe_failed:
            message += " The frozen-encoder probe did not beat it either, so the labels may not follow from the texts."
        elif mode == "full":
            suggestions.append("Try probe mode (frozen encoder + logistic regression): it needs less data.")
    elif not e.clearly:
        kind = "barely"
        message = (f"The model is only a little better than always answering {majority['class']!r}: {e.base_txt}, "
                   f"beyond chance on {n} validation rows but with most of its errors left.{e.loss_txt}")
        if mode == "full" and e.uniform:
            message += f" Its answers are near uniform ({e.unsure_txt})."
        suggestions = _tuning_advice(hp, slow=mode == "full", stopped_early=stopped_early)
        if mode == "full" and probe is None:
            suggestions.append("Compare with the probe mode on the same data (mode: both).")
    elif mode == "full" and e.behind_probe:
        kind = "probe"
        message = (f"Fine-tuning learned ({e.base_txt}) but stayed behind the frozen-encoder probe: macro-F1 {f1:.3f} "
                   f"against the probe's {probe_f1:.3f} on the same split, more than noise allows on {n} "
                   f"rows (±{e.probe_band:.3f}).{e.loss_txt}")
        suggestions = ["Use the probe run for now (mode: probe or both).",
                       *_tuning_advice(hp, slow=False, stopped_early=stopped_early)]
    elif mode == "full" and e.flat and e.uniform:
        kind = "unsure"
        message = (f"The model ranks the classes well ({e.base_txt}), but its training loss stayed flat "
                   f"({e.loss_start:.3f} to {e.loss_end:.3f}; a uniform guess scores {e.chance_loss:.3f}) and its "
                   f"answers are near uniform ({e.unsure_txt}).")
        suggestions = _tuning_advice(hp, slow=True, stopped_early=stopped_early)
        if probe is None:
            suggestions.append("Compare with the probe mode on the same data (mode: both).")
    else:
        kind = "learned"
        vs_probe = ""
        if probe_f1 is not None:
            vs_probe = (f", and the frozen-encoder probe's macro-F1 {probe_f1:.3f}"
                        + (f" (level within noise on {n} rows)" if probe_f1 > f1 else ""))
        message = f"The model learned: {e.base_txt}{vs_probe}.{e.loss_txt}"
        if mode == "full" and e.uniform:
            message += f" Its answers are unsure ({e.unsure_txt}), though mostly right."
        suggestions = []
    return kind, message, suggestions
