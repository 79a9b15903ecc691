"""How a sequence classifier's predictions score against the labels (beside ``entity_metrics`` for taggers and
``answer_metrics`` for readers): accuracy, macro-F1, per-class precision/recall/F1 and the confusion matrix;
the validation NLL and the expected calibration error a fine-tune logs; the metrics tables of a model card."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ECE_BINS", "calibration_metrics", "evaluate_predictions", "expected_calibration_error",
           "metrics_tables"]

ECE_BINS = 15


def evaluate_predictions(y_true, y_pred, labels: Sequence[str]) -> dict:
    """Accuracy, macro-F1, per-class precision/recall/F1 and the confusion matrix. Multi-label
    input (multi-hot arrays (N, C)): subset accuracy, macro-F1 over classes, no confusion matrix."""
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support

    if np.ndim(y_true) == 2:
        y_true, y_pred = np.asarray(y_true).astype(int), np.asarray(y_pred).astype(int)  # (N, C)
        p, r, f, s = precision_recall_fscore_support(y_true, y_pred, zero_division=0)
        return {
            "accuracy": float(accuracy_score(y_true, y_pred)),
            "macro_f1": float(f1_score(y_true, y_pred, average="macro", zero_division=0)),
            "per_class": {labels[i]: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                                      "support": int(s[i])} for i in range(len(labels))},
            "confusion_matrix": None,
            "n": int(len(y_true)),
        }

    idx = list(range(len(labels)))
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=idx, zero_division=0)
    return {
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "macro_f1": float(f1_score(y_true, y_pred, labels=idx, average="macro", zero_division=0)),
        "per_class": {labels[i]: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                                  "support": int(s[i])} for i in idx},
        "confusion_matrix": confusion_matrix(y_true, y_pred, labels=idx).tolist(),
        "n": int(len(y_true)),
    }


def expected_calibration_error(confidence, correct, bins: int = ECE_BINS) -> float | None:
    """Expected calibration error (Guo et al. 2017): the predictions are put into ``bins`` equal-width
    bins of their confidence on [0, 1] (a bin holds (lower, upper]), and ECE is the sum over bins of
    (share of the rows in the bin) x |accuracy in the bin - mean confidence in the bin|. None
    without rows."""
    conf = np.asarray(confidence, dtype=np.float64).ravel()  # (N,)
    ok = np.asarray(correct, dtype=np.float64).ravel()  # (N,) 1 = right
    if conf.size == 0:
        return None
    edges = np.linspace(0.0, 1.0, bins + 1)
    idx = np.searchsorted(edges[1:-1], conf, side="left")  # (N,) bin b holds edges[b] < conf <= edges[b+1]
    ece = 0.0
    for b in np.unique(idx):
        inside = idx == b
        ece += inside.mean() * abs(ok[inside].mean() - conf[inside].mean())
    return float(ece)


def calibration_metrics(logits, targets, multi_label: bool = False, bins: int = ECE_BINS) -> dict:
    """``val_nll``: the mean cross-entropy of the true labels (single-label: -log softmax(logits)[y];
    multi-label: the binary cross-entropy averaged over rows and classes, as the training loss).
    ``ece``: expected calibration error of the top probability (multi-label: of every class's
    yes/no decision, confidence max(p, 1 - p)), ``bins`` equal-width bins."""
    z = np.asarray(logits, dtype=np.float64)  # (N, C)
    if z.size == 0:
        return {"val_nll": None, "ece": None}
    if multi_label:
        y = np.asarray(targets, dtype=np.float64)  # (N, C) multi-hot
        # -log sigmoid, -log(1 - sigmoid)
        nll = float(np.mean(y * np.logaddexp(0.0, -z) + (1 - y) * np.logaddexp(0.0, z)))
        p = 1.0 / (1.0 + np.exp(-z))  # (N, C)
        conf, correct = np.maximum(p, 1 - p), (p >= 0.5) == (y >= 0.5)
    else:
        y = np.asarray(targets, dtype=np.int64)  # (N,)
        logp = z - np.logaddexp.reduce(z, axis=-1, keepdims=True)  # (N, C) log softmax
        nll = float(-logp[np.arange(len(y)), y].mean())
        p = np.exp(logp)
        conf, correct = p.max(-1), p.argmax(-1) == y
    return {"val_nll": nll, "ece": expected_calibration_error(conf, correct, bins)}


def metrics_tables(accuracy: float, macro_f1: float, per_class: dict) -> str:
    """The metrics section of a model card: accuracy and macro-F1, then precision, recall, F1 and
    support per class (Markdown tables)."""
    rows = "\n".join(
        f"| {lab} | {m['precision']:.3f} | {m['recall']:.3f} | {m['f1']:.3f} | {m['support']} |"
        for lab, m in per_class.items()
    )
    return f"""| metric | value |
|---|---|
| accuracy | **{accuracy:.4f}** |
| macro-F1 | **{macro_f1:.4f}** |

| class | precision | recall | F1 | support |
|---|---|---|---|---|
{rows}"""
