"""Evaluate a single-label classifier on a labelled file: where it fails and how honest its confidence is.

    ev = evaluate_file(lm, "reviews.csv", words=("not", "but"))   # columns guessed, or named
    ev.accuracy, ev.macro_f1, ev.per_class, ev.confusion          # the metrics
    ev.slices                                                     # worst first, each with a 95% interval
    ev.calibration                                                # ECE/NLL/Brier, temperature before/after
    ev = evaluate_file(lm, "reviews.csv", layers=True, compare_with=base)   # + probes per layer, A vs B

Its run folder (metrics.json, predictions.csv...) is written and read back by ``evaluation_files``.

The file goes through the fine-tune intake (``bertviz_app.train.data``: ``read_table``, ``guess_columns``,
``validate``), so it is refused for the same reasons with the same messages (an empty file, a zip
renamed .csv, a text column of numbers...). Then:

- **labels** are mapped to the model's classes (``lm.labels``) by name, by name ignoring case, or,
  when every label is a whole number from 0 to C-1, as class ids. Labels that match none of them are
  refused, each with its rows.
- **rows**: a row with an empty text or no label is skipped (named in ``notices``); a text over
  ``settings.max_chars`` characters is cut there (the model reads only its first ``lm.max_length``
  tokens anyway). Every other row is evaluated, repeated ones too.
- **predictions**: ``inference.predict_with_logits`` in chunks of ``CHUNK_ROWS`` rows (memory bounded
  by the chunk), ``progress(done, total)`` and ``cancel`` (a ``threading.Event``) checked after every
  batch. The model's raw softmax is evaluated, not a saved temperature's.
  With ``engine=service.ray_engine.RayEngine(...)`` (``--engine ray``) the chunks go to a pool of Ray
  actors (``predict_logits`` on a model each loads once); everything below is computed here as without it.
- **metrics**: accuracy, macro-F1 over the classes that occur in the labels or the predictions
  (scikit-learn's default), per-class precision/recall/F1/support over every class of the model, the
  confusion matrix (true class x predicted class, the model's order).
- **slices**: by true label, by predicted label, by token count (quartiles of the evaluated rows'
  token counts, special tokens included), rows containing each given word (case-insensitive, whole
  word, in the text or the second text) and every other column of the file with 2 to
  ``slices.MAX_SLICE_VALUES`` distinct values. Each has its size, accuracy and 95% Wilson interval; they are
  sorted worst first (lowest accuracy; larger first among equals); an empty one comes last.
- **calibration**: ``calibration_metrics`` (15 bins) and temperature scaling: the rows are split at
  random (``seed``); T is fitted on ``hold_out`` of them and the metrics before/after are measured on
  the others, never on the rows T was fitted on. ``helps`` says whether T is worth keeping: on the
  measured rows the NLL is lower and the ECE not higher (``calibration.judge_temperature``); ``judgement``
  says why, with the numbers (a temperature that does not help is not saved, ``save_evaluated_temperature``).
  Under ``MIN_CALIBRATION_ROWS`` rows, or with one class, the metrics are measured on every row and no
  temperature is fitted (``helps`` False); ``note`` and ``judgement`` say why.

- **layers** (``layers=True``): ``geometry.layer_vectors`` replaces the predictions' pass: its one
  forward gives the logits evaluated and every depth's [CLS] and mean vectors (``geometry``), then
  ``geometry.probe_layers`` on the true classes (``probes``; None, with a notice, when a probe is
  impossible: one class, or a class with a single row; past ``geometry.MAX_PROBE_ROWS`` rows fitted on
  a stratified sample of that many, with a notice).
- **a second model** (``compare_with``): the same rows evaluated by it (``other``; its classes must
  be the same names, in any order) and ``model_comparison.compare_evaluations`` (``comparison``):
  counts, McNemar's exact test, the disagreeing rows, B's accuracy on each of A's slices.

A file whose rows all have one class is evaluated (accuracy, per-class, slices, the rows it gets
wrong all mean something), but macro-F1 is None and no temperature is fitted: both compare classes,
and there is only one; ``notices`` says so.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import CancelledError, DataError, InputError
from ..models.calibration import (
    MIN_SPLIT_ROWS,
    N_BINS,
    calibration_metrics,
    fit_temperature,
    judge_temperature,
    reliability_bins,
    softmax_t,
    split_rows,
)
from ..models.inference import predict_with_logits
from ..models.registry import LoadedModel
from ..train.data import ROW_NOTE, Table, format_rows, guess_columns, no_text_message, read_table, validate
from ..train.data.columns import describe_columns
from ..train.data.messages import quoted
from ..train.data.rows import extract_rows
from .geometry import LayerVectors, layer_vectors, probe_layers
from .model_comparison import Comparison, check_same_classes, compare_evaluations
from .slices import Slice, classifier_slices, wilson_interval

__all__ = ["Evaluation", "evaluate_file", "predict_logits", "map_labels", "CHUNK_ROWS", "MIN_CALIBRATION_ROWS",
           "MISCLASSIFIED_SHOWN"]

CHUNK_ROWS = 1024  # rows tokenized and predicted together: memory is bounded by a chunk, not the file
MIN_CALIBRATION_ROWS = MIN_SPLIT_ROWS  # fewer evaluated rows: calibration metrics on every row, no temperature
MISCLASSIFIED_SHOWN = 100  # misclassified rows in the JSON (predictions.csv has every row)
# Validation errors that stop an evaluation; the others (one class, a rare class) are about training.
_BLOCKING = {"text_numbers", "pair_numbers", "label_all_missing", "text_all_missing", "no_rows"}
# Validation warnings that hold for an evaluation as they are worded (skipped rows, cut texts).
_PASSED_ON = {"empty_text", "missing_label", "long_text"}
_FIX_TEXT = "name the column that holds them as the text column (--text-column; \"text_column\" in /v1/evaluate)"
_FIX_LABEL = "--label-column; \"label_column\" in /v1/evaluate"


@dataclass(frozen=True, eq=False)
class Evaluation:
    """What ``evaluate_file`` found. The per-row fields run in parallel over the evaluated rows
    (``source_rows[i]``, ``texts[i]``, ``true[i]``, ``logits[i]``...)."""

    model: str
    source: str  # the file's name
    columns: tuple[str, str, str | None]  # text, label, second text (None)
    labels: tuple[str, ...]  # the model's classes, in its order
    label_mapping: str  # "names", "names (case ignored)" or "ids"
    source_rows: tuple[int, ...]  # spreadsheet rows (header = row 1)
    texts: tuple[str, ...]  # as given in the file
    pairs: tuple[str, ...] | None
    true: np.ndarray  # (N,) class index
    predicted: np.ndarray  # (N,)
    logits: np.ndarray  # (N, C) raw, float32
    probs: np.ndarray  # (N, C) softmax of the raw logits
    n_tokens: np.ndarray  # (N,) tokens the model read (special tokens included)
    truncated: np.ndarray  # (N,) bool: longer than the model reads
    accuracy: float
    accuracy_interval: tuple[float, float]
    macro_f1: float | None  # None with one class
    per_class: dict  # class -> {precision, recall, f1, support}
    confusion: list  # [true][predicted] counts, the model's class order
    slices: tuple[Slice, ...]  # worst first
    calibration: dict
    reliability: dict  # {"before": bins, "after": bins or None}: calibration.reliability_bins
    calibration_part: tuple[str, ...]  # per row: "fit", "measure" (the split) or "all" (no temperature)
    skipped: tuple[tuple[int, str], ...]  # (row, why) of the rows not evaluated
    notices: tuple[str, ...]
    table: Table = field(repr=False)
    # (N,) bool per slice, parallel to ``slices``: the rows each one is made of
    slice_masks: tuple[np.ndarray, ...] = field(default=(), repr=False)
    geometry: LayerVectors | None = field(default=None, repr=False)  # with layers=True: the same forward's vectors
    probes: list | None = None  # with layers=True: geometry.probe_layers on the true classes (None: impossible)
    other: Evaluation | None = field(default=None, repr=False)  # with compare_with: the second model, same rows
    comparison: Comparison | None = None  # with compare_with: this model (A) against the other (B)

    @property
    def rows(self) -> int:
        return len(self.source_rows)

    def misclassified(self, limit: int | None = None) -> list[dict]:
        """The rows the model gets wrong, most confident first: row, text (as given), pair, true,
        predicted, confidence (the predicted class's probability)."""
        wrong = np.where(self.predicted != self.true)[0]
        conf = self.probs[np.arange(self.rows), self.predicted]  # (N,)
        wrong = wrong[np.argsort(-conf[wrong], kind="stable")][:limit]
        return [{"row": self.source_rows[i], "text": self.texts[i],
                 "pair": None if self.pairs is None else self.pairs[i], "true": self.labels[self.true[i]],
                 "predicted": self.labels[self.predicted[i]], "confidence": float(conf[i])} for i in wrong]

    def worst_slices(self, k: int = 5) -> list[Slice]:
        return [s for s in self.slices if s.size][:k]

    def to_dict(self, misclassified: int | None = MISCLASSIFIED_SHOWN) -> dict:
        """The JSON of an evaluation (``--json``, ``/v1/evaluate``, metrics.json); ``misclassified``:
        how many of the wrong rows to list (None: all)."""
        text, label, pair = self.columns
        wrong = int((self.predicted != self.true).sum())
        return {
            "model": self.model, "source": self.source,
            "columns": {"text": text, "label": label, "pair": pair},
            "labels": list(self.labels), "label_mapping": self.label_mapping,
            "rows": self.rows, "skipped_rows": len(self.skipped),
            "accuracy": self.accuracy, "accuracy_interval": list(self.accuracy_interval),
            "macro_f1": self.macro_f1, "per_class": self.per_class,
            "confusion": {"labels": list(self.labels), "matrix": self.confusion,
                          "note": "matrix[i][j]: rows of true class i predicted as class j"},
            "slices": [s.to_dict() for s in self.slices],
            "calibration": self.calibration,
            "misclassified_rows": wrong,
            "misclassified": self.misclassified(misclassified),
            "notices": list(self.notices),
            "skipped": [{"row": r, "why": why} for r, why in self.skipped[:MISCLASSIFIED_SHOWN]],
            **({"layers": self.probes} if self.geometry is not None else {}),
            **({"comparison": self.comparison.to_dict(misclassified)} if self.comparison is not None else {}),
        }


# --------------------------------------------------------------------------- labels
def map_labels(labels: Sequence[str], rows: Sequence[int], model_labels: Sequence[str],
               source: str = "the file") -> tuple[np.ndarray, str]:
    """The file's label of each row (as text, ``labels[i]`` of spreadsheet row ``rows[i]``) -> the
    model's class index, and how they were matched: "names", "names (case ignored)" or "ids" (every
    label a whole number from 0 to C-1). DataError, listing each unknown label with its rows, when
    they do not all match."""
    names = list(model_labels)
    present = list(dict.fromkeys(labels))
    index = {n: i for i, n in enumerate(names)}
    if all(p in index for p in present):
        return np.array([index[x] for x in labels], dtype=np.int64), "names"
    folded: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        folded.setdefault(n.casefold(), []).append(i)
    if all(len(folded.get(p.casefold(), ())) == 1 for p in present):
        return np.array([folded[x.casefold()][0] for x in labels], dtype=np.int64), "names (case ignored)"
    whole = all(re.fullmatch(r"[+-]?\d+", p) for p in present)
    rows_of: dict[str, list[int]] = {}
    for x, r in zip(labels, rows):
        rows_of.setdefault(x, []).append(int(r))
    classes = f"{len(names)} class{'es' if len(names) != 1 else ''} ({', '.join(quoted(n, 40) for n in names[:12])}" \
              + (f" and {len(names) - 12} more" if len(names) > 12 else "") + ")"
    if whole:
        values = sorted(int(p) for p in present)
        if all(0 <= v < len(names) for v in values):
            return np.array([int(x) for x in labels], dtype=np.int64), "ids"
        bad = [p for p in present if not 0 <= int(p) < len(names)]
        listed = "; ".join(f"{quoted(p)} ({format_rows(rows_of[p])})" for p in sorted(bad, key=int)[:8])
        raise DataError(
            f"The labels of {source} are numbers from {values[0]} to {values[-1]} ({len(present)} distinct), but the "
            f"model has {classes}, whose ids are 0 to {len(names) - 1}. Out of range: {listed} ({ROW_NOTE}). "
            "Use the model's class names or ids, or evaluate a model trained on these classes.")
    unknown = [p for p in present if p not in index and len(folded.get(p.casefold(), ())) != 1]
    listed = "; ".join(f"{quoted(p)} ({format_rows(rows_of[p])})" for p in unknown[:8])
    more = f" and {len(unknown) - 8} more" if len(unknown) > 8 else ""
    count = (f"The file has {len(present)} distinct labels, the model {len(names)} classes. "
             if len(present) > len(names) else "")
    raise DataError(
        f"{count}{len(unknown)} label{'s' if len(unknown) != 1 else ''} of {source} "
        f"{'are' if len(unknown) != 1 else 'is'} not among the model's {classes}: {listed}{more} ({ROW_NOTE}). "
        "Rename them to the model's class names (or ids 0 to "
        f"{len(names) - 1}), or evaluate a model trained on these classes.")


# --------------------------------------------------------------------------- the evaluation
def evaluate_file(
    lm: LoadedModel,
    path_or_table: str | os.PathLike | bytes | Table,
    text_column: str | None = None,
    label_column: str | None = None,
    pair_column: str | None = None,
    *,
    batch_size: int = 32,
    words: Sequence[str] = (),
    hold_out: float = 0.5,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    name: str | None = None,
    layers: bool = False,
    compare_with: LoadedModel | None = None,
    vectors_folder: str | os.PathLike | None = None,
    engine=None,
) -> Evaluation:
    """Evaluate ``lm`` on every labelled row of a file (a path, its bytes with ``name``, or a read
    ``Table``): metrics, slices, calibration (see the module's docstring). Columns not given are
    guessed as the fine-tune tab guesses them. Bad input raises DataError/InputError saying what to
    fix, with row numbers where there are rows; ``cancel`` set: CancelledError between batches.

    ``layers``: one forward with the hidden states (``geometry.layer_vectors``, into
    ``vectors_folder`` when given) gives the logits and every depth's [CLS] and mean vectors
    (``geometry``), and a linear probe per depth on the true classes (``probes``). ``compare_with``:
    a second model with the same class names, evaluated on the same rows (``other``), and the two
    compared (``comparison``: ``model_comparison.compare_evaluations``). ``engine``: None, the predictions
    in this process; a ``service.ray_engine.RayEngine``, on its actors (each loads the model from its
    folder), ``engine.chunk_rows`` rows at a time; the metrics, slices and calibration are computed here
    either way (not with ``layers``: the vectors are computed in this process)."""
    for model in (lm, compare_with) if compare_with is not None else (lm,):
        if model.multi_label:
            raise InputError(f"{model.name} is a multi-label model; evaluate supports single-label classifiers (one "
                             "class per row, softmax outputs) only.")
    if compare_with is not None:
        check_same_classes(lm.name, lm.labels, compare_with.name, compare_with.labels)
    if not 0 < float(hold_out) < 1:
        raise InputError(f"hold_out (the share of rows the temperature is fitted on) must be between 0 and 1, "
                         f"got {hold_out!r}.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a positive whole number, got {batch_size!r}.")
    if layers and engine is not None:
        raise InputError("The probes per layer (layers, --layers) run in this process: leave out the Ray engine "
                         "(--engine ray) or the layers.")
    given_rows, true, notices = _read_rows(lm, path_or_table, name, text_column, label_column, pair_column)
    given, pairs = list(given_rows.texts), None if given_rows.pairs is None else list(given_rows.pairs)
    n = len(given)
    # with a second model the progress runs over both passes: 0..N for the first, N..2N for the second
    first = progress if compare_with is None or progress is None else (lambda done, _t: progress(done, 2 * n))
    run = dict(batch_size=batch_size, words=words, hold_out=hold_out, seed=seed, progress=first, cancel=cancel,
               engine=engine)
    geometry = probes = None
    if layers:
        geometry = _vectors(lm, given, pairs, batch_size, first, cancel, vectors_folder)
        probes, why = _probes(geometry, true)
        if why:
            notices.append(why)
        elif probes and probes[0]["rows"] < n:
            notices.append(f"The probes are fitted on a stratified random sample of {probes[0]['rows']:,} of the "
                           f"{n:,} rows (the fits grow faster than the rows; that many pin an accuracy to about "
                           "+-0.6 points).")
    ev = _evaluate_rows(lm, given_rows, true, notices, geometry=geometry, probes=probes, **run)
    if compare_with is None:
        return ev
    by_name = {c: i for i, c in enumerate(compare_with.labels)}
    true_b = np.array([by_name[lm.labels[i]] for i in true], dtype=np.int64)  # (N,) in B's class order
    if progress is not None:
        run["progress"] = lambda done, _t: progress(n + done, 2 * n)
    other = _evaluate_rows(compare_with, given_rows, true_b, [], **run)
    return dataclasses.replace(ev, other=other, comparison=compare_evaluations(ev, other))


def _read_rows(lm: LoadedModel, path_or_table, name: str | None, text_column: str | None,
               label_column: str | None, pair_column: str | None) -> tuple[_Rows, np.ndarray, list[str]]:
    """The file read through the intake: its evaluated rows, their true classes (indices into
    ``lm.labels``) and the notices so far (guessed columns, skipped rows, how labels matched...)."""
    settings = lm.settings
    table = path_or_table if isinstance(path_or_table, Table) else read_table(
        path_or_table, name, max_upload_mb=settings.max_upload_mb, max_rows=settings.max_rows)
    notices: list[str] = list(table.notices)
    text, label, pair = _columns(table, text_column, label_column, pair_column, notices)
    report = validate(table, text, label, pair, settings=settings)
    errors = [p for p in report.errors if p.code in _BLOCKING]
    if errors:
        raise DataError(" ".join(p.message for p in errors))
    notices += [p.message for p in report.warnings if p.code in _PASSED_ON]
    x = extract_rows(table, text, label, pair, False, "|")
    # a row without its second text is skipped, as one without its text: the model reads pairs
    no_pair = set(x.empty_pair)
    use = [i for i in range(len(x.rows))
           if x.texts[i] is not None and x.labels[i] is not None and x.rows[i] not in no_pair]
    skipped = sorted([(r, "empty text") for r in x.empty_text] + [(r, "no label") for r in x.missing_label]
                     + [(r, "empty second text") for r in x.empty_pair])
    if x.empty_pair:
        n = len(x.empty_pair)
        notices.append(f"{n:,} row{'s' if n > 1 else ''} {'have' if n > 1 else 'has'} an empty second text in "
                       f"{quoted(pair)} and {'are' if n > 1 else 'is'} not evaluated: {format_rows(x.empty_pair)} "
                       f"({ROW_NOTE}).")
    rows = [x.rows[i] for i in use]
    given = [x.texts[i] for i in use]
    pairs = None if x.pairs is None else [x.pairs[i] or "" for i in use]
    true, mapping = map_labels([x.labels[i][0] for i in use], rows, lm.labels, quoted(table.name))
    if mapping == "ids":
        notices.append("The labels are class ids: " + ", ".join(f"{i} = {n}" for i, n in enumerate(lm.labels[:12]))
                       + ("..." if len(lm.labels) > 12 else "") + ".")
    elif mapping != "names":
        notices.append(f"Labels matched to the model's classes ({', '.join(lm.labels[:12])}) ignoring case.")
    one_class = len(set(true.tolist())) == 1
    if one_class:
        notices.append(f"Every evaluated row has the true label {quoted(lm.labels[true[0]])}: accuracy, the slices "
                       "and the misclassified rows hold, but macro-F1 (an average over classes) is not given and no "
                       "temperature is fitted; evaluate on a file with rows of at least two classes for those.")
    read = _Rows(table=table, columns=(text, label, pair), label_mapping=mapping, source_rows=tuple(rows),
                 texts=tuple(given), pairs=None if pairs is None else tuple(pairs), skipped=tuple(skipped))
    return read, true, notices


@dataclass(frozen=True)
class _Rows:
    """The rows an evaluation reads, the same for every model evaluated on them."""

    table: Table
    columns: tuple[str, str, str | None]
    label_mapping: str
    source_rows: tuple[int, ...]
    texts: tuple[str, ...]
    pairs: tuple[str, ...] | None
    skipped: tuple[tuple[int, str], ...]


def _evaluate_rows(lm: LoadedModel, x: _Rows, true: np.ndarray, notices: list[str], *, batch_size: int,
                   words: Sequence[str], hold_out: float, seed: int, progress, cancel,
                   geometry: LayerVectors | None = None, probes: list | None = None, engine=None) -> Evaluation:
    """One model's evaluation of the rows ``x`` with true classes ``true`` (indices into ``lm.labels``);
    with ``geometry``, its logits are the ones evaluated (no second forward)."""
    texts, pairs = list(x.texts), None if x.pairs is None else list(x.pairs)
    if geometry is not None:
        logits, n_tokens, truncated = geometry.logits, geometry.n_tokens.astype(np.int64), geometry.truncated
    else:
        logits, n_tokens, truncated = _predict_all(lm, texts, pairs, batch_size, progress, cancel, engine)
    probs = softmax_t(logits, 1.0)  # (N, C) float64, the model's own softmax
    pred = probs.argmax(axis=1)  # (N,)
    one_class = len(set(true.tolist())) == 1
    metrics = _metrics(true, pred, lm.labels, one_class)
    text, label, pair = x.columns
    found = classifier_slices(x.table, list(x.source_rows), texts, pairs, true, pred, n_tokens, truncated,
                              lm.labels, words, {text, label, pair} - {None}, lm.max_length)
    calib, reliability, part = _calibration(logits, true, hold_out, seed, one_class, lm)
    return Evaluation(
        model=lm.name, source=x.table.name, columns=x.columns, labels=tuple(lm.labels), label_mapping=x.label_mapping,
        source_rows=x.source_rows, texts=x.texts, pairs=x.pairs, true=true,
        predicted=pred, logits=logits, probs=probs, n_tokens=n_tokens, truncated=truncated,
        accuracy=metrics["accuracy"], accuracy_interval=wilson_interval(int((pred == true).sum()), len(true)),
        macro_f1=metrics["macro_f1"], per_class=metrics["per_class"], confusion=metrics["confusion"],
        slices=tuple(s for s, _ in found), slice_masks=tuple(m for _, m in found), calibration=calib,
        reliability=reliability, calibration_part=part, skipped=x.skipped, notices=tuple(notices), table=x.table,
        geometry=geometry, probes=probes)


def _columns(table: Table, text: str | None, label: str | None, pair: str | None,
             notices: list[str]) -> tuple[str, str, str | None]:
    guess = guess_columns(table)
    text_given, label_given = bool(text), bool(label)
    text, label, pair = text or guess.text, label or guess.label, pair or None
    if text is None:
        raise DataError(no_text_message(table, _FIX_TEXT))
    if label is None or label == text:
        raise DataError(f"No label column found in {quoted(table.name)} (columns: {describe_columns(table)}). "
                        "An evaluation compares the model's prediction with each row's true label: add a column of "
                        f"labels, or name the column that holds them ({_FIX_LABEL}).")
    for what, col in (("text", text), ("label", label), ("second text", pair)):
        if col is not None and col not in table.columns:
            raise DataError(f"There is no column {quoted(col)} in {quoted(table.name)}; choose the {what} column "
                            f"from: {describe_columns(table)}.")
    if not (text_given and label_given):
        notices.append(f"Columns guessed: text {quoted(text)}, label {quoted(label)}.")
    return text, label, pair


def predict_logits(lm: LoadedModel, chunk: tuple[list[str], list[str] | None],
                   batch_size: int = 32) -> tuple[np.ndarray, list[int], list[bool]]:
    """One chunk of ``(texts, pairs or None)``, already cut at ``max_chars``: raw logits (n, C), token
    counts and truncation flags (what a Ray actor computes for ``evaluate_file``)."""
    texts, pairs = chunk
    preds, z = predict_with_logits(lm, list(texts), None if pairs is None else list(pairs), batch_size,
                                   calibrated=False)
    return z, [p.n_tokens for p in preds], [p.truncated for p in preds]


def _predict_all(lm: LoadedModel, texts: list[str], pairs: list[str] | None, batch_size: int,
                 progress, cancel, engine=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw logits (N, C), token counts (N,) and truncation flags (N,) of every text, CHUNK_ROWS at a
    time, texts cut at ``max_chars`` (the model reads far fewer characters than that); with an
    ``engine``, its ``chunk_rows`` at a time on its actors."""
    limit = lm.settings.max_chars
    total = len(texts)
    chunk = max(1, min(CHUNK_ROWS, lm.settings.max_batch_texts))
    logits = np.zeros((total, len(lm.labels)), dtype=np.float32)  # (N, C)
    n_tokens = np.zeros(total, dtype=np.int64)
    truncated = np.zeros(total, dtype=bool)

    def stop_if_cancelled(done: int) -> None:
        if cancel is not None and cancel.is_set():
            raise CancelledError(f"Evaluation cancelled after {done:,} of {total:,} rows; nothing was written.")

    if engine is not None:
        step = chunk if engine.chunk_rows is None else max(1, min(engine.chunk_rows, lm.settings.max_batch_texts))
        starts = list(range(0, total, step))
        parts = [([t[:limit] for t in texts[s:s + step]], None if pairs is None else
                  [p[:limit] for p in pairs[s:s + step]]) for s in starts]
        done = [0]

        def arrived(i: int, result) -> None:
            z, n, cut = result
            s = starts[i]
            logits[s:s + len(z)], n_tokens[s:s + len(z)], truncated[s:s + len(z)] = z, n, cut
            done[0] += len(z)
            if progress is not None:
                progress(done[0], total)

        stop_if_cancelled(0)
        engine.map_chunks(lm, predict_logits, parts, dict(batch_size=batch_size), on_result=arrived, cancel=cancel,
                          cancel_message=lambda _n: f"Evaluation cancelled after {done[0]:,} of {total:,} rows; "
                                                    "nothing was written.")
        return logits, n_tokens, truncated

    for start in range(0, total, chunk):
        stop_if_cancelled(start)
        part = [t[:limit] for t in texts[start:start + chunk]]
        part_pairs = None if pairs is None else [p[:limit] for p in pairs[start:start + chunk]]

        def on_batch(done: int, _n: int, start=start) -> None:
            if progress is not None:
                progress(start + done, total)
            stop_if_cancelled(start + done)

        preds, z = predict_with_logits(lm, part, part_pairs, batch_size, calibrated=False, on_batch=on_batch)
        logits[start:start + len(part)] = z
        n_tokens[start:start + len(part)] = [p.n_tokens for p in preds]
        truncated[start:start + len(part)] = [p.truncated for p in preds]
    return logits, n_tokens, truncated


def _vectors(lm: LoadedModel, texts: list[str], pairs: list[str] | None, batch_size: int, progress, cancel,
             folder: str | os.PathLike | None) -> LayerVectors:
    """``geometry.layer_vectors`` of every text (cut at ``max_chars``, as ``_predict_all`` cuts them):
    the logits and every depth's vectors from one forward; cancelled with ``_predict_all``'s message."""
    limit = lm.settings.max_chars
    total = len(texts)

    def stop_if_cancelled(done: int) -> None:
        if cancel is not None and cancel.is_set():
            raise CancelledError(f"Evaluation cancelled after {done:,} of {total:,} rows; nothing was written.")

    def on_batch(done: int, _n: int) -> None:
        if progress is not None:
            progress(done, total)
        stop_if_cancelled(done)

    stop_if_cancelled(0)
    return layer_vectors(lm, [t[:limit] for t in texts], None if pairs is None else [p[:limit] for p in pairs],
                         batch_size=batch_size, progress=on_batch, folder=folder)


def _probes(vectors: LayerVectors, true: np.ndarray) -> tuple[list[dict] | None, str | None]:
    """``probe_layers`` on the true classes, or None and the one sentence saying why it is impossible."""
    counts = np.bincount(true, minlength=len(vectors.labels))
    present = counts[counts > 0]
    if len(present) < 2:
        return None, ("No [CLS] probe per layer: every evaluated row has one true class, and a probe separates "
                      "classes; evaluate on rows of at least two classes for it.")
    if present.min() < 2:
        rare = [vectors.labels[i] for i in np.where(counts == 1)[0]]
        return None, (f"No [CLS] probe per layer: {', '.join(map(quoted, rare))} "
                      f"{'have' if len(rare) > 1 else 'has'} a single row, and a cross-validated probe needs at "
                      "least 2 rows of every class.")
    return probe_layers(vectors, true), None


def _metrics(true: np.ndarray, pred: np.ndarray, labels: Sequence[str], one_class: bool) -> dict:
    from sklearn.metrics import confusion_matrix, f1_score, precision_recall_fscore_support

    idx = list(range(len(labels)))
    p, r, f, s = precision_recall_fscore_support(true, pred, labels=idx, zero_division=0)
    return {
        "accuracy": float((true == pred).mean()),
        # over the classes in the labels or the predictions (a class absent from both is not a 0)
        "macro_f1": None if one_class else float(f1_score(true, pred, average="macro", zero_division=0)),
        "per_class": {labels[i]: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                                  "support": int(s[i])} for i in idx},
        "confusion": confusion_matrix(true, pred, labels=idx).tolist(),
    }


def _calibration(logits: np.ndarray, true: np.ndarray, hold_out: float, seed: int, one_class: bool,
                 lm: LoadedModel) -> tuple[dict, dict, tuple[str, ...]]:
    n = len(true)
    base = {"bins": N_BINS, "hold_out": float(hold_out), "seed": int(seed),
            "saved_temperature": None if getattr(lm, "temperature", 1.0) in (None, 1.0) else float(lm.temperature)}
    n_fit = int(round(hold_out * n))
    why = None
    if one_class:
        why = "one class in the file: a temperature fitted on it would only learn to be surer of that class"
    elif n < MIN_CALIBRATION_ROWS:
        why = (f"{n} rows: fitting a temperature needs at least {MIN_CALIBRATION_ROWS}, half to fit it and half to "
               "measure it")
    elif n_fit < 1 or n_fit >= n:
        why = f"hold_out {hold_out} leaves no rows to fit on or to measure on"
    if why is not None:
        before = calibration_metrics(softmax_t(logits, 1.0), true, N_BINS)
        note = f"No temperature fitted ({why}); the metrics are measured on every evaluated row."
        return ({**before, "temperature": None, "ece_after": None, "nll_after": None, "brier_after": None,
                 "fitted_on_rows": 0, "measured_on_rows": n, "note": note, "helps": False, "judgement": note, **base},
                {"before": reliability_bins(softmax_t(logits, 1.0), true, N_BINS), "after": None},
                ("all",) * n)
    fit, measure = split_rows(n, hold_out, seed)
    t = fit_temperature(logits[fit], true[fit])
    raw, scaled = softmax_t(logits[measure], 1.0), softmax_t(logits[measure], t)
    before, after = calibration_metrics(raw, true[measure], N_BINS), calibration_metrics(scaled, true[measure], N_BINS)
    helps, judgement = judge_temperature(t, before, after, len(measure))
    part = np.array(["measure"] * n, dtype=object)
    part[fit] = "fit"
    calib = {**before, "temperature": t, "ece_after": after["ece"], "nll_after": after["nll"],
             "brier_after": after["brier"], "fitted_on_rows": int(len(fit)), "measured_on_rows": int(len(measure)),
             "note": f"Temperature fitted on {len(fit):,} rows drawn at random (seed {seed}); ECE, NLL and Brier "
                     f"before and after are measured on the other {len(measure):,} rows.",
             "helps": helps, "judgement": judgement, **base}
    return (calib, {"before": reliability_bins(raw, true[measure], N_BINS),
                    "after": reliability_bins(scaled, true[measure], N_BINS)}, tuple(part.tolist()))
