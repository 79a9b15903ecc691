"""The public API as gradio endpoints (``/predict``, ``/attention``, ``/explain``, ``/compare``,
``/summary``, ``/evaluate``, ``/tag``, ``/answer``) for ``gradio_client`` / ``@gradio/client``: queued, with
server-sent events.

The work is ``bertviz_app.service``'s, the same as the typed JSON routes of ``bertviz_app.serve.server``
(``POST /v1/predict`` ...), which skip gradio's queue and event stream. Concurrent /predict calls
wait together in the core's micro-batcher (``bertviz_app.service.batching``), which runs them as one
length-sorted batch.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import anyio
import gradio as gr
from gradio.data_classes import FileData

import bertviz_app as core
from bertviz_app import service
from bertviz_app.config import Settings

from . import guards, model_loading, uploads, visitor
from .evaluate_events import parse_words
from .finetune_view import load_base

__all__ = ["functions", "register", "refuse_malformed_calls", "PREDICT_CONCURRENCY", "EXPLAIN_CONCURRENCY"]

log = logging.getLogger(__name__)

# /predict calls let in at once: they wait in the core's micro-batcher, which runs them as one batch
PREDICT_CONCURRENCY = 32
EXPLAIN_CONCURRENCY = 4  # /explain calls let in at once (concurrent ones with equal arguments share passes)


def functions(default: str, settings: Settings) -> dict[str, Callable]:
    """{endpoint name: function} with the signatures gradio_client sees; ``default`` is the model a
    call without ``model`` uses."""

    def load(model: str):
        return model_loading.load(model, default, settings)

    return {**_model_endpoints(default, load), "evaluate": _evaluate_endpoint(default, settings, load)}


def _model_endpoints(default: str, load: Callable) -> dict[str, Callable]:
    """/predict, /attention, /explain, /compare and /summary: one text (or none) on the model ``load`` opens."""

    async def predict(text: str, pair: str = "", model: str = default, window: bool = False, stride: int = 128,
                pool: str = "mean", calibrated: bool = True) -> dict:
        """Class probabilities: {"label", "scores": {class: probability}, "truncated", "text"}. A text longer
        than the model reads is cut ("truncated": true) unless window=true: then it is classified in
        overlapping windows (stride tokens shared by neighbours) whose logits are pooled by pool
        ("mean" or "max"), and "windows" says how many were read. calibrated=false: the raw probabilities
        even where the model folder holds a calibration.json ("temperature" shows the one applied)."""
        # the model opened in a worker thread (a first open takes seconds), the batch awaited on gradio's loop
        lm = await anyio.to_thread.run_sync(load, model)
        return await service.predict_async(lm, text, pair, window, stride, pool, calibrated)

    def attention(text: str, pair: str = "", layer: int = 0, model: str = default, measure: str = "raw",
                  window: bool = False, stride: int | None = None, window_index: int = 0) -> dict:
        """Attention weights or another context-mixing measure: {"tokens", "measure", "weights", "combined",
        "aggregated", "cls_scores", "truncated"} with weights[layer][head][i][j] (what token i takes from token
        j; raw: query i, key j; one head for value_zeroing and alti), combined[layer][i][j] (heads combined),
        aggregated[layer][i][j] (across layers up to that one) and cls_scores (the last aggregated [CLS] row).
        measure: raw, norm (attention-norm), value_zeroing or alti. layer=0 returns every layer, layer=k
        (1-based) only that one (as a list of one). window=true: a text longer than the model reads, in predict's
        overlapping windows (stride tokens shared by neighbours, null: 128): window window_index's (0-based)
        "weights" and, under "document", the [CLS] row and aggregated [CLS] row of each layer merged over every
        token, with "windows" (how many) and "window_span"."""
        return service.attention(load(model), text, pair, layer, measure, window, stride, window_index)

    def explain(text: str, target: str = "", baseline: str = "pad", n_steps: int | None = None, pair: str = "",
                model: str = default, tolerance: float | None = None, window: bool = False,
                stride: int | None = None) -> dict:
        """Integrated Gradients: {"tokens", "attributions", "target", "delta", "relative_delta", "n_steps",
        "tolerance", "baseline", "f_x", "f_baseline", "truncated"}. target "" = the predicted class. Steps: by
        default as many as it takes for relative_delta <= 0.05 (the page's choice); tolerance > 0: for that
        relative_delta (n_steps is then ignored); n_steps alone, or tolerance 0: exactly n_steps (default 50).
        The answer's "tolerance" (null: fixed) and "n_steps" say which was used. window=true: a text longer than
        the model reads explained whole, each of predict's windows (stride tokens shared, null: 128) explained
        and the scores merged: one per token of the document, with "windows", "offsets", "prediction" and
        "window_predictions"."""
        return service.explain(load(model), text, target, baseline, n_steps, pair, tolerance, window, stride)

    def compare(text: str, methods: str = "", target: str = "", baseline: str = "pad", n_steps: int | None = None,
                pair: str = "", model: str = default, tolerance: float | None = None, top_k: int = 3,
                seed: int = 0) -> dict:
        """Attribution methods side by side on one text: {"tokens", "methods": {name: attribution with its
        "seconds", "n_forward", "n_backward", "faithfulness" (ERASER comprehensiveness/sufficiency AOPC) and
        "rollout_spearman"}, "spearman", "top_k_overlap" (method x method, in the order asked), "top_k",
        "rollout", "most_faithful", "reading"}. methods: comma-separated names (or a JSON list); "" = all of
        integrated_gradients, gradient_x_input, saliency, occlusion, kernel_shap, lime. Every method explains
        the same class (target "" = the predicted one). Integrated Gradients' steps as for /explain. A per-word
        method that would take too long is refused up front."""
        return service.compare(load(model), text, methods, target, baseline, n_steps, pair, tolerance, top_k, seed)

    def summary(model: str = default) -> dict:
        """Architecture, parameter counts by component, config, labels, device and dtype."""
        return service.summary(load(model))

    def tag(text: str, model: str = default, aggregation: str = "simple", window: bool = True,
            stride: int | None = None) -> dict:
        """A token classifier's entities (a named-entity tagger): {"text", "entities": [{"text", "label", "start",
        "end", "score"}], "tokens", "labels", "truncated"}, each entity's start:end slicing the text back to it.
        aggregation: simple, first, average or max (how word-pieces merge into words, as transformers names
        them). A text longer than the model reads is tagged in overlapping windows (stride tokens shared, null:
        a quarter of the model's length) unless window=false. A classifier model: refused, naming its head."""
        return service.tag(load(model), text, aggregation, window, stride)

    def answer(question: str, context: str, model: str = default, n_best: int = 5, max_answer_len: int = 30,
               no_answer_threshold: float | None = 0.0, stride: int | None = None) -> dict:
        """A question answering model's answer, a span of the context: {"question", "answer", "start", "end",
        "score", "no_answer", "no_answer_score", "n_best": [{"answer", "start", "end", "score"}], "windows"}, with
        context[start:end] == answer. "No answer" ("" at 0:0) when its score beats the best span's by more than
        no_answer_threshold (null: never). A long context is read in overlapping windows (stride context tokens
        shared, null: 128 or half the window). A classifier or a tagger: refused, naming its head."""
        return service.answer(load(model), question, context, n_best, max_answer_len, no_answer_threshold, stride)

    return {"predict": predict, "attention": attention, "explain": explain, "compare": compare, "summary": summary,
            "tag": tag, "answer": answer}


def _evaluate_endpoint(default: str, settings: Settings, load: Callable) -> Callable:
    """/evaluate: an uploaded labelled file, read within ``settings``' limits, on the model ``load`` opens."""

    def evaluate(file: FileData, text_column: str = "", label_column: str = "", pair_column: str = "",
                 words: str = "", model: str = default, layers: bool = False, compare_with: str = "") -> dict:
        """Evaluate a model on a labelled file (.csv, .tsv or .txt with a header row; gradio_client:
        handle_file("reviews.csv")): the evaluation's JSON as `bertviz-app evaluate FILE --json` prints
        it: rows, accuracy with its 95% interval, macro-F1, per_class, confusion, slices worst first
        (true label, predicted label, length, each of words, other columns), calibration before/after a
        temperature fitted on half the rows, the most confident misclassified rows, notices. Columns left
        empty are guessed; words: comma-separated ("not, but"), each a slice of the rows containing it.
        layers=true adds "layers" (a linear probe's accuracy on the [CLS] and mean vectors at every depth);
        compare_with (a second model with the same classes) adds "comparison" (both models' accuracy, the
        rows only one gets right, McNemar's exact p and its reading, per-slice differences)."""
        path = uploads.upload_path(file)
        visitor.upload(path)  # public mode: counted, and deleted once read
        try:
            table = core.read_table(path, max_upload_mb=settings.max_upload_mb, max_rows=settings.max_rows)
        finally:
            visitor.discard(path)
        lm = load(model)
        other = load_base(compare_with.strip(), default, settings) if compare_with and compare_with.strip() else None
        ev = core.evaluate_file(lm, table, text_column or None, label_column or None, pair_column or None,
                                words=parse_words(words), layers=bool(layers), compare_with=other)
        return ev.to_dict()

    return evaluate


def register(default: str, settings: Settings, heavy: dict) -> None:
    """The functions as gradio endpoints (inside a Blocks context). ``heavy``: the app's
    one-at-a-time concurrency group, shared with Analyze (attention maps are large and unbatched)."""
    fns = functions(default, settings)
    gr.api(guards.guard(fns["predict"]), api_name="predict", concurrency_limit=PREDICT_CONCURRENCY,
           concurrency_id="predict")
    gr.api(guards.guard(fns["attention"]), api_name="attention", **heavy)
    gr.api(guards.guard(fns["explain"]), api_name="explain", concurrency_limit=EXPLAIN_CONCURRENCY,
           concurrency_id="explain")
    gr.api(guards.guard(fns["compare"]), api_name="compare", **heavy)
    gr.api(guards.guard(fns["summary"]), api_name="summary", concurrency_limit=2)
    gr.api(guards.guard(fns["tag"]), api_name="tag", concurrency_limit=EXPLAIN_CONCURRENCY, concurrency_id="tag")
    gr.api(guards.guard(fns["answer"]), api_name="answer", concurrency_limit=EXPLAIN_CONCURRENCY,
           concurrency_id="answer")
    gr.api(guards.guard(fns["evaluate"]), api_name="evaluate", concurrency_limit=1, concurrency_id="evaluate")



MALFORMED = ("GET /gradio_api/info lists each endpoint's inputs in order, with their types and defaults "
             "(gradio_client fills the defaults in).")


def malformed_call(block_fn, inputs: list, exc: Exception) -> gr.Error:
    """The message for a call to gradio's API whose inputs do not fit the event (too few, or one gradio
    cannot read as its component's type): what to send instead, without echoing the values sent."""
    name = block_fn.api_name or block_fn.name or "this endpoint"
    wanted = len(block_fn.inputs)
    if len(inputs) < wanted:
        text = (f"{name} takes {wanted} input{'s' * (wanted != 1)}; the request sent {len(inputs)}. "
                f"Send them all, in order: {MALFORMED}")
    else:
        at = re.search(r"at index (\d+)", str(exc))  # gradio's ComponentProcessingError names the index
        which = f"Input {int(at[1]) + 1}" if at else "An input"
        text = f"{which} of {name} is not of the type it takes. {MALFORMED}"
    log.info("Refused a request: malformed call to %s", name)
    return gr.Error(text, print_exception=False)


def refuse_malformed_calls(demo: gr.Blocks) -> None:
    """One answer for calls to gradio's API whose inputs do not fit an event, whichever door they came through
    (``/gradio_api/call/<name>``, ``/call/v2/<name>``, ``/run/<name>``, ``/queue/join``): gradio answers too few
    inputs with ``{"error": null}`` and a wrongly typed one with a generic error, logging a traceback for
    each. Here each is a clear message that says what to send, logged as one line. (A named call with a
    missing or unknown argument is the serving layer's to answer: ``serve.server.refuse_named_arguments``.)"""
    from gradio.exceptions import ComponentProcessingError

    preprocess = demo.preprocess_data

    async def checked(block_fn, inputs, state, explicit_call=False):
        if inputs is not None and len(inputs) < len(block_fn.inputs):
            raise malformed_call(block_fn, inputs, ValueError("too few inputs"))
        try:
            return await preprocess(block_fn, inputs, state, explicit_call)
        except ComponentProcessingError as exc:
            raise malformed_call(block_fn, inputs, exc) from None

    demo.preprocess_data = checked
