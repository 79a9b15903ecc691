"""The one "analyze everything" computation behind Analyze: the quick part (prediction, attention,
[CLS] lens, a context-mixing measure) and the slow part (Integrated Gradients, faithfulness, the [CLS]
path), kept per user as a ``Record`` in ``gr.State`` and re-rendered without recomputing."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import bertviz_app as core
from bertviz_app.interpret.entity_attribution import EntityAttribution, entity_pieces
from bertviz_app.interpret.mixing_measures import MixingMaps, check_measure, context_mixing, supported_measures
from bertviz_app.interpret.span_attribution import SpanAttribution
from bertviz_app.models.encoding import check_has_words
from bertviz_app.models.inference import applied_temperature

from .control_values import target_arg, tolerance_arg

PATH_STEPS = 20  # Integrated Gradients steps per layer for the [CLS] path


@dataclass(frozen=True)
class Calibration:
    """How the Predict tab's probabilities were temperature-scaled (the model folder's calibration.json):
    ``Record.prediction`` holds softmax(logits / temperature), ``raw_probs`` the model's own softmax
    (what the attributions, the [CLS] lens and faithfulness read). ``rows``/``source``: what T was
    fitted on, None where the file does not say."""

    temperature: float
    raw_probs: tuple[float, ...]
    rows: int | None = None
    source: str | None = None


@dataclass(frozen=True, eq=False)
class Record:
    """Everything one Analyze computed; kept per user in gr.State, re-rendered without recomputing."""

    model: str
    labels: tuple[str, ...]
    device_label: str
    prediction: core.Prediction
    maps: core.AttentionMaps
    lens: core.ClsLens
    # None while Integrated Gradients are still running (Analyze shows the rest first) or skipped
    attribution: core.Attribution | None = None
    path: core.ClsPath | None = None
    faith: core.Faithfulness | None = None  # ERASER faithfulness of ``attribution``
    baseline_jumps: bool = False  # the path from the attribution's baseline starts with a jump (core.baseline_jumps)
    ig_failed: bool = False  # Analyze's Integrated Gradients ended in an error (the tab says so, not "being computed")
    # the model's settings' min_change (BERTVIZ_MIN_CHANGE): the floor of the colour scales drawn for this text
    min_change: float = core.Settings.min_change
    # the Attention tab's measure other than raw attention (value zeroing, ALTI...), None for raw attention
    mixing: MixingMaps | None = None
    # the prediction is temperature-scaled (calibration.json): T, the raw probabilities; None: they are raw
    calibration: Calibration | None = None

    @property
    def text(self) -> str:
        return self.prediction.text

    @property
    def pair(self) -> str | None:
        return self.prediction.pair


@dataclass(frozen=True, eq=False)
class TagRecord:
    """A token classifier's (a tagger's) Analyze, kept per user in gr.State as ``Record`` is: its tagging, the text's
    attention (one forward pass: attention does not depend on the head), the Attention tab's measure, and the
    Attributions tab's last explained target (``explain_entities``: one entity, or one word's tag). No [CLS] lens,
    path or class: a tagger reads every token, not [CLS]."""

    model: str
    labels: tuple[str, ...]
    device_label: str
    tagging: core.Tagging
    maps: core.AttentionMaps
    min_change: float = core.Settings.min_change
    mixing: MixingMaps | None = None
    explained: EntityAttribution | None = None  # None until a target is explained (or while it is computed)
    target: str | None = None  # the target choice ``explained`` answers (``tag_choices``' value)
    ig_failed: bool = False  # Analyze's Integrated Gradients ended in an error

    @property
    def text(self) -> str:
        return self.tagging.text

    @property
    def pair(self) -> None:
        return None  # a tagger reads one text


@dataclass(frozen=True, eq=False)
class AnswerRecord:
    """A question answering model's Analyze, kept per user in gr.State as ``Record`` is: its answer (``core.answer``
    with the page's no-answer ``threshold``), the attention of the question and context read together (their first
    window), the Attention tab's measure, and the Attributions tab's last explained target (``explain_answer``: the
    answer span, its start or end, "no answer" or one of the n-best spans). No [CLS] lens, path or class."""

    model: str
    labels: tuple[str, ...]
    device_label: str
    answer: core.Answer
    maps: core.AttentionMaps
    threshold: float | None = 0.0
    min_change: float = core.Settings.min_change
    mixing: MixingMaps | None = None
    explained: SpanAttribution | None = None  # None until a target is explained (or while it is computed)
    target: str | None = None  # the target choice ``explained`` answers (``answer_choices``' value)
    ig_failed: bool = False  # Analyze's Integrated Gradients ended in an error

    @property
    def text(self) -> str:
        return self.answer.question

    @property
    def pair(self) -> str:
        return self.answer.context


HEAD_RECORDS = (TagRecord, AnswerRecord)  # the records of heads that do not read [CLS] (no lens, path or class)


def calibrated_prediction(lm: core.LoadedModel, raw: core.Prediction) -> tuple[core.Prediction, Calibration | None]:
    """``raw`` (predict's ``calibrated=False`` answer) as predict reports it by default: divided by the model's
    temperature where its folder holds a calibration.json (then with a ``Calibration`` carrying the raw
    probabilities and what T was fitted on), else unchanged with None. One forward pass gives both."""
    t = applied_temperature(lm, True)
    if t == 1.0:
        return raw, None
    probs = tuple(float(x) for x in core.rescale_probs(raw.probs, t))
    info = core.calibration_info(lm.path) or {}
    if info.get("temperature") != t:  # the file changed since the model was loaded: T is what was applied
        info = {}
    cal = Calibration(temperature=t, raw_probs=tuple(float(x) for x in raw.probs), rows=info.get("rows"),
                      source=info.get("source"))
    return dataclasses.replace(raw, probs=probs, temperature=t), cal



def analyze_fast(lm: core.LoadedModel, text: str, pair: str | None,
                 progress: Callable[[float, str], Any] | None = None, window: bool = False,
                 measure: str | None = "raw") -> Record:
    """The quick part of Analyze (one forward pass each): prediction, attention, [CLS] lens.
    Shown at once; a long text's Integrated Gradients (``analyze_ig``) can take a minute.
    ``window``: a text past the model's length is classified whole (mean of the logits of
    windows overlapping by a quarter of the length); the charts still read its first window.
    ``measure``: the Attention tab's measure, computed too when it is not raw attention and the
    model's family supports it (``with_measure``)."""
    step = progress or (lambda *_: None)
    pair = pair if pair and pair.strip() else None
    check_has_words(lm, text, pair)  # an empty text, or "[CLS] [SEP]": one clear message before any work
    step(0.05, "Predicting")
    # window stride: a quarter of the model's length shared by neighbours (128 tokens for BERT's 512)
    # batched with /predict; the raw softmax, then temperature-scaled as predict reports it (both kept)
    raw = core.predict_one(lm, text, pair, window=bool(window), stride=lm.max_length // 4, calibrated=False)
    pred, calibration = calibrated_prediction(lm, raw)
    step(0.1, "Reading attention")
    maps = core.attention(lm, text, pair=pair)
    maps = core.AttentionMaps(info=maps.info, weights=maps.weights.astype(np.float16))  # halves per-user memory
    step(0.15, "[CLS] lens")
    lens = core.cls_lens(lm, text, pair=pair)
    rec = Record(lm.name, lm.labels, lm.device_label, pred, maps, lens, min_change=lm.settings.min_change,
                 calibration=calibration)
    if measure and measure != "raw" and measure in supported_measures(lm):
        step(0.17, "Context mixing")
        rec = with_measure(lm, rec, measure)
    return rec


def analyze_tagged(lm: core.LoadedModel, text: str, progress: Callable[[float, str], Any] | None = None,
                   measure: str | None = "raw") -> TagRecord:
    """A tagger's quick part: its tagging (the Predict tab's entities and words) and the text's attention in every
    layer and head (one forward pass each), with the Attention tab's ``measure`` where the family supports it."""
    step = progress or (lambda *_: None)
    check_has_words(lm, text, None)  # an empty text: one clear message before any work
    step(0.05, "Tagging")
    tagging = core.tag(lm, text)[0]
    step(0.1, "Reading attention")
    maps = core.attention(lm, text)
    maps = core.AttentionMaps(info=maps.info, weights=maps.weights.astype(np.float16))  # halves per-user memory
    rec = TagRecord(lm.name, lm.labels, lm.device_label, tagging, maps, min_change=lm.settings.min_change)
    if measure and measure != "raw" and measure in supported_measures(lm):
        step(0.17, "Context mixing")
        rec = with_measure(lm, rec, measure)
    return rec


ENTITY, WORD = "entity:", "word:"  # a tagger's target values: "entity:K" (its K-th entity), "word:K" (its K-th word)


def entity_words(t: core.Tagging, k: int) -> tuple[int, int]:
    """The first and last word (numbered from 1, as the Predict tab's table lists them) of entity ``k``: the words
    whose pieces overlap the entity's."""
    e = t.entities[k]
    a, b = entity_pieces(t.offsets, e.start, e.end)
    hit = [i for i, w in enumerate(t.words, start=1) if w.pieces[0] < b and w.pieces[1] > a]
    return (hit[0], hit[-1]) if hit else (0, 0)


def tag_choices(t: core.Tagging) -> list[tuple[str, str]]:
    """(label, value) of what the Attributions tab can explain for a tagging: each entity as a whole
    ("Paris · LOC (words 3-3)", value "entity:K"), then each word's tag (the predicted label of its first piece, the
    one the word is tagged by: "why “film” is O (word 2)", value "word:K")."""
    out = []
    for k, e in enumerate(t.entities):
        a, b = entity_words(t, k)
        out.append((f"{e.text} · {e.label} (words {a}-{b})", f"{ENTITY}{k}"))
    for k, w in enumerate(t.words):
        out.append((f"why “{w.text}” is {t.labels[w.pieces[0]]} (word {k + 1})", f"{WORD}{k}"))
    return out


def tag_target(t: core.Tagging, value) -> str | None:
    """The target a tagger's Analyze explains: ``value`` when this tagging offers it, else its first entity, else
    None (a text without entities: nothing is explained until a word is chosen)."""
    values = [v for _, v in tag_choices(t)]
    if value in values:
        return value
    return f"{ENTITY}0" if t.entities else None


def tag_target_args(t: core.Tagging, value) -> dict:
    """``explain_entities``' arguments for a target value: ``entities=K``, or ``token=`` the first piece of word K
    (its predicted label explained). Anything this tagging does not offer: InputError saying what to choose."""
    kind, _, index = str(value or "").partition(":")
    n = {ENTITY[:-1]: len(t.entities), WORD[:-1]: len(t.words)}.get(kind)
    if n is None or not index.isdigit() or int(index) >= n:
        what = "an entity or a word" if t.entities else "a word (this text has no entities)"
        raise core.InputError(f"Choose {what} in the target list to explain, then press Explain.")
    k = int(index)
    return {"entities": k} if kind == ENTITY[:-1] else {"token": t.words[k].pieces[0]}


def explain_target(lm: core.LoadedModel, rec: TagRecord, target, baseline: str, n_steps: int,
                   auto: bool = False) -> TagRecord:
    """Integrated Gradients of a tagger's target (``tag_target_args``) on ``rec``'s text (``explain_entities``):
    ``auto``: steps chosen for a relative delta within the page's tolerance, else exactly ``n_steps``."""
    args = tag_target_args(rec.tagging, target)
    tolerance = tolerance_arg(auto)
    [a] = core.explain_entities(lm, rec.text, **args, baseline=baseline, tolerance=tolerance,
                                n_steps=None if tolerance is not None else int(n_steps))
    return dataclasses.replace(rec, explained=a, target=target, ig_failed=False)


def threshold_arg(value) -> float:
    """The page's no-answer threshold (the box's value, or its ``{"threshold": value}`` State) -> ``answer``'s
    ``no_answer_threshold`` (an empty box: 0, the pipeline's handle_impossible_answer); anything else is answer's to
    judge."""
    value = value.get("threshold") if isinstance(value, dict) else value
    return 0.0 if value is None or value == "" else value


def analyze_answer(lm: core.LoadedModel, question: str, context: str, threshold=0.0,
                   progress: Callable[[float, str], Any] | None = None, measure: str | None = "raw") -> AnswerRecord:
    """A question answering model's quick part: its answer (``core.answer``; an empty question or context, a question
    longer than the model reads: its InputError before any other work) and the attention of the question and the
    context read as one pair (the first window's tokens), with the Attention tab's ``measure`` where supported."""
    step = progress or (lambda *_: None)
    step(0.05, "Answering")
    threshold = threshold_arg(threshold)
    [a] = core.answer(lm, question, context, no_answer_threshold=threshold)
    step(0.1, "Reading attention")
    maps = core.attention(lm, a.question, pair=a.context)
    maps = core.AttentionMaps(info=maps.info, weights=maps.weights.astype(np.float16))  # halves per-user memory
    rec = AnswerRecord(lm.name, lm.labels, lm.device_label, a, maps, threshold=threshold,
                       min_change=lm.settings.min_change)
    if measure and measure != "raw" and measure in supported_measures(lm):
        step(0.17, "Context mixing")
        rec = with_measure(lm, rec, measure)
    return rec


def with_threshold(lm: core.LoadedModel, rec: AnswerRecord, threshold) -> AnswerRecord:
    """``rec`` answered again with another no-answer threshold (``core.answer``; the attention and the explained
    target stay: the same question and context)."""
    threshold = threshold_arg(threshold)
    [a] = core.answer(lm, rec.text, rec.pair, no_answer_threshold=threshold)
    return dataclasses.replace(rec, answer=a, threshold=threshold)


# A question answering model's targets: the answer span as a whole, its start, its end, "no answer", then each n-best
# span as a whole ("nbest:K")
SPAN, NBEST = "span", "nbest:"
SPAN_PARTS = (("the answer span: p(start) × p(end)", SPAN), ("its start: p(start)", "start"),
              ("its end: p(end)", "end"), ("no answer: p(start = end = first token)", "no-answer"))


def answer_choices(a: core.Answer) -> list[tuple[str, str]]:
    """(label, value) of what the Attributions tab can explain for an answer: the predicted span (its best span when
    the answer is "no answer"), its start, its end, "no answer", then each n-best span as a whole."""
    head = SPAN_PARTS if a.n_best else SPAN_PARTS[3:]  # no span at all: only "no answer"
    return [*head, *((f"“{s.text}” (n-best {k + 1}, characters {s.start}-{s.end})", f"{NBEST}{k}")
                     for k, s in enumerate(a.n_best))]


def answer_target(a: core.Answer, value) -> str:
    """The target an answer's Analyze explains: ``value`` when offered, else the answer span, or "no answer" when
    that is the answer."""
    values = [v for _, v in answer_choices(a)]
    return value if value in values else "no-answer" if a.no_answer else values[0]


def answer_target_args(a: core.Answer, value) -> dict:
    """``explain_answer``'s ``span`` and ``part`` for a target value (``answer_choices``); anything this answer does
    not offer: InputError saying what to choose."""
    if value in [v for _, v in answer_choices(a)]:
        if value == "no-answer":
            return {"span": "no-answer", "part": SPAN}
        if str(value).startswith(NBEST):
            s = a.n_best[int(str(value)[len(NBEST):])]
            return {"span": (s.start, s.end), "part": SPAN}
        return {"span": None, "part": value}
    raise core.InputError("Choose the answer span, its start or end, no answer or an n-best span in the target "
                          "list to explain, then press Explain.")


def explain_answer_target(lm: core.LoadedModel, rec: AnswerRecord, target, baseline: str, n_steps: int,
                          auto: bool = False) -> AnswerRecord:
    """Integrated Gradients of an answer's target (``answer_target_args``; ``core.explain_answer``) on ``rec``'s
    question and context: ``auto``: steps for a relative delta within the page's tolerance, else ``n_steps``."""
    args = answer_target_args(rec.answer, target)
    tolerance = tolerance_arg(auto)
    [a] = core.explain_answer(lm, rec.text, rec.pair, args["span"], part=args["part"], baseline=baseline,
                              tolerance=tolerance, n_steps=None if tolerance is not None else int(n_steps))
    return dataclasses.replace(rec, explained=a, target=target, ig_failed=False)


def with_measure(lm: core.LoadedModel, rec: Record, measure: str | None) -> Record:
    """``rec`` with the Attention tab's ``measure`` computed for its text (``Record.mixing``; raw
    attention: None, the record's own maps). An unknown or unsupported measure: InputError saying
    which work (``check_measure``)."""
    measure = check_measure(lm, measure or "raw")
    if measure == "raw":
        return dataclasses.replace(rec, mixing=None) if rec.mixing is not None else rec
    if rec.mixing is not None and rec.mixing.measure == measure:
        return rec
    mm = context_mixing(lm, rec.text, rec.pair, measure)
    mm = dataclasses.replace(mm, weights=mm.weights.astype(np.float16))  # per-head maps: half the per-user memory
    return dataclasses.replace(rec, mixing=mm)


def analyze_ig(lm: core.LoadedModel, rec: Record, target: str | None, baseline: str, n_steps: int,
               progress: Callable[[float, str], Any] | None = None, auto: bool = False,
               on_attribution: Callable[[core.Attribution], Any] | None = None) -> Record:
    """The slow part, added to ``rec``: Integrated Gradients, their ERASER faithfulness (one batched
    forward pass) and the [CLS] path. ``on_attribution(attr)`` is called as soon as the Integrated
    Gradients are there (``AnalyzeProgress`` times the [CLS] path from them)."""
    step = progress or (lambda *_: None)
    text, pair = rec.prediction.text, rec.prediction.pair
    step(0.25, "Integrated Gradients")
    attr = core.attribute(lm, text, target=target_arg(target), baseline=baseline, n_steps=int(n_steps), pair=pair,
                          tolerance=tolerance_arg(auto))
    if on_attribution is not None:
        on_attribution(attr)
    step(0.55, "Faithfulness")
    faith = core.faithfulness(lm, attr)
    step(0.6, "[CLS] path through the layers")
    path = core.cls_path(lm, text, target=attr.target, baseline=baseline, n_steps=PATH_STEPS, pair=pair)
    return dataclasses.replace(rec, attribution=attr, path=path, faith=faith,
                               baseline_jumps=core.baseline_jumps(lm, baseline))


def analyze_all(lm: core.LoadedModel, text: str, pair: str | None, target: str | None, baseline: str,
                n_steps: int, progress: Callable[[float, str], Any] | None = None, auto: bool = False) -> Record:
    """predict + attention + [CLS] lens + attribution + [CLS] path, once."""
    rec = analyze_fast(lm, text, pair, progress)
    return analyze_ig(lm, rec, target, baseline, n_steps, progress, auto)
