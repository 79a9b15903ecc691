"""Two classifiers on the same labelled rows: which is better, where, and is the difference chance?

    ev = evaluate_file(tuned, "reviews.csv", compare_with=base)   # both models, the same rows
    c = ev.comparison                                             # or compare_evaluations(ev_a, ev_b)
    c.only_a_correct, c.only_b_correct, c.mcnemar_p, c.reading
    c.slices                                                      # B - A on each of A's slices, largest first

- **counts**: per row, whether each model's prediction is the true class: both right, only A, only
  B, both wrong (they add up to the rows).
- **McNemar's exact test** (``mcnemar_p``): only the rows where exactly one model is right say which
  is better; under "neither is better" each of those is A's or B's with probability 1/2, so the
  two-sided p is ``min(1, 2 P(X <= min(b, c)))`` for X ~ Binomial(b + c, 1/2) (1.0 when b + c = 0).
- **disagreements**: the rows where the two predictions differ (both may be wrong), most confident
  first (the larger of the two confidences).
- **slices**: every slice of A's evaluation (the same rows, its ``slice_masks``), with B's accuracy
  on them and the difference B - A, sorted by its size, largest first.

The two evaluations must be of the same rows (``evaluate_file(..., compare_with=)`` makes them so)
and the two models must have the same class names (in any order: predictions are compared by name).
``base_of`` names the model a fine-tuned run started from, the natural B for a run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..errors import DataError, InputError
from ..models.catalog import load_run_info

if TYPE_CHECKING:
    from ..models.registry import LoadedModel

__all__ = ["Comparison", "compare_evaluations", "check_same_classes", "mcnemar_p", "mcnemar_reading", "base_of",
           "ROWS_SHOWN", "SIGNIFICANT"]

ROWS_SHOWN = 100  # disagreeing rows in the JSON (comparison.json has every one); as MISCLASSIFIED_SHOWN
SIGNIFICANT = 0.05  # a p below this reads "unlikely to be chance"


class Evaluated(Protocol):
    """What a comparison reads of an evaluation (``evaluation.Evaluation`` has it): the rows, their classes
    and predictions, and the slices. Named here so this module needs nothing of the one that holds it."""

    model: str
    rows: int
    labels: tuple[str, ...]
    texts: tuple[str, ...]
    pairs: tuple[str, ...] | None
    source_rows: tuple[int, ...]
    true: np.ndarray  # (N,) class index
    predicted: np.ndarray  # (N,) class index
    probs: np.ndarray  # (N, C)
    accuracy: float
    macro_f1: float | None  # None with one class
    slices: tuple
    slice_masks: tuple


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p of ``b`` rows only A gets right against ``c`` only B gets right:
    ``min(1, 2 P(X <= min(b, c)))``, X ~ Binomial(b + c, 1/2); 1.0 when b + c is 0. Summed in log
    space, so it holds for any count."""
    b, c = int(b), int(c)
    if b < 0 or c < 0:
        raise InputError(f"McNemar counts are numbers of rows, got {b} and {c}.")
    n, k = b + c, min(b, c)
    if n == 0:
        return 1.0
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2) for i in range(k + 1)]
    top = max(logs)
    tail = math.exp(top) * sum(math.exp(x - top) for x in logs)  # P(X <= k)
    return min(1.0, 2 * tail)


def mcnemar_reading(a: str, b: str, only_a: int, only_b: int, p: float) -> str:
    """One plain sentence saying what the McNemar test found."""
    if only_a + only_b == 0:
        return f"{a} and {b} are right on the same rows and wrong on the same rows: no evidence either is better."
    first, second, n1, n2 = (b, a, only_b, only_a) if only_b >= only_a else (a, b, only_a, only_b)
    verdict = "unlikely to be chance" if p < SIGNIFICANT else "no evidence either is better"
    return (f"{first} is right on {n1:,} row{'s' if n1 != 1 else ''} {second} gets wrong, {second} on {n2:,} "
            f"row{'s' if n2 != 1 else ''} {first} gets wrong: p = {p:.3g}, {verdict}.")


@dataclass(frozen=True)
class Comparison:
    """Model A against model B on the same rows (see the module's docstring)."""

    models: tuple[str, str]  # (A, B)
    rows: int
    accuracy: tuple[float, float]
    macro_f1: tuple[float | None, float | None]
    both_correct: int
    only_a_correct: int
    only_b_correct: int
    both_wrong: int
    disagreements: int  # rows where the two predictions differ
    disagreeing_rows: tuple[dict, ...]  # every one, most confident first
    mcnemar_p: float
    reading: str
    slices: tuple[dict, ...]  # {"kind", "name", "value", "column", "size", "accuracy_a", "accuracy_b", "difference"}

    def to_dict(self, rows: int | None = ROWS_SHOWN) -> dict:
        """The JSON of the comparison; ``rows``: how many disagreeing rows to list (None: all)."""
        a, b = self.models
        return {"models": {"a": a, "b": b}, "rows": self.rows,
                "accuracy": {"a": self.accuracy[0], "b": self.accuracy[1]},
                "macro_f1": {"a": self.macro_f1[0], "b": self.macro_f1[1]},
                "both_correct": self.both_correct, "only_a_correct": self.only_a_correct,
                "only_b_correct": self.only_b_correct, "both_wrong": self.both_wrong,
                "disagreements": self.disagreements, "mcnemar_p": self.mcnemar_p, "reading": self.reading,
                "slices": [dict(s) for s in self.slices],
                "disagreeing_rows": [dict(r) for r in self.disagreeing_rows[:rows]]}


def check_same_classes(a_name: str, a_labels, b_name: str, b_labels) -> None:
    """DataError naming both models' classes unless they are the same set of names (each name once)."""
    for name, labels in ((a_name, a_labels), (b_name, b_labels)):
        twice = sorted({x for x in labels if list(labels).count(x) > 1})
        if twice:
            raise DataError(f"{name} has more than one class named {', '.join(twice)}: its predictions cannot be "
                            "matched to another model's by name; rename its classes (config.json id2label).")
    if set(a_labels) != set(b_labels):
        raise DataError(f"{a_name} and {b_name} do not have the same classes ({a_name}: {', '.join(a_labels)}; "
                        f"{b_name}: {', '.join(b_labels)}); compare two models trained on the same classes.")


def compare_evaluations(a: Evaluated, b: Evaluated) -> Comparison:
    """Compare two evaluations of the same rows (``source_rows`` equal) by models with the same class
    names: counts, McNemar's exact test, the disagreeing rows and B's accuracy on A's slices."""
    if a.source_rows != b.source_rows:
        raise InputError(f"The evaluations of {a.model} ({a.rows:,} rows) and {b.model} ({b.rows:,} rows) are not "
                         "of the same rows; evaluate both on the same file and columns (evaluate_file's "
                         "compare_with does).")
    check_same_classes(a.model, a.labels, b.model, b.labels)
    pred_a = np.array([a.labels[i] for i in a.predicted], dtype=object)  # (N,) class names
    pred_b = np.array([b.labels[i] for i in b.predicted], dtype=object)
    ok_a, ok_b = a.predicted == a.true, b.predicted == b.true  # (N,)
    only_a, only_b = int((ok_a & ~ok_b).sum()), int((ok_b & ~ok_a).sum())
    p = mcnemar_p(only_a, only_b)
    return Comparison(
        models=(a.model, b.model), rows=a.rows, accuracy=(a.accuracy, b.accuracy), macro_f1=(a.macro_f1, b.macro_f1),
        both_correct=int((ok_a & ok_b).sum()), only_a_correct=only_a, only_b_correct=only_b,
        both_wrong=int((~ok_a & ~ok_b).sum()), disagreements=int((pred_a != pred_b).sum()),
        disagreeing_rows=tuple(_disagreeing(a, b, pred_a, pred_b)), mcnemar_p=p,
        reading=mcnemar_reading(a.model, b.model, only_a, only_b, p), slices=tuple(_slice_differences(a, ok_b)))


def _disagreeing(a: Evaluated, b: Evaluated, pred_a: np.ndarray, pred_b: np.ndarray) -> list[dict]:
    conf_a = a.probs[np.arange(a.rows), a.predicted]  # (N,)
    conf_b = b.probs[np.arange(b.rows), b.predicted]  # (N,)
    rows = np.where(pred_a != pred_b)[0]
    rows = rows[np.argsort(-np.maximum(conf_a[rows], conf_b[rows]), kind="stable")]
    return [{"row": a.source_rows[i], "text": a.texts[i], "pair": None if a.pairs is None else a.pairs[i],
             "true": a.labels[a.true[i]], "predicted_a": pred_a[i], "predicted_b": pred_b[i],
             "confidence_a": float(conf_a[i]), "confidence_b": float(conf_b[i])} for i in rows]


def _slice_differences(a: Evaluated, ok_b: np.ndarray) -> list[dict]:
    out = []
    for s, mask in zip(a.slices, a.slice_masks):
        if not s.size:
            continue
        acc_b = float(ok_b[mask].mean())
        out.append({"kind": s.kind, "name": s.name, "value": s.value, "column": s.column, "size": s.size,
                    "accuracy_a": s.accuracy, "accuracy_b": acc_b, "difference": acc_b - s.accuracy})
    return sorted(out, key=lambda d: -abs(d["difference"]))


def base_of(lm: LoadedModel) -> str | None:
    """The base model a fine-tuned run was trained from (its run.json's ``base``: a registered name or a
    folder), None for a model that is not a run or whose record does not say."""
    info = load_run_info(lm.path)
    base = None if info is None else info.get("base")
    return base.strip() if isinstance(base, str) and base.strip() else None
