"""Evaluate a token classifier (a named-entity tagger) on a tagged file: entity scores with intervals, slices, the
sentences it gets wrong, and two taggers compared on the same sentences (issue 32).

    ev = evaluate_tagged(lm, "test.conll", words=("Paris",))   # a CoNLL, JSON-lines or tokens/tags CSV file
    ev.entity_f1, ev.precision, ev.recall, ev.per_type           # strict IOB2 entity scores, 95% intervals
    ev.slices                                                    # by entity type, sentence length, given words
    ev.errors()                                                  # the sentences with a wrong tag
    cmp = compare_taggers(lm_a, lm_b, "test.conll")              # B - A in entity F1, paired bootstrap

The file goes through the tagger's intake (``train.data.tagged.read_tagged``), so it is refused for the same reasons
with the same messages (an empty sentence, a token without a tag, a classifier's table: the message names the
text-classification task). Then:

- **the model** must be a token classifier (``lm.require_head``: a sequence classifier is refused with a message
  naming its head and where it is used).
- **tags** are matched to the model's (``id2label``). A file in IO (plain types) given to an IOB2 model has its tags
  converted to IOB2, each run of one type one entity; an IOB2 file given to an IO model has the model's predictions
  converted to IOB2 (so two entities of one type side by side, which an IO model cannot tell apart, count as its
  miss); a notice says which. A tag whose type the model lacks is refused, listing those tags with their lines and
  the model's tags.
- **predictions**: ``tagger_training.predict_tags`` on the model's own weights (``lm.model``), one tag per word read
  at its first piece, exactly as the tagger was trained and judged; a sentence longer than the model reads is
  refused with its line (``encode_sentences``: nothing is cut), every such sentence named at once.
  ``progress(done, total)`` after each batch of sentences and ``cancel`` (a ``threading.Event``) checked before
  each: ``CancelledError``.
- **numbers**: ``tagger_training.tagger_report``: entity precision, recall and F1 (seqeval's strict IOB2: an entity
  counts when its type, start and end all match), overall and per type, each with a 95% bootstrap interval over
  sentences (``entity_metrics.entity_scores``, seeded), per-word accuracy and the all-``O`` baseline with a verdict.
- **slices**: by entity type (the per-type scores), by sentence length in words (the quartiles of the file's
  sentence lengths, fewer bins when lengths tie: bin b holds lengths above edge b-1 up to edge b), and the sentences
  containing each word the user names (case-insensitive, whole tokens; a phrase of several words matches them in a
  row). Each has its sentences, true and predicted entities, precision, recall, F1 and the F1's 95% interval, the
  intervals by a bootstrap over the slice's own sentences; an empty slice has no scores.
- **errors**: the sentences with at least one wrong tag, in file order (``where``: their line or row), with their
  tokens, tags, predicted tags and the positions that differ.

``compare_taggers`` evaluates two taggers on the same sentences and gives B's entity F1 minus A's with a paired
bootstrap interval: the same resampled sentences score both models in each draw, so what the sentences share
cancels (a model compared with itself: exactly 0, interval (0, 0)); per type the same.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import CancelledError, DataError, InputError
from ..models.heads import TOKEN_CLASSIFICATION
from ..models.registry import LoadedModel
from ..train.data.messages import format_rows, quote_list
from ..train.data.tagged import TaggedFile, TaggedSentence, entity_types, read_tagged
from ..train.entity_metrics import BOOTSTRAP_SAMPLES, entities_of, entity_scores, io_to_iob2
from ..train.tagger_training import encode_sentences, predict_tags, tagger_report, tagger_tokenizer
from ..train.training import longest_input

__all__ = ["TaggerEvaluation", "TaggerSlice", "TaggerComparison", "evaluate_tagged", "compare_taggers",
           "scheme_of", "MAX_ERRORS_SHOWN"]

MAX_ERRORS_SHOWN = 200  # sentences with a wrong tag listed in the JSON (``errors(None)`` gives them all)
_DOING = ("evaluating a tagged file (CoNLL, JSON lines with tokens and tags, or a tokens/tags CSV) scores the "
          "entities a tagger finds")


def scheme_of(tags: Sequence[str]) -> str:
    """"IOB2" when any tag has a ``B-``/``I-`` prefix, else "IO" (plain types)."""
    return "IOB2" if any(t.startswith(("B-", "I-")) for t in tags) else "IO"


@dataclass(frozen=True)
class TaggerSlice:
    """A group of sentences and the tagger's entity scores on them: ``kind`` "type" (every sentence, only that
    type's entities counted), "length" or "word"; ``value`` the type, the length range ("3-5") or the word."""

    kind: str
    name: str
    value: str
    n_sentences: int  # type: sentences with an entity of the type in the file or the predictions
    support: int  # true entities counted
    predicted: int  # predicted entities counted
    precision: float | None  # None: an empty slice
    recall: float | None
    f1: float | None
    interval: tuple[float, float] | None  # the F1's 95% bootstrap interval over the slice's sentences

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "value": self.value, "n_sentences": self.n_sentences,
                "support": self.support, "predicted": self.predicted, "precision": self.precision,
                "recall": self.recall, "f1": self.f1,
                "interval": None if self.interval is None else list(self.interval)}


@dataclass(frozen=True, eq=False)
class TaggerEvaluation:
    """What ``evaluate_tagged`` found. ``sentences`` and ``predicted`` run in parallel, both in the scheme the tags
    were compared in (``scheme``): the file's tags, converted to IOB2 when the file was IO and the model IOB2."""

    model: str
    source: str  # the file's name
    format: str  # "conll", "jsonl" or "csv"
    scheme: str  # "IOB2" or "IO": what the tags were compared in
    unit: str  # what ``where`` counts: "line" or "row"
    labels: tuple[str, ...]  # the model's tags, in its order
    sentences: tuple[TaggedSentence, ...]
    predicted: tuple[tuple[str, ...], ...]
    report: dict = field(repr=False)  # tagger_report's: scores, intervals, per_type, token_accuracy, baseline, verdict
    slices: tuple[TaggerSlice, ...]
    notices: tuple[str, ...]

    @property
    def n_sentences(self) -> int:
        return len(self.sentences)

    @property
    def entity_f1(self) -> float:
        return self.report["entity_f1"]

    @property
    def precision(self) -> float:
        return self.report["precision"]

    @property
    def recall(self) -> float:
        return self.report["recall"]

    @property
    def per_type(self) -> dict:
        return self.report["per_type"]

    def errors(self, limit: int | None = MAX_ERRORS_SHOWN) -> list[dict]:
        """The sentences with at least one wrong tag, in file order: where (line or row), tokens, tags, predicted,
        wrong (the positions whose tags differ)."""
        out = []
        for s, p in zip(self.sentences, self.predicted):
            wrong = [i for i, (a, b) in enumerate(zip(s.tags, p)) if a != b]
            if wrong:
                out.append({"where": s.where, "tokens": list(s.tokens), "tags": list(s.tags), "predicted": list(p),
                            "wrong": wrong})
        return out if limit is None else out[:limit]

    def to_dict(self, errors: int | None = MAX_ERRORS_SHOWN) -> dict:
        """The JSON of a tagger's evaluation (``evaluate FILE --json``); ``errors``: how many of the wrong sentences
        to list (None: all)."""
        r = self.report
        wrong = self.errors(None)
        return {
            "model": self.model, "source": self.source, "format": self.format, "scheme": self.scheme,
            "unit": self.unit, "tags": list(self.labels), "n_sentences": self.n_sentences,
            "n_tokens": sum(len(s.tokens) for s in self.sentences),
            "entity_f1": r["entity_f1"], "precision": r["precision"], "recall": r["recall"],
            "support": r["support"], "predicted": r["predicted"], "interval": _lists(r["interval"]),
            "per_type": {t: {**v, "interval": _lists(v["interval"])} for t, v in r["per_type"].items()},
            "token_accuracy": r["token_accuracy"], "baseline": r["baseline"], "learned": r["learned"],
            "verdict": r["verdict"], "slices": [s.to_dict() for s in self.slices],
            "n_errors": len(wrong), "errors": wrong if errors is None else wrong[:errors],
            "notices": list(self.notices),
        }


def _lists(interval: dict | None) -> dict | None:
    return None if interval is None else {k: list(v) for k, v in interval.items()}


# --------------------------------------------------------------------------- one tagger on a file
def evaluate_tagged(lm: LoadedModel, source: str | os.PathLike | bytes | TaggedFile, name: str | None = None, *,
                    words: Sequence[str] = (), batch_size: int = 32, seed: int = 0,
                    max_upload_mb: float | None = None, max_sentences: int | None = None,
                    progress: Callable[[int, int], None] | None = None,
                    cancel: threading.Event | None = None) -> TaggerEvaluation:
    """Evaluate the tagger ``lm`` on every sentence of a tagged file (a path, its bytes with ``name``, or a read
    ``TaggedFile``): see the module's docstring. ``words``: also slice the sentences containing each; ``seed``: the
    bootstrap's; ``max_upload_mb``/``max_sentences``: the intake's limits (default: ``lm.settings``' upload limit
    and rows). Bad input raises DataError/InputError saying what to fix, with lines or rows."""
    lm.require_head(TOKEN_CLASSIFICATION, _DOING)
    _check_batch_size(batch_size)
    tf = _read(lm, source, name, max_upload_mb, max_sentences)
    return _evaluate(lm, tf, words=words, batch_size=batch_size, seed=seed, progress=progress, cancel=cancel)


def _check_batch_size(batch_size) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a positive whole number, got {batch_size!r}.")


def _read(lm: LoadedModel, source, name: str | None, max_upload_mb: float | None,
          max_sentences: int | None) -> TaggedFile:
    if isinstance(source, TaggedFile):
        return source
    return read_tagged(source, name,
                       max_upload_mb=lm.settings.max_upload_mb if max_upload_mb is None else max_upload_mb,
                       max_sentences=lm.settings.max_rows if max_sentences is None else max_sentences)


def _evaluate(lm: LoadedModel, tf: TaggedFile, *, words: Sequence[str], batch_size: int, seed: int,
              progress, cancel) -> TaggerEvaluation:
    """One tagger's evaluation of a read file."""
    labels = lm.labels
    true, predictions_to_iob2, notices = _matched(tf, labels, lm.name)
    sentences = [TaggedSentence(s.tokens, tuple(t), s.where) for s, t in zip(tf.sentences, true)]
    pred = _predict(lm, list(tf.sentences), batch_size, tf.unit, progress, cancel)
    if predictions_to_iob2:
        pred = [io_to_iob2(p) for p in pred]
    report = tagger_report(true, pred, seed=seed)
    slices = _slices(true, pred, [s.tokens for s in tf.sentences], report["per_type"], words, seed)
    scheme = "IOB2" if predictions_to_iob2 else scheme_of([t for s in true for t in s] + list(labels))
    return TaggerEvaluation(model=lm.name, source=tf.name, format=tf.format, scheme=scheme, unit=tf.unit,
                            labels=tuple(labels), sentences=tuple(sentences), predicted=tuple(map(tuple, pred)),
                            report=report, slices=tuple(slices), notices=tuple(list(tf.notices) + notices))


def _matched(tf: TaggedFile, labels: Sequence[str], model: str) -> tuple[list[list[str]], bool, list[str]]:
    """The file's tags as compared, whether the model's predictions go to IOB2, and the notices saying what was
    converted; DataError listing the file's tags the model lacks (with their lines) and the model's tags."""
    model_scheme = scheme_of(labels)
    true = [list(s.tags) for s in tf.sentences]
    model_types = set(entity_types(labels))
    same = tf.scheme == model_scheme

    def covered(tag: str) -> bool:
        if tag == "O":
            return "O" in labels
        return tag in labels if same else entity_types([tag])[0] in model_types

    missing = sorted({t for s in tf.sentences for t in s.tags if not covered(t)})  # as the file writes them
    if missing:
        bad = set(missing)
        lines = sorted({s.where + i if tf.format == "conll" else s.where
                        for s in tf.sentences for i, t in enumerate(s.tags) if t in bad})
        raise DataError(
            f"{tf.name}: the tag{'s' * (len(missing) != 1)} {quote_list(missing)} "
            f"({format_rows(lines, word=tf.unit)}) {'are' if len(missing) != 1 else 'is'} not among the tags of "
            f"{model}: {quote_list(labels, limit=24)}. A tagger finds only the types it was trained on: evaluate a "
            "model trained on these tags, or rename or remove them in the file.")
    if same:
        return true, False, []
    if tf.scheme == "IO":
        return [io_to_iob2(t) for t in true], False, [
            f"{tf.name} has IO tags (plain types) and {model} IOB2 tags (B-/I-): the file's tags were converted to "
            "IOB2, each run of one type one entity, to compare them."]
    return true, True, [
        f"{tf.name} has IOB2 tags (B-/I-) and {model} IO tags (plain types): its predictions were converted to IOB2, "
        "each run of one type one entity, so two entities of one type side by side in the file count as missed."]


def _word_tokenizer(lm: LoadedModel):
    """The model's tokenizer, able to take sentences as lists of words (a byte-level BPE one is loaded again from
    the model's folder with ``add_prefix_space``, as training loads it: ``tagger_tokenizer``)."""
    try:
        lm.tokenizer([["a", "b"]], is_split_into_words=True)
        return lm.tokenizer
    except (ValueError, TypeError, AssertionError):
        return tagger_tokenizer(lm.path)


def _predict(lm: LoadedModel, sentences: list[TaggedSentence], batch_size: int, unit: str, progress,
             cancel) -> list[list[str]]:
    """Each sentence's predicted tag per word (``predict_tags``), a batch at a time, the shortest sentences first;
    every sentence too long for the model refused before any is predicted."""
    tokenizer = _word_tokenizer(lm)
    total = len(sentences)
    encode_sentences(tokenizer, sentences, None, longest_input(tokenizer, lm.model), unit)  # refuses long ones
    order = sorted(range(total), key=lambda i: len(sentences[i].tokens))
    out: list[list[str]] = [[] for _ in sentences]
    for start in range(0, total, batch_size):
        if cancel is not None and cancel.is_set():
            raise CancelledError(f"Evaluation cancelled after {start:,} of {total:,} sentences; nothing was written.")
        chunk = order[start:start + batch_size]
        with lm.run_lock:
            tags = predict_tags(lm.model, tokenizer, [sentences[i] for i in chunk], batch_size, unit)
        for i, t in zip(chunk, tags):
            out[i] = t
        if progress is not None:
            progress(start + len(chunk), total)
    return out


# --------------------------------------------------------------------------- slices
def _slices(true: list[list[str]], pred: list[list[str]], tokens: list[tuple[str, ...]], per_type: dict,
            words: Sequence[str], seed: int) -> list[TaggerSlice]:
    """By entity type (every sentence, one type's entities), by length in words (quartile bins), by each word."""
    gold, got = entities_of(true), entities_of(pred)
    out = []
    for t, s in per_type.items():
        n = sum(any(e[0] == t for e in g | p) for g, p in zip(gold, got))
        out.append(TaggerSlice("type", f"type {t}", t, n, s["support"], s["predicted"], s["precision"], s["recall"],
                               s["f1"], None if s["interval"] is None else tuple(s["interval"]["f1"])))
    lengths = np.array([len(t) for t in tokens], dtype=np.int64)  # (S,) words per sentence
    if len(lengths):
        edges = np.unique(np.quantile(lengths, [0.25, 0.5, 0.75], method="lower").astype(np.int64))  # (<=3,)
        bucket = np.searchsorted(edges, lengths, side="left")  # (S,) bin b: edges[b-1] < n <= edges[b]
        for b in np.unique(bucket):
            idx = np.where(bucket == b)[0].tolist()
            lo, hi = int(lengths[idx].min()), int(lengths[idx].max())
            span = str(lo) if lo == hi else f"{lo}-{hi}"
            out.append(_scored("length", f"length {span} word{'s' * (hi != 1)}", span, idx, true, pred, seed))
    seen: set[str] = set()
    for word in words:
        phrase = str(word).split()
        key = " ".join(phrase).casefold()
        if not phrase or key in seen:
            continue
        seen.add(key)
        idx = [i for i, t in enumerate(tokens) if _contains(t, [w.casefold() for w in phrase])]
        out.append(_scored("word", f"contains {' '.join(phrase)!r}", " ".join(phrase), idx, true, pred, seed))
    return out


def _contains(tokens: Sequence[str], phrase: list[str]) -> bool:
    """Do ``tokens`` hold the (casefolded) ``phrase`` as consecutive whole tokens, ignoring case?"""
    folded = [t.casefold() for t in tokens]
    k = len(phrase)
    return any(folded[i:i + k] == phrase for i in range(len(folded) - k + 1))


def _scored(kind: str, name: str, value: str, idx: list[int], true, pred, seed: int) -> TaggerSlice:
    """The entity scores of the sentences ``idx``, with a bootstrap over those sentences; an empty one unscored."""
    if not idx:
        return TaggerSlice(kind, name, value, 0, 0, 0, None, None, None, None)
    s = entity_scores([true[i] for i in idx], [pred[i] for i in idx], seed=seed)
    return TaggerSlice(kind, name, value, len(idx), s["support"], s["predicted"], s["precision"], s["recall"],
                       s["entity_f1"], None if s["interval"] is None else tuple(s["interval"]["f1"]))


# --------------------------------------------------------------------------- two taggers on one file
@dataclass(frozen=True, eq=False)
class TaggerComparison:
    """Two taggers (A, B) on the same sentences: each one's evaluation, B's entity F1 minus A's with a paired
    bootstrap interval, the same per type, and how many sentences each gets wholly right."""

    a: TaggerEvaluation
    b: TaggerEvaluation
    difference: float  # entity F1 of B minus that of A
    interval: tuple[float, float]  # its 95% paired bootstrap interval over sentences
    per_type: dict  # type -> {"f1_a", "f1_b", "difference", "interval", "support"}
    sentences: dict  # {"both_right", "only_a_right", "only_b_right", "both_wrong", "disagree"}
    samples: int
    seed: int

    @property
    def reading(self) -> str:
        lo, hi = self.interval
        d = self.difference
        span = f"95% interval {lo:+.3f} to {hi:+.3f}, paired bootstrap over {self.a.n_sentences:,} sentences"
        if lo > 0 or hi < 0:
            better = self.b.model if d > 0 else self.a.model
            return f"{better} finds entities better: entity F1 B - A = {d:+.3f} ({span}; the interval excludes 0)."
        return (f"No clear difference: entity F1 B - A = {d:+.3f} ({span}; the interval includes 0). More "
                "sentences would narrow it.")

    def to_dict(self) -> dict:
        """The comparison's JSON (``evaluate FILE --compare-with M2 --json``: its "comparison")."""
        def scores(ev: TaggerEvaluation) -> dict:
            return {"model": ev.model, "entity_f1": ev.entity_f1, "precision": ev.precision, "recall": ev.recall,
                    "interval": _lists(ev.report["interval"]), "token_accuracy": ev.report["token_accuracy"],
                    "per_type": {t: {k: v[k] for k in ("precision", "recall", "f1", "support")}
                                 for t, v in ev.per_type.items()}}

        return {"models": [self.a.model, self.b.model], "n_sentences": self.a.n_sentences,
                "entity_f1": [self.a.entity_f1, self.b.entity_f1], "a": scores(self.a), "b": scores(self.b),
                "difference": self.difference, "interval": list(self.interval),
                "per_type": {t: {**v, "interval": list(v["interval"])} for t, v in self.per_type.items()},
                "sentences": self.sentences, "samples": self.samples, "seed": self.seed, "reading": self.reading}


def compare_taggers(lm_a: LoadedModel, lm_b: LoadedModel, source: str | os.PathLike | bytes | TaggedFile,
                    name: str | None = None, *, words: Sequence[str] = (), batch_size: int = 32, seed: int = 0,
                    samples: int = BOOTSTRAP_SAMPLES, max_upload_mb: float | None = None,
                    max_sentences: int | None = None, progress: Callable[[int, int], None] | None = None,
                    cancel: threading.Event | None = None) -> TaggerComparison:
    """Evaluate taggers A and B on the same sentences of one file (read once, with A's limits unless given) and
    compare them: see the module's docstring. ``progress`` runs over both passes (0..S for A, S..2S for B)."""
    for lm in (lm_a, lm_b):
        lm.require_head(TOKEN_CLASSIFICATION, _DOING)
    _check_batch_size(batch_size)
    tf = _read(lm_a, source, name, max_upload_mb, max_sentences)
    n = len(tf.sentences)
    run = dict(words=words, batch_size=batch_size, seed=seed, cancel=cancel)
    a = _evaluate(lm_a, tf, progress=None if progress is None else (lambda d, _t: progress(d, 2 * n)), **run)
    b = _evaluate(lm_b, tf, progress=None if progress is None else (lambda d, _t: progress(n + d, 2 * n)), **run)
    return _compared(a, b, seed, samples)


def _compared(a: TaggerEvaluation, b: TaggerEvaluation, seed: int, samples: int) -> TaggerComparison:
    """The paired bootstrap: each draw weighs the sentences once and scores both models on that draw."""
    gold = entities_of([s.tags for s in a.sentences])  # the same entities whatever scheme each model compared in
    got_a, got_b = entities_of(a.predicted), entities_of(b.predicted)
    types = sorted({e[0] for s in gold + got_a + got_b for e in s})
    ca, cb = _counts(gold, got_a, types), _counts(gold, got_b, types)  # (3, S, K) each
    n = len(gold)
    weights = np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=max(1, samples))  # (B, S)

    def diff(j: int | None) -> tuple[float, float, tuple[float, float]]:
        xa, xb = (c.sum(axis=2) if j is None else c[:, :, j] for c in (ca, cb))  # (3, S)
        draws = _f1(weights @ xb.T) - _f1(weights @ xa.T)  # (B,)
        f1_a, f1_b = _f1(xa.sum(axis=1)[None])[0], _f1(xb.sum(axis=1)[None])[0]
        return float(f1_a), float(f1_b), (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5)))

    f1_a, f1_b, interval = diff(None)
    per_type = {}
    for j, t in enumerate(types):
        fa, fb, iv = diff(j)
        per_type[t] = {"f1_a": fa, "f1_b": fb, "difference": fb - fa, "interval": iv, "support": int(ca[2, :, j].sum())}
    right_a = np.array([tuple(s.tags) == tuple(p) for s, p in zip(a.sentences, a.predicted)], dtype=bool)  # (S,)
    right_b = np.array([tuple(s.tags) == tuple(p) for s, p in zip(b.sentences, b.predicted)], dtype=bool)
    same = sum(ga == gb for ga, gb in zip(got_a, got_b))
    counts = {"both_right": int((right_a & right_b).sum()), "only_a_right": int((right_a & ~right_b).sum()),
              "only_b_right": int((~right_a & right_b).sum()), "both_wrong": int((~right_a & ~right_b).sum()),
              "disagree": n - same}
    return TaggerComparison(a=a, b=b, difference=f1_b - f1_a, interval=interval, per_type=per_type, sentences=counts,
                            samples=max(1, samples), seed=seed)


def _counts(gold: list[set], got: list[set], types: list[str]) -> np.ndarray:
    """Per sentence and type: matched, predicted and true entities, (3, S, K)."""
    index = {t: j for j, t in enumerate(types)}
    out = np.zeros((3, len(gold), len(types)), dtype=np.int64)
    for s, (g, p) in enumerate(zip(gold, got)):
        for which, ents in enumerate((g & p, p, g)):
            for e in ents:
                out[which, s, index[e[0]]] += 1
    return out


def _f1(c: np.ndarray) -> np.ndarray:
    """Entity F1 of rows of (matched, predicted, true) totals, (B, 3) -> (B,); 0 with nothing to divide."""
    tp, n_pred, n_true = c[:, 0], c[:, 1], c[:, 2]
    return np.where(n_pred + n_true > 0, 2 * tp / np.maximum(n_pred + n_true, 1), 0.0)

