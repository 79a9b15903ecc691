"""Calibration of a single-label classifier: how honest its confidence is, and temperature scaling.

- ``calibration_metrics``: expected calibration error (top-label, 15 equal-width confidence bins,
  Guo et al. 2017), negative log-likelihood and Brier score;
- ``reliability_bins``: the bins behind the ECE, for a reliability diagram;
- ``fit_temperature``: the temperature T > 0 that minimises the NLL of ``softmax(logits / T)``
  (temperature scaling, Guo et al. 2017); it never changes the argmax;
- ``calibration_report``: T fitted on one part of held-out rows (``split_rows``) and judged on the
  other: it **helps** (``judge_temperature``) only when, on the judging rows, the NLL is lower and the
  ECE not higher; ``judgement`` says which, with the numbers. Under ``MIN_SPLIT_ROWS`` rows nothing is
  fitted. ``evaluated_judgement``: the same rule on an evaluation's calibration (Evaluate's names);
- ``save_calibration`` / ``load_temperature``: ``calibration.json`` beside a model's ``config.json``,
  which predict applies when present (see docs/methods.md, "Calibration"); a temperature that did not
  help is refused, with the reason;
- ``calibration_info``: T and what it was fitted on, for a page to say so; ``rescale_probs``: the
  temperature-scaled probabilities from the raw softmax (the page keeps both, to show either).

Numpy in, plain floats / dicts out. Nothing here reads the environment.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from ..errors import InputError

log = logging.getLogger(__name__)

CALIBRATION_FILE = "calibration.json"
T_MIN, T_MAX = 0.05, 20.0
N_BINS = 15
EPS = 1e-12
MIN_SPLIT_ROWS = 20  # fewer held-out rows: no temperature (too few to fit on one part and judge on the other)
SPLIT_SEED = 0  # the fine-tune's fit/judge split of its validation rows
RULE = "it must lower the NLL without raising the ECE"


def _check(probs, labels, what: str = "probs") -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels)
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] < 2:
        raise InputError(f"{what} must be a non-empty (rows, classes) array with at least 2 classes, "
                         f"got shape {p.shape}")
    if y.ndim != 1 or y.shape[0] != p.shape[0]:
        raise InputError(f"labels must be one integer per row ({p.shape[0]} rows), got shape {y.shape}")
    if y.dtype.kind not in "iu":
        if y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
            y = y.astype(np.int64)
        else:
            raise InputError("labels must be integer class indices")
    y = y.astype(np.int64)
    if y.min() < 0 or y.max() >= p.shape[1]:
        raise InputError(f"labels must lie in 0..{p.shape[1] - 1}, found {int(y.min())}..{int(y.max())}")
    if not np.all(np.isfinite(p)):
        raise InputError(f"{what} contain NaN or infinite values")
    return p, y


def softmax_t(logits, t: float = 1.0) -> np.ndarray:
    """``softmax(logits / t)`` over the last axis, in float64 (numerically stable)."""
    if not (isinstance(t, (int, float)) and math.isfinite(t) and t > 0):
        raise InputError(f"temperature must be a positive number, got {t!r}")
    z = np.asarray(logits, dtype=np.float64) / float(t)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _bin_index(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    # Equal-width bins: bin b holds edges[b] < confidence <= edges[b + 1] (0 goes into the first), the
    # same edges as classifier_metrics.expected_calibration_error, so the fine-tune's ECE and this one agree.
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return np.searchsorted(edges[1:-1], confidence, side="left")


def reliability_bins(probs, labels, n_bins: int = N_BINS) -> list[dict]:
    """Top-label reliability bins: for each of ``n_bins`` equal-width confidence bins ``(low, high]``,
    the number of rows whose top probability falls in it, their mean confidence and their accuracy
    (``confidence`` and ``accuracy`` are None for an empty bin)."""
    p, y = _check(probs, labels)
    if not isinstance(n_bins, int) or n_bins < 1:
        raise InputError(f"n_bins must be a positive integer, got {n_bins!r}")
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == y).astype(np.float64)
    idx = _bin_index(conf, n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    out = []
    for k in range(n_bins):
        m = idx == k
        n = int(m.sum())
        out.append({
            "low": float(edges[k]), "high": float(edges[k + 1]), "count": n,
            "confidence": float(conf[m].mean()) if n else None,
            "accuracy": float(correct[m].mean()) if n else None,
        })
    return out


def calibration_metrics(probs, labels, n_bins: int = N_BINS) -> dict:
    """ECE, NLL and Brier score of predicted probabilities ``probs`` (rows, classes) against integer labels.

    - ``ece``: top-label expected calibration error, sum over ``n_bins`` equal-width confidence bins of
      (rows in bin / rows) * |accuracy in bin - mean confidence in bin| (Guo et al. 2017);
    - ``nll``: mean of -log p(true class), p clipped at 1e-12;
    - ``brier``: multi-class Brier score, mean over rows of sum over classes of (p_c - onehot_c)^2
      (so it lies in [0, 2]; the binary "p - y squared" convention is half of it for two classes).
    """
    p, y = _check(probs, labels)
    bins = reliability_bins(p, y, n_bins)
    n = p.shape[0]
    ece = sum(b["count"] / n * abs(b["accuracy"] - b["confidence"]) for b in bins if b["count"])
    p_true = p[np.arange(n), y]
    nll = float(-np.log(np.clip(p_true, EPS, None)).mean())
    onehot = np.zeros_like(p)
    onehot[np.arange(n), y] = 1.0
    brier = float(((p - onehot) ** 2).sum(axis=1).mean())
    return {"ece": float(ece), "nll": nll, "brier": brier}


def _nll_at(z: np.ndarray, y: np.ndarray, log_t: float) -> float:
    s = z / math.exp(log_t)
    s = s - s.max(axis=1, keepdims=True)
    lse = np.log(np.exp(s).sum(axis=1))
    return float((lse - s[np.arange(len(y)), y]).mean())


def fit_temperature(logits, labels) -> float:
    """The temperature T in [0.05, 20] minimising the mean NLL of ``softmax(logits / T)`` on (logits, labels).

    The NLL is convex in 1/T, unimodal in log T, so a golden-section search over log T (deterministic,
    no randomness, no torch) finds it; the result is refined to ~1e-6 relative precision."""
    z, y = _check(logits, labels, "logits")
    lo, hi = math.log(T_MIN), math.log(T_MAX)
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = _nll_at(z, y, c), _nll_at(z, y, d)
    while b - a > 1e-7:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = _nll_at(z, y, c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = _nll_at(z, y, d)
    best = (a + b) / 2
    # The ends of the range are candidates too (a monotone NLL pushes the optimum to a bound).
    candidates = [(_nll_at(z, y, x), x) for x in (lo, best, hi)]
    return float(min(math.exp(min(candidates)[1]), T_MAX))


def split_rows(n: int, fit_share: float = 0.5, seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(fit, judge): two disjoint sorted index arrays covering ``range(n)``, drawn at random (``seed``);
    ``fit`` holds ``round(fit_share * n)`` of them. Either may be empty (the caller checks)."""
    order = np.random.default_rng(seed).permutation(n)
    n_fit = int(round(fit_share * n))
    return np.sort(order[:n_fit]), np.sort(order[n_fit:])


def judge_temperature(t: float, before: dict, after: dict, judged_rows: int) -> tuple[bool, str]:
    """Does the temperature ``t`` help on rows it was not fitted on? ``before`` / ``after``:
    ``calibration_metrics`` of the raw and the scaled softmax on those ``judged_rows`` rows. The rule:
    it helps when the NLL is lower and the ECE not higher (Brier is shown, not judged: it follows the NLL).
    Returns (helps, one sentence saying which, with the numbers)."""
    nll_lower = after["nll"] < before["nll"]
    ece_kept = after["ece"] <= before["ece"]
    helps = bool(nll_lower and ece_kept)

    def move(a: float, b: float) -> str:
        return "lower" if b < a else ("higher" if b > a else "the same")

    numbers = (f"NLL {before['nll']:.4f} -> {after['nll']:.4f} ({move(before['nll'], after['nll'])}), ECE "
               f"{before['ece']:.4f} -> {after['ece']:.4f} ({move(before['ece'], after['ece'])})")
    if "brier" in before and "brier" in after:
        numbers += f", Brier {before['brier']:.4f} -> {after['brier']:.4f}"
    where = f"on the {judged_rows:,} rows it was not fitted on"
    if helps:
        return True, f"T = {t:.3f} helps {where}: {numbers}."
    return False, f"T = {t:.3f} does not help {where}: {numbers}; {RULE}."


def calibration_report(logits, labels, n_bins: int = N_BINS, *, fit_share: float = 0.5,
                       seed: int = SPLIT_SEED) -> dict:
    """Temperature scaling fitted on one part of held-out rows and judged on the other: the rows are
    split at random (``split_rows``, ``seed``), T is fitted on ``fit_share`` of them, and ECE/NLL/Brier
    before and after are measured on the others (the judging rows). ``{"temperature", "rows",
    "fitted_on_rows", "judged_on_rows", "seed", "ece_before", "ece_after", "nll_before", "nll_after",
    "brier_before", "brier_after", "helps", "judgement"}``: ``helps`` by ``judge_temperature``'s rule,
    ``judgement`` the sentence saying why. Under ``MIN_SPLIT_ROWS`` rows (or a split leaving a part
    empty) no temperature is fitted: ``temperature`` and the ``_after`` numbers are None, the ``_before``
    ones are measured on every row, ``helps`` is False and ``judgement`` says why."""
    z, y = _check(logits, labels, "logits")
    n = len(y)
    fit, judge = split_rows(n, fit_share, seed)
    base = {"rows": int(n), "seed": int(seed)}
    if n < MIN_SPLIT_ROWS or len(fit) == 0 or len(judge) == 0:
        before = calibration_metrics(softmax_t(z, 1.0), y, n_bins)
        why = (f"{n} rows are too few to fit a temperature on one part and judge it on the other (at least "
               f"{MIN_SPLIT_ROWS})" if n < MIN_SPLIT_ROWS else f"a fit share of {fit_share} leaves a part empty")
        return {"temperature": None, **base, "fitted_on_rows": 0, "judged_on_rows": 0,
                "ece_before": before["ece"], "ece_after": None, "nll_before": before["nll"], "nll_after": None,
                "brier_before": before["brier"], "brier_after": None, "helps": False,
                "judgement": f"No temperature fitted: {why}."}
    t = fit_temperature(z[fit], y[fit])
    before = calibration_metrics(softmax_t(z[judge], 1.0), y[judge], n_bins)
    after = calibration_metrics(softmax_t(z[judge], t), y[judge], n_bins)
    helps, judgement = judge_temperature(t, before, after, len(judge))
    return {
        "temperature": t, **base, "fitted_on_rows": int(len(fit)), "judged_on_rows": int(len(judge)),
        "ece_before": before["ece"], "ece_after": after["ece"],
        "nll_before": before["nll"], "nll_after": after["nll"],
        "brier_before": before["brier"], "brier_after": after["brier"],
        "helps": helps, "judgement": judgement,
    }


def calibration_outcome(report: dict | None) -> str:
    """One plain sentence on a fine-tune's temperature (its ``calibration_report``, ``metrics["calibration"]``):
    fitted on how many validation rows, judged on how many, whether it helped there (``judgement``) and so
    whether it was saved as calibration.json and applied; "" without a report. A run from before the
    temperature was judged (no ``helps``) fitted and saved it on every validation row: said so."""
    if not isinstance(report, dict) or not report:
        return ""
    t = report.get("temperature")
    if "helps" not in report:  # an older run: fitted on every validation row, saved, measured where fitted
        if not isinstance(t, (int, float)):
            return ""
        return (f"Temperature scaling: T = {t:.3f}, fitted on the validation rows and saved as calibration.json "
                "(predict applies it); its before/after numbers were measured on the rows it was fitted on (a run "
                "from before temperatures were judged on other rows).")
    judgement = str(report.get("judgement") or "")
    if not isinstance(t, (int, float)):
        return f"Temperature scaling: {judgement} Predict reports the model's raw softmax."
    head = (f"Temperature scaling (fitted on {int(report.get('fitted_on_rows') or 0):,} validation rows, judged on "
            f"the other {int(report.get('judged_on_rows') or 0):,}): {judgement} ")
    return head + ("Saved as calibration.json: predict applies it." if report.get("helps") else
                   "Not saved: predict reports the model's raw softmax.")


def evaluated_judgement(calibration: dict) -> tuple[bool, str]:
    """``judge_temperature``'s rule on an evaluation's calibration (``Evaluation.calibration``: ``ece``,
    ``nll``, ``brier`` before and ``..._after``, measured on the rows T was not fitted on), recomputed
    from its numbers (so a stored evaluation from before the rule is judged the same way): (helps, why).
    No temperature fitted: (False, its ``note``)."""
    t = calibration.get("temperature")
    if t is None:
        return False, ("This evaluation fitted no temperature, so there is none to save: "
                       + str(calibration.get("note") or "evaluate a file with rows of at least two classes."))
    keys = ("ece", "nll")
    if any(not isinstance(calibration.get(k), (int, float)) or not isinstance(calibration.get(f"{k}_after"),
                                                                              (int, float)) for k in keys):
        return False, f"T = {float(t):.3f} has no before/after numbers to judge it by; evaluate the file again."
    return _judge_stored(t, calibration, "{}", calibration.get("measured_on_rows"))


def _report_judgement(report: dict) -> tuple[bool, str] | None:
    """The rule on a report's own numbers (``ece_before``...), or None when it lacks them."""
    if any(not isinstance(report.get(k), (int, float)) for k in ("ece_before", "ece_after", "nll_before",
                                                                   "nll_after")):
        return None
    return _judge_stored(report["temperature"], report, "{}_before", report.get("judged_on_rows", report.get("rows")))


def _judge_stored(t, values: dict, before: str, rows) -> tuple[bool, str]:
    """``judge_temperature`` on stored numbers: ``values[before.format(k)]`` and ``values[k + "_after"]`` for
    the ECE, NLL and Brier present (an evaluation names the raw ones ``ece``..., a report ``ece_before``...)."""
    def pick(name: str) -> dict:
        keys = [(k, name.format(k)) for k in ("ece", "nll", "brier")]
        return {k: float(values[key]) for k, key in keys if values.get(key) is not None}

    judged_rows = int(rows) if isinstance(rows, (int, float)) else 0
    return judge_temperature(float(t), pick(before), pick("{}_after"), judged_rows)


def calibration_record(report: dict, source: str) -> dict:
    """What ``calibration.json`` holds, from a ``calibration_report`` result: ``{"temperature",
    "fitted_on": {"rows", "source"}, "judged_on_rows", "ece_before", "ece_after", "nll_before", "nll_after",
    "brier_before", "brier_after", "judgement", "created"}``; ``source`` says what T was fitted on (e.g.
    "fine-tune validation split"). InputError, saying why, for a temperature that did not help where it
    was judged (``report["helps"]`` False, or its before/after numbers failing ``judge_temperature``'s rule)."""
    t = report.get("temperature")
    if t is None:
        raise InputError(str(report.get("judgement") or "No temperature was fitted, so there is none to save."))
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and T_MIN <= t <= T_MAX):
        raise InputError(f"temperature {t!r} is not a number in [{T_MIN}, {T_MAX}]")
    judged = _report_judgement(report)
    if report.get("helps") is False or (judged is not None and not judged[0]):
        why = report.get("judgement") if report.get("helps") is False else judged[1]  # type: ignore[index]
        raise InputError(f"Not saved: {why or 'the temperature did not help where it was judged.'}")
    rows = report.get("fitted_on_rows", report.get("rows", 0))
    record = {
        "temperature": float(t),
        "fitted_on": {"rows": int(rows or 0), "source": str(source)},
        **{k: float(report[k]) for k in ("ece_before", "ece_after", "nll_before", "nll_after",
                                          "brier_before", "brier_after") if report.get(k) is not None},
    }
    if report.get("judged_on_rows"):
        record["judged_on_rows"] = int(report["judged_on_rows"])
    if judged is not None:
        record["judgement"] = judged[1]
    record["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return record


def save_calibration(folder, report: dict, source: str) -> Path:
    """Write ``calibration.json`` into the model folder ``folder`` atomically (temporary file + rename)
    from a ``calibration_report`` result (``calibration_record``: refused, with the reason, when the
    temperature did not help where it was judged). Only that one file is written."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder: calibration.json goes beside a model's config.json")
    data = calibration_record(report, source)
    fd, tmp = tempfile.mkstemp(prefix=".calibration-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
        os.replace(tmp, folder / CALIBRATION_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return folder / CALIBRATION_FILE


def save_evaluated_temperature(folder, calibration: dict, source: str) -> Path:
    """Write the temperature an evaluation fitted (``Evaluation.calibration``: ``temperature``,
    ``fitted_on_rows`` and the metrics before/after measured on the other rows) into the model folder
    ``folder`` as ``calibration.json``, which predict then applies. ``source`` says what it was fitted
    on (e.g. "evaluate: 1,000 rows of reviews.csv"). InputError, saying why, when the evaluation fitted
    none (its ``note`` says why), when the temperature did not help on the rows it was measured on
    (``evaluated_judgement``), or ``folder`` is not a model folder."""
    t = calibration.get("temperature")
    helps, why = evaluated_judgement(calibration)
    if not helps:
        raise InputError(why if t is None else f"This temperature is not saved: {why}")
    if not (Path(folder) / "config.json").is_file():
        raise InputError(f"{folder} is not a model folder (no config.json): a temperature is saved beside a model's "
                         "config.json; save the model to a folder first.")
    report = {"temperature": t, "fitted_on_rows": calibration.get("fitted_on_rows", 0),
              "judged_on_rows": calibration.get("measured_on_rows", 0),
              **{f"{k}_before": calibration.get(k) for k in ("ece", "nll", "brier")},
              **{f"{k}_after": calibration.get(f"{k}_after") for k in ("ece", "nll", "brier")}}
    return save_calibration(folder, report, source)


def _read_calibration(folder) -> dict | None:
    """``folder/calibration.json`` as a dict with a usable temperature, or None (missing, unreadable, not
    JSON, no number, out of [0.05, 20]: logged as a warning, never raised)."""
    if folder is None:
        return None
    path = Path(folder) / CALIBRATION_FILE
    try:
        if not path.is_file():
            return None
        if path.stat().st_size > 1_000_000:
            log.warning("%s is too large to be a calibration file; ignored", path)
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as e:
        log.warning("%s could not be read (%s); predictions stay uncalibrated", path, e)
        return None
    t = data.get("temperature") if isinstance(data, dict) else None
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or not T_MIN <= t <= T_MAX:
        log.warning("%s holds no usable temperature (%r, expected a number in [%s, %s]); ignored",
                    path, t, T_MIN, T_MAX)
        return None
    return data


def load_temperature(folder) -> float | None:
    """The temperature saved in ``folder/calibration.json``, or None when there is none or it cannot be
    used (unreadable, not JSON, no number, out of [0.05, 20]: logged as a warning, never raised)."""
    data = _read_calibration(folder)
    return None if data is None else float(data["temperature"])


def calibration_info(folder) -> dict | None:
    """What ``folder/calibration.json`` says about its temperature, for a reader: ``{"temperature", "rows",
    "source"}`` (``rows``: an int or None, ``source``: a short string or None where the file does not say),
    or None when there is no usable temperature (as ``load_temperature``). Never raises."""
    data = _read_calibration(folder)
    if data is None:
        return None
    fitted = data.get("fitted_on") if isinstance(data.get("fitted_on"), dict) else {}
    rows = fitted.get("rows")
    rows = rows if isinstance(rows, int) and not isinstance(rows, bool) and rows > 0 else None
    source = fitted.get("source")
    source = " ".join(source.split())[:200] if isinstance(source, str) and source.strip() else None
    return {"temperature": float(data["temperature"]), "rows": rows, "source": source}


def rescale_probs(raw_probs, t: float) -> np.ndarray:
    """``softmax(logits / t)`` from the raw softmax ``raw_probs = softmax(logits)`` (last axis): log p is
    the logits up to a constant per row, which the softmax drops. A zero probability stays zero."""
    p = np.asarray(raw_probs, dtype=np.float64)
    if p.ndim < 1 or p.shape[-1] == 0 or not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p.max(-1) <= 0):
        raise InputError("raw_probs must be non-negative finite probabilities with at least one above zero")
    with np.errstate(divide="ignore"):
        z = np.log(p)
    return softmax_t(z, t)
