"""A trained model on the validation split: its metrics (accuracy, macro-F1, per class, confusion,
calibration) and the rows it gets wrong, most confident first."""

from __future__ import annotations

import numpy as np
import torch

from ...models.calibration import calibration_report
from ..classifier_metrics import calibration_metrics, evaluate_predictions
from ..data import Dataset

__all__ = ["evaluate"]


def evaluate(model, tokenizer, val: Dataset, max_length: int) -> tuple[dict, list[dict]]:
    """Metrics on the validation split and the rows the model gets wrong (most confident first).
    Besides accuracy and macro-F1: ``val_nll`` (mean cross-entropy of the true labels) and ``ece``
    (expected calibration error of the top probability, 15 equal-width bins): is it as sure as it is right?
    Single-label: ``calibration``, temperature scaling fitted on half of these rows' logits and judged on
    the other half, with ECE/NLL/Brier before and after there, ``helps`` and ``judgement``
    (``calibration.calibration_report``; the runner saves it only when it helps)."""
    order = np.argsort([len(t) for t in val.texts])
    probs = np.empty((len(val), len(val.label_names)), dtype=np.float32)
    logits_all = np.empty((len(val), len(val.label_names)), dtype=np.float32)
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(val), 64):
            idx = order[start : start + 64]
            enc = tokenizer([val.texts[i] for i in idx], [val.pairs[i] for i in idx] if val.pairs else None,
                            truncation=True, max_length=max_length, padding=True, return_tensors="pt").to(model.device)
            logits = model(**enc).logits.float()  # (B, C)
            logits_all[idx] = logits.cpu().numpy()
            probs[idx] = (torch.sigmoid(logits) if val.multi_label else torch.softmax(logits, -1)).cpu().numpy()
    names = val.label_names
    if val.multi_label:
        pred = (probs >= 0.5).astype(int)  # (N, C)
        truth = val.multi_hot()
        metrics = evaluate_predictions(truth, pred, names)
        wrong_idx = np.where((pred != truth).any(axis=1))[0]
        fmt = lambda row: "|".join(names[j] for j in np.where(row)[0]) or "(none)"
        wrong = [{"row": val.source_rows[i], "text": val.texts[i], "pair": val.pairs[i] if val.pairs else None,
                  "true": fmt(truth[i]), "predicted": fmt(pred[i]),
                  "confidence": float(np.abs(probs[i] - 0.5).max() + 0.5)}
                 for i in wrong_idx]
    else:
        pred = probs.argmax(-1)
        truth = np.asarray(val.labels)
        metrics = evaluate_predictions(truth, pred, names)
        wrong = [{"row": val.source_rows[i], "text": val.texts[i], "pair": val.pairs[i] if val.pairs else None,
                  "true": names[truth[i]], "predicted": names[pred[i]], "confidence": float(probs[i, pred[i]])}
                 for i in np.where(pred != truth)[0]]
    wrong.sort(key=lambda r: -r["confidence"])
    top = np.abs(probs - 0.5).max(-1) + 0.5 if val.multi_label else probs.max(-1)  # (N,)
    metrics["mean_confidence"] = float(top.mean()) if len(top) else None
    metrics.update(calibration_metrics(logits_all, truth, multi_label=val.multi_label))
    if not val.multi_label and len(truth):
        # temperature scaling fitted on half the validation logits, judged on the other half; the runner
        # saves it as calibration.json only when it helps there
        metrics["calibration"] = calibration_report(logits_all, truth)
    return metrics, wrong
