"""The use cases the page, the JSON API and the CLI share, with the micro-batcher and the page's links.

The public HTTP API's functions, defined once for both ways they are served: the typed JSON
routes of ``server.py`` (``POST /v1/<name>``) and the gradio endpoints of ``ui/api.py``
(``/predict`` ... for ``gradio_client``). No gradio, no FastAPI: each takes a loaded model and the
request's values and answers a plain dict (the JSON the client gets).

``open_model`` is the one way both open the model a request names: the operator's default is
always allowed, folders by path only where the settings allow them, and in public mode another
visitor's run answers as an unknown model.
"""

from __future__ import annotations

import asyncio
import math
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from ..config import Settings
from ..errors import InputError, ModelNotFoundError
from ..evaluate import evaluation_runs
from ..evaluate.evaluation import evaluate_file
from ..interpret.long_documents import attention_windows, explain_windows
from ..interpret.methods import METHODS, compare_methods
from ..interpret.mixing_measures import check_measure, context_mixing
from ..interpret.span_methods import explain_span_by, span_faithfulness
from ..models import visitors
from ..models.answering import answer as answer_questions
from ..models.catalog import list_models
from ..models.heads import SEQUENCE_CLASSIFICATION
from ..models.model_summary import summary as model_summary
from ..models.registry import LoadedModel, load_model, pair_notice
from ..models.tagging import tag as tag_texts
from ..results import FIXED_N_STEPS
from .batching import explain_one, predict_future

__all__ = ["open_model", "delete_visitor_data", "deleted_message", "predict", "predict_async", "tag", "answer",
           "explain_answer", "attention",
           "explain", "compare", "summary", "evaluate", "steps_args", "method_names", "whole_number", "number",
           "finite"]


def open_model(name: str | None, default: str, settings: Settings, owner: str | None = None) -> LoadedModel:
    """The model a request names ("" or None: ``default``). ``owner``: the visitor in public mode
    (``visitors.owner_hash`` of the request's token), None locally."""
    name = (name or "").strip() or default
    if settings.public:
        runs = Path(settings.models_dir) / "runs"
        visitors.check_model(name, default, owner or visitors.NOBODY, runs)
        try:
            return load_model(name, allow_paths=name == default, settings=settings)
        except ModelNotFoundError as exc:
            raise ModelNotFoundError(hide_others(str(exc), owner or visitors.NOBODY, settings)) from None
    return load_model(name, allow_paths=name == default or settings.allow_local_paths, settings=settings)


def hide_others(message: str, owner: str, settings: Settings) -> str:
    """A registry message with the run names ``owner`` may not see taken out (its "Available: ..." list)."""
    every = list_models(settings.models_dir)
    seen = {m["name"] for m in visitors.visible(every, owner, Path(settings.models_dir) / "runs")}
    return visitors.hide_names(message, [m["name"] for m in every if m["name"] not in seen])


def delete_visitor_data(models_dir: str | Path, owner: str, folders=()) -> list[str]:
    """Public mode's "Delete my data": every run of ``owner``, every evaluation of theirs and the given
    per-owner ``folders`` (zips, outputs) removed; what was removed (``runs/<name>``,
    ``evaluations/<name>``, the folders). Refuses no owner (that would be everyone's)."""
    removed = visitors.delete_owner_data(Path(models_dir) / "runs", owner, folders)
    return removed + [f"evaluations/{n}" for n in evaluation_runs.delete_owner_evaluations(models_dir, owner)]


def deleted_message(removed: list[str], show=str) -> str:
    """What ``delete_visitor_data`` removed, in one sentence (``show``: how a run's name is written)."""
    runs = [r for r in removed if r.startswith("runs/")]
    evaluations = [r for r in removed if r.startswith("evaluations/")]
    return (f"Deleted your data: {len(runs)} run(s)" + (f" ({', '.join(map(show, runs))})" if runs else "")
            + (f", {len(evaluations)} evaluation(s)" if evaluations else "")
            + " and your downloads. Files you uploaded were already deleted once read.")


def _pair(pair: str | None) -> str | None:
    return pair if pair and pair.strip() else None


def predict(lm: LoadedModel, text: str, pair: str | None = "", window: bool = False, stride: int = 128,
            pool: str = "mean", calibrated: bool = True) -> dict:
    """Class probabilities: {"label", "scores": {class: probability}, "truncated", "text"}; batched with
    concurrent calls (bertviz_app.service.batching). ``calibrated=False``: the model's raw softmax even where its
    folder holds a calibration.json (then "temperature" says what the calibrated scores were divided by).
    "notices": what the answer needs said beside it (a pair given to a model trained on single texts:
    ``registry.pair_notice``); absent when there is nothing to say."""
    return _answer(lm, pair, _queued(lm, text, pair, window, stride, pool, calibrated).result())


async def predict_async(lm: LoadedModel, text: str, pair: str | None = "", window: bool = False, stride: int = 128,
                        pool: str = "mean", calibrated: bool = True) -> dict:
    """``predict`` for a caller on an event loop (gradio's queue): the same checks, batch and answer, the batch
    awaited instead of a worker thread parked on it for the batch's whole wait."""
    return _answer(lm, pair, await asyncio.wrap_future(_queued(lm, text, pair, window, stride, pool, calibrated)))


def _queued(lm: LoadedModel, text, pair, window, stride, pool, calibrated) -> Future:
    """One text checked (a bad text, stride or pool: InputError saying what to send) and queued in the model's
    micro-batcher; its Future holds the Prediction."""
    lm.require_head(SEQUENCE_CLASSIFICATION, "predict classifies whole texts")  # before it joins a batch
    if isinstance(stride, float) and stride.is_integer():  # JSON clients may send 128.0
        stride = int(stride)
    return predict_future(lm, text, _pair(pair), window=bool(window), stride=stride, pool=pool,
                          calibrated=bool(calibrated))


def _answer(lm: LoadedModel, pair, prediction) -> dict:
    out = prediction.to_dict()
    if note := pair_notice(lm, _pair(pair)):
        out["notices"] = [note]
    return out


def tag(lm: LoadedModel, text: str, aggregation: str | None = "simple", window: bool = True,
        stride: int | None = None) -> dict:
    """A token classifier's entities in one text (``tagging.tag``): {"text", "entities": [{"text", "label",
    "start", "end", "score"}], "tokens", "labels", "truncated"}. A sequence classifier: InputError naming its
    head; a long text is read in overlapping windows unless ``window`` is False (then it is cut: truncated)."""
    stride = None if stride is None else whole_number(stride, "stride")
    return tag_texts(lm, text, aggregation=aggregation or "simple", window=bool(window), stride=stride)[0].to_dict()


def answer(lm: LoadedModel, question: str, context: str, n_best: int = 5, max_answer_len: int = 30,
           no_answer_threshold: float | None = 0.0, stride: int | None = None) -> dict:
    """A question answering model's answer to one question in a context (``answering.answer``): {"question",
    "answer", "start", "end", "score", "no_answer", "no_answer_score", "n_best": [{"answer", "start", "end",
    "score"}], "windows"}, ``context[start:end] == answer``. A classifier or a tagger: InputError naming its head;
    a long context is read in overlapping windows (``stride`` context tokens shared, None: 128 or half the
    window); ``no_answer_threshold`` None: never "no answer"."""
    threshold = None if no_answer_threshold is None else number(no_answer_threshold, "no_answer_threshold")
    return answer_questions(lm, question, context, n_best=whole_number(n_best, "n_best"),
                            max_answer_len=whole_number(max_answer_len, "max_answer_len"),
                            no_answer_threshold=threshold,
                            stride=None if stride is None else whole_number(stride, "stride"))[0].to_dict()


def explain_answer(lm: LoadedModel, question: str, context: str, span=None, parts: str | list[str] | None = "span",
                   objective: str = "logprob", baseline: str = "pad", n_steps: int | None = None,
                   tolerance: float | None = None, max_answer_len: int = 30, stride: int | None = None,
                   method: str = "integrated_gradients", n_samples: int | None = None, seed: int = 0,
                   features: str = "context", faithfulness: bool = False) -> dict:
    """A question answering model's answer explained (``span_methods.explain_span_by``): {"question", "context",
    "explanations": [one per part: its target, tokens, sides, scores, words, totals, f_x, f_baseline, delta,
    relative_delta, n_steps, ...]}. ``span``: None or "" (the predicted answer), "no-answer", or [start, end]
    characters of the context; ``parts``: "span", "start", "end" (a list or comma-separated: several, in one
    computation). ``method``: integrated_gradients (steps as ``explain``'s), occlusion, lime or kernel_shap
    (``n_samples``, ``seed``; ``features``: whose words are sampled, "context" or "both"); ``faithfulness``: each
    explanation with its ERASER comprehensiveness and sufficiency on the span's probability (removing the words of
    ``features``). A classifier or a tagger: InputError naming its head."""
    if span == "":
        span = None
    elif isinstance(span, (list, tuple)):
        if len(span) != 2:
            raise InputError(f"span must be [start, end] (two character offsets into the context), \"no-answer\" or "
                             f"null (the predicted answer), got {list(span)!r}.")
        span = (whole_number(span[0], "span's start"), whole_number(span[1], "span's end"))
    n, tol = steps_args(n_steps, tolerance)
    stride = None if stride is None else whole_number(stride, "stride")
    max_answer_len = whole_number(max_answer_len, "max_answer_len")
    records = explain_span_by(lm, question, context, span, method=method,
                              part=list(method_names(parts, "parts")) or ["span"], target=objective,
                              baseline=baseline, n_steps=n, tolerance=tol, n_samples=n_samples, seed=seed,
                              side=features, max_answer_len=max_answer_len, stride=stride)
    explanations = [r.to_dict() | {"relative_delta": finite(r.relative_delta) if r.relative_delta is not None
                                   else None} for r in records]
    if faithfulness:
        faiths = span_faithfulness(lm, records, side=features, max_answer_len=max_answer_len, stride=stride)
        for e, f in zip(explanations, faiths):
            e["faithfulness"] = f.to_dict()
    return {"question": question, "context": context, "explanations": explanations}


def attention(lm: LoadedModel, text: str, pair: str | None = "", layer: int = 0, measure: str | None = "raw",
              window: bool = False, stride: int | None = None, window_index: int = 0) -> dict:
    """{"tokens", "measure", "weights", "combined", "aggregated", "cls_scores", "truncated"} of one
    context-mixing measure (raw attention by default; ``bertviz_app.interpret.mixing_measures``): weights
    (L, H, T, T) per head (H = 1 for per-layer measures), combined (L, T, T) per layer, aggregated
    (L, T, T) across layers up to each, for every layer (layer 0) or layer k (1-based) as a list of
    one; cls_scores (T,) the last layer's aggregated [CLS] row. An unknown measure, or one the
    model's family cannot have: InputError naming those that work. ``window``: window ``window_index``
    of a long text (``long_documents.attention_windows``), with the document's merged [CLS] rows under
    "document"."""
    measure = check_measure(lm, "raw" if measure is None or measure == "" else measure)
    if window:
        return _attention_window(lm, text, pair, layer, stride, window_index, measure)
    mm = context_mixing(lm, text, pair=_pair(pair), measure=measure)  # raw: one forward pass, as ``attention``
    info, weights, combined, aggregated = mm.info, mm.weights, mm.combined, mm.aggregated
    n_layers = int(weights.shape[0])
    layer = whole_number(layer or 0, "layer")
    if not 0 <= layer <= n_layers:
        raise InputError(f"layer must be 0 (all) or 1 to {n_layers}, got {layer}.")
    cls_scores = aggregated[-1, 0]  # (T,)
    if layer:
        weights, combined, aggregated = (a[layer - 1 : layer] for a in (weights, combined, aggregated))
    # 5 decimals (rows still sum to 1 within 1e-4 for short texts): float32 -> float64 -> JSON
    # would otherwise spend ~18 characters per weight on noise digits
    r = lambda a: np.round(a, 5).tolist()  # noqa: E731
    return {"tokens": list(info.tokens), "measure": measure, "weights": r(weights), "combined": r(combined),
            "aggregated": r(aggregated), "cls_scores": r(cls_scores), "truncated": info.truncated}


def _attention_window(lm: LoadedModel, text: str, pair: str | None, layer, stride, window_index,
                      measure: str) -> dict:
    stride = None if stride is None else whole_number(stride, "stride")
    d = attention_windows(lm, text, pair=_pair(pair), window=whole_number(window_index or 0, "window_index"),
                          stride=stride, measure=measure)
    layer = whole_number(layer or 0, "layer")
    if not 0 <= layer <= d.maps.num_layers:
        raise InputError(f"layer must be 0 (all) or 1 to {d.maps.num_layers}, got {layer}.")
    out = d.to_dict()
    w = d.maps.weights if not layer else d.maps.weights[layer - 1 : layer]  # (L or 1, H, T, T)
    out["weights"] = np.round(w, 5).tolist()
    return out


def explain(lm: LoadedModel, text: str, target: str | None = "", baseline: str = "pad", n_steps: int | None = None,
            pair: str | None = "", tolerance: float | None = None, window: bool = False,
            stride: int | None = None) -> dict:
    """Integrated Gradients of one text, batched with concurrent calls with equal arguments.
    ``window``: a long text whole, in predict's windows (``long_documents.explain_windows``): one
    score per token of the document, "windows" and each window's prediction."""
    lm.require_head(SEQUENCE_CLASSIFICATION, "explain attributes the class of a whole text")
    n, tol = steps_args(n_steps, tolerance)
    if window:
        d = explain_windows(lm, text, target=target or None, baseline=baseline, pair=_pair(pair), n_steps=n,
                            tolerance=tol, stride=None if stride is None else whole_number(stride, "stride"))
        return d.to_dict()
    attr = explain_one(lm, text, target=target or None, baseline=baseline, n_steps=n, pair=_pair(pair), tolerance=tol)
    out = attr.to_dict()
    out["relative_delta"] = finite(attr.relative_delta)
    out["truncated"] = attr.info.truncated
    return out


def compare(lm: LoadedModel, text: str, methods: str | list[str] | None = "", target: str | None = "",
            baseline: str = "pad", n_steps: int | None = None, pair: str | None = "", tolerance: float | None = None,
            top_k: int = 3, seed: int = 0) -> dict:
    """Attribution methods side by side on one text (``compare_methods``)."""
    lm.require_head(SEQUENCE_CLASSIFICATION, "compare attributes the class of a whole text")
    n, tol = steps_args(n_steps, tolerance)
    c = compare_methods(lm, text, methods=method_names(methods) or METHODS, target=target or None, baseline=baseline,
                        pair=_pair(pair), n_steps=n, top_k=whole_number(top_k, "top_k"),
                        seed=whole_number(seed, "seed"), tolerance=tol)
    return c.to_dict()


def summary(lm: LoadedModel) -> dict:
    """Architecture, parameter counts by component, config, labels, device and dtype."""
    return model_summary(lm).to_dict()


def evaluate(lm: LoadedModel, csv: str, text_column: str | None = None, label_column: str | None = None,
             pair_column: str | None = None, words=(), hold_out: float = 0.5, seed: int = 0, layers: bool = False,
             compare_with: LoadedModel | None = None) -> dict:
    """A small labelled file sent as text, evaluated (``evaluation.evaluate_file``): its JSON, as the
    CLI's ``evaluate --json`` prints it. ``layers``: with a probe per layer ("layers");
    ``compare_with``: a second model (opened with ``open_model``) on the same rows ("comparison")."""
    if not isinstance(csv, str):
        raise InputError("csv must be the file's text (a header row, then one row per example).")
    words = [words] if isinstance(words, str) else list(words or ())
    ev = evaluate_file(lm, csv.encode("utf-8"), text_column or None, label_column or None, pair_column or None,
                       words=words, hold_out=number(hold_out, "hold_out"), seed=whole_number(seed, "seed"),
                       name="upload.csv", layers=bool(layers), compare_with=compare_with)
    return ev.to_dict()


def steps_args(n_steps, tolerance) -> tuple[int | None, float | None]:
    """Integrated Gradients' (n_steps, tolerance) for the core: None for what the client left out
    (both out: the core's default, adaptive at DEFAULT_TOLERANCE); tolerance 0: exactly n_steps
    (FIXED_N_STEPS when none is sent), as before the adaptive default."""
    n = None if n_steps is None else whole_number(n_steps, "n_steps")
    tol = None if tolerance is None else number(tolerance, "tolerance")
    if tol == 0:
        return (FIXED_N_STEPS if n is None else n), None
    return n, tol


def method_names(value, what: str = "methods") -> tuple[str, ...]:
    """Names (of methods, or ``what``) from "a, b" or ["a", "b"]."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{what} must be comma-separated names or a list of names, got {value!r}.")
    return tuple(v.strip() for v in value if v.strip())


def whole_number(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"{name} must be a whole number, got {value!r}.")
    try:
        f = float(value)
    except ValueError:
        raise InputError(f"{name} must be a whole number, got {value!r}.") from None
    if not f.is_integer():
        raise InputError(f"{name} must be a whole number, got {value!r}.")
    return int(f)


def number(value, name: str) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number, got {value!r}.") from None
    if not math.isfinite(f):
        raise InputError(f"{name} must be a finite number, got {value!r}.")
    return f


def finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None
