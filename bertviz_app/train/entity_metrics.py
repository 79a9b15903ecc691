"""Entity-level scores of a token classifier: precision, recall and F1 over whole entities, per type and in all,
as seqeval computes them in strict IOB2 mode (an entity counts only when its type, start and end all match; an
``I-X`` that starts no entity is no entity), with 95% bootstrap intervals over sentences. The entity sets are read
here (``entities_of``) and tests compare every number with seqeval's own report.

``entity_scores(true, pred)`` takes the tag sequences of each sentence (IOB2, or IO: plain types, each run of one
type an entity, converted to IOB2 first). The point values equal seqeval's ``classification_report``; the
intervals resample sentences (a sentence's entities stay together, as they are not independent), seeded, so a
run gives the same numbers twice.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["entity_scores", "entities_of", "io_to_iob2", "BOOTSTRAP_SAMPLES"]

BOOTSTRAP_SAMPLES = 1000


def io_to_iob2(tags: Sequence[str]) -> list[str]:
    """IO tags (``PER PER O LOC``) as IOB2 (``B-PER I-PER O B-LOC``); IOB2 tags come back as they are."""
    if any(t.startswith(("B-", "I-")) for t in tags):
        return list(tags)
    out, prev = [], "O"
    for t in tags:
        out.append("O" if t == "O" else ("I-" if t == prev else "B-") + t)
        prev = t
    return out


def entities_of(sentences: Sequence[Sequence[str]]) -> list[set[tuple[str, int, int]]]:
    """Each sentence's entities as seqeval's strict IOB2 reads them: {(type, start token, end token exclusive)}.
    An entity starts at ``B-X`` and runs over the ``I-X`` that follow it; an ``I-X`` that continues no ``X`` (after
    ``O``, another type, or at the start) belongs to no entity. Written here rather than imported: seqeval ships
    only as a source package whose build fetches setuptools-scm at install time, which fails in the Docker image
    (tests check these sets against seqeval's own report)."""
    out = []
    for tags in sentences:
        found, start, kind = set(), None, None
        for i, tag in enumerate([*io_to_iob2(tags), "O"]):  # a last O closes an entity at the end
            continues = tag.startswith("I-") and kind == tag[2:]
            if start is not None and not continues:
                found.add((kind, start, i))
                start, kind = None, None
            if tag.startswith("B-"):
                start, kind = i, tag[2:]
        out.append(found)
    return out


def entity_scores(true: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], *, seed: int = 0,
                  samples: int = BOOTSTRAP_SAMPLES) -> dict:
    """{"entity_f1", "precision", "recall", "support", "interval": {"f1", "precision", "recall"},
    "per_type": {type: {"precision", "recall", "f1", "support", "predicted", "interval"}}} over whole entities
    (strict IOB2). ``true`` and ``pred``: one tag list per sentence, of equal lengths. A score with nothing to
    divide (no entity predicted, or none true) is 0, as seqeval's ``zero_division=0``. ``samples``: bootstrap
    resamples for the intervals (0: none, the intervals None; what training's evaluations use)."""
    if len(true) != len(pred):
        raise ValueError(f"{len(true)} true sentences but {len(pred)} predicted ones")
    for i, (t, p) in enumerate(zip(true, pred)):
        if len(t) != len(p):
            raise ValueError(f"sentence {i}: {len(t)} true tags but {len(p)} predicted ones")
    gold, got = entities_of(true), entities_of(pred)
    types = sorted({e[0] for s in gold + got for e in s})
    # per sentence x type: matched, predicted, true counts  (S, K)
    counts = np.zeros((3, len(gold), len(types)), dtype=np.int64)
    index = {k: j for j, k in enumerate(types)}
    for s, (g, p) in enumerate(zip(gold, got)):
        for which, ents in enumerate((g & p, p, g)):
            for e in ents:
                counts[which, s, index[e[0]]] += 1
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(gold), np.full(len(gold), 1 / len(gold)), size=samples) if gold and samples else None
    total = _scores(counts.sum(axis=2), weights)
    per_type = {k: _scores(counts[:, :, j], weights) for j, k in enumerate(types)}
    return {"entity_f1": total["f1"], "precision": total["precision"], "recall": total["recall"],
            "support": total["support"], "predicted": total["predicted"], "interval": total["interval"],
            "per_type": per_type}


def _scores(c: np.ndarray, weights: np.ndarray | None) -> dict:
    """Precision, recall, F1 from per-sentence counts ``c`` (3, S): matched, predicted, true; with their bootstrap
    intervals from ``weights`` (B, S), how often each sentence is drawn in each resample."""
    tp, n_pred, n_true = (int(x) for x in c.sum(axis=1))
    out = {"precision": _ratio(tp, n_pred), "recall": _ratio(tp, n_true),
           "f1": _ratio(2 * tp, n_pred + n_true), "support": n_true, "predicted": n_pred}
    if weights is None:
        out["interval"] = None
        return out
    btp, bpred, btrue = (weights @ c[i] for i in range(3))  # (B,) each
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = {"precision": np.where(bpred > 0, btp / np.maximum(bpred, 1), 0.0),
                 "recall": np.where(btrue > 0, btp / np.maximum(btrue, 1), 0.0),
                 "f1": np.where(bpred + btrue > 0, 2 * btp / np.maximum(bpred + btrue, 1), 0.0)}
    out["interval"] = {k: (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))) for k, v in draws.items()}
    return out


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0
