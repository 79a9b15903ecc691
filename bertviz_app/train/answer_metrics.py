"""Exact match and token F1 of extractive answers, as the official SQuAD v2.0 evaluation script defines them, with
bootstrap intervals over questions.

Written here rather than taken from the ``evaluate`` package, whose ``load("squad_v2")`` fetches the metric's code
from the network at run time. The definitions are the script's (``evaluate-v2.0.py``: ``normalize_answer``,
``get_tokens``, ``compute_exact``, ``compute_f1``, ``get_raw_scores``):

- **normalisation**: lower case, remove ASCII punctuation (``string.punctuation``), remove the articles
  a / an / the (whole words), collapse whitespace;
- **exact match**: 1 when the normalised gold and prediction are equal, else 0;
- **token F1**: over the normalised texts split on whitespace, the tokens in common counted with multiplicity;
  precision = common / predicted tokens, recall = common / gold tokens, F1 their harmonic mean; when either side
  has no tokens, 1 if both have none, else 0;
- **several gold answers**: the maximum over them; gold answers that normalise to nothing are dropped, and a
  question left with none (SQuAD 2.0's unanswerable one) has the gold ``[""]``, so only a prediction that
  normalises to nothing (the empty answer, or one such as "the" or ".") scores 1 there.

Scores here are fractions in [0, 1] (the script prints them x 100). ``mean_intervals`` resamples questions with
replacement (seeded, ``BOOTSTRAP_SAMPLES`` draws, the same draws for every column it is given, drawn a block at a
time so memory stays bounded) and gives the 2.5th and 97.5th percentiles of each column's mean, as
``train.entity_metrics`` does over sentences.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from .entity_metrics import BOOTSTRAP_SAMPLES

__all__ = ["normalize_answer", "answer_tokens", "exact_match", "token_f1", "gold_answers", "score_answer",
           "answer_scores", "mean_intervals", "BOOTSTRAP_SAMPLES"]

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)
_DRAWN_AT_ONCE = 4_000_000  # row indices drawn per block of resamples (32 MB)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no ASCII punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    """The normalised answer's tokens (split on whitespace); none for an empty text."""
    return normalize_answer(text).split() if text else []


def exact_match(gold: str, predicted: str) -> int:
    """1 when the two answers are equal once normalised, else 0."""
    return int(normalize_answer(gold) == normalize_answer(predicted))


def token_f1(gold: str, predicted: str) -> float:
    """Token F1 of one prediction against one gold answer (see the module's docstring)."""
    return _f1(answer_tokens(gold), answer_tokens(predicted))


def _f1(gold_tokens: list[str], predicted_tokens: list[str]) -> float:
    if not gold_tokens or not predicted_tokens:
        return float(gold_tokens == predicted_tokens)
    common = sum((Counter(gold_tokens) & Counter(predicted_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(predicted_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def gold_answers(texts: Sequence[str]) -> list[str]:
    """The gold answers a question is scored against: those that normalise to something, else ``[""]`` (no
    answer)."""
    kept = [t for t in texts if normalize_answer(t)]
    return kept or [""]


def score_answer(golds: Sequence[str], predicted: str) -> tuple[int, float]:
    """(exact match, token F1) of ``predicted`` against a question's gold answers: the maximum over them
    (``gold_answers``; an empty list is "no answer"). Each text is normalised once."""
    kept = [n for n in map(normalize_answer, golds) if n] or [""]
    guess = normalize_answer(predicted)
    tokens = guess.split()
    return max(int(g == guess) for g in kept), max(_f1(g.split(), tokens) for g in kept)


def mean_intervals(columns: Mapping[str, Sequence[float]], *, seed: int = 0,
                   samples: int = BOOTSTRAP_SAMPLES) -> dict[str, tuple[float, float]] | None:
    """Each column's mean with a 95% bootstrap interval: {name: (low, high)} from ``samples`` resamples of the rows
    (the same resamples for every column; all columns as long as each other). None when there are no rows or no
    samples."""
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}  # (N,) each
    n = {len(a) for a in arrays.values()}
    if len(n) > 1:
        raise ValueError(f"columns of different lengths: {sorted(n)}")
    n_rows = n.pop() if n else 0
    if not n_rows or samples < 1:
        return None
    rng = np.random.default_rng(seed)
    draws = {name: np.empty(samples) for name in arrays}  # (B,) each: the column's mean in each resample
    step = max(1, _DRAWN_AT_ONCE // n_rows)  # resamples drawn at once: memory bounded whatever the rows
    for start in range(0, samples, step):
        rows = rng.integers(0, n_rows, size=(min(step, samples - start), n_rows))  # (b, N) rows drawn
        for name, values in arrays.items():
            draws[name][start:start + len(rows)] = values[rows].mean(axis=1)
    return {name: (float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))) for name, d in draws.items()}


def answer_scores(golds: Sequence[Sequence[str]], predicted: Sequence[str], *, seed: int = 0,
                  samples: int = BOOTSTRAP_SAMPLES) -> dict:
    """{"exact", "f1", "n", "interval": {"exact": (lo, hi), "f1": (lo, hi)} or None, "per_question": {"exact":
    [...], "f1": [...]}} of predictions against each question's gold answers (a list per question; an empty list:
    no answer). ``samples``: bootstrap resamples of the questions (0: no intervals)."""
    if len(golds) != len(predicted):
        raise ValueError(f"{len(golds)} questions with gold answers but {len(predicted)} predictions")
    pairs = [score_answer(g, p) for g, p in zip(golds, predicted)]
    exact = [float(e) for e, _ in pairs]
    f1 = [f for _, f in pairs]
    n = len(pairs)
    return {"exact": sum(exact) / n if n else 0.0, "f1": sum(f1) / n if n else 0.0, "n": n,
            "interval": mean_intervals({"exact": exact, "f1": f1}, seed=seed, samples=samples),
            "per_question": {"exact": exact, "f1": f1}}
